"""Event-loop lag while the controller writes 6,667 partition states (the ISR shrinks of a
controlled shutdown at 10,000 partitions) to a real ZooKeeper: the update split over
concurrent worker threads, 1,000 partitions each (how weir.controller.executor.run did it
before), against one worker thread for the whole update (how it does it now); interleaved
pairs.  Reported per run: wall time, this process's CPU, and the worst lateness of a task
sleeping 1 ms on the event loop.

    .venv/bin/python -m bench run zk_write_lag            # ~1 min, starts its own ZooKeeper
"""
import asyncio
import os
import tempfile
import time
from pathlib import Path

from weir.common import TopicPartition
from weir.controller import executor
from weir.controller.effects import ZkUpdatePartitionStates
from weir.coordination.codecs import LeaderIsr
from weir.coordination.zk import ZkClient
from weir.coordination.zkserver import ZooKeeperServer

N = 6667
CHUNK = 1000


async def split_on_threads(zk, op):
    """The former executor.run: one worker thread per 1,000 partitions, all at once."""
    items = list(op.states.items())
    chunks = [dict(items[i:i + CHUNK]) for i in range(0, len(items), CHUNK)]
    results = await asyncio.gather(*(asyncio.to_thread(zk.update_partition_states, c,
                                                       op.epoch_zk_version) for c in chunks))
    merged = {}
    for r in results:
        merged.update(r)
    return merged

async def lagged(work):
    worst, stop = 0.0, False
    async def probe():
        nonlocal worst
        while not stop:
            t = time.perf_counter(); await asyncio.sleep(0.001)
            worst = max(worst, time.perf_counter() - t - 0.001)
    p = asyncio.create_task(probe())
    c0 = time.process_time(); t0 = time.perf_counter()
    await work()
    wall = time.perf_counter() - t0; cpu = time.process_time() - c0
    stop = True; await p
    return wall, cpu, worst

def main():
    with tempfile.TemporaryDirectory() as tmp:
        server = ZooKeeperServer(Path(tmp) / "zk"); server.start(timeout_s=60)
        try:
            zk = ZkClient(server.connect_string, session_timeout_ms=6000, connection_timeout_ms=20000)
            zk.start(); zk.ensure_paths()
            epoch, ver = zk.try_become_controller(1)
            tps = [TopicPartition(f"t{i // 1000}", i % 1000) for i in range(N)]
            for t in sorted({tp.topic for tp in tps}):
                zk.create_topic(t, {tp.partition: [1, 2, 3] for tp in tps if tp.topic == t}, {})
            states = {tp: LeaderIsr(leader=1, leader_epoch=0, isr=[1, 2, 3], controller_epoch=epoch, zk_version=-1) for tp in tps}
            created = zk.create_partition_states(states, ver)
            cur = {tp: s for tp, s in created.items()}
            async def run(mode):
                nonlocal cur
                new = {tp: LeaderIsr(leader=1, leader_epoch=s.leader_epoch, isr=[1, 2] if s.isr == [1, 2, 3] else [1, 2, 3], controller_epoch=epoch, zk_version=s.zk_version) for tp, s in cur.items()}
                op = ZkUpdatePartitionStates(new, ver)
                if mode == "threads":
                    work = lambda: split_on_threads(zk, op)
                else:
                    work = lambda: asyncio.to_thread(executor.execute, zk, op)
                res = None
                async def w():
                    nonlocal res
                    res = await work()
                out = await lagged(w)
                cur = res
                assert all(isinstance(v, LeaderIsr) for v in res.values())
                return out
            async def all_runs():
                print(f"load average {os.getloadavg()}")
                for _round in range(4):
                    for mode in ("threads", "one"):
                        wall, cpu, worst = await run(mode)
                        print(f"{mode:8s} wall {wall*1000:6.0f} ms  process cpu {cpu*1000:6.0f} ms  worst loop lag {worst*1000:6.1f} ms", flush=True)
            asyncio.run(all_runs())
            zk.stop()
        finally:
            server.stop()
main()
