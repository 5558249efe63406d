"""The leader's CPU per partition of an idle follower fetch, through the Fetch handler.

In-process, over a real ReplicaManager, LogManager (temp dir), FetchSessionCache and the
Fetch handler (``weir.server.handlers.fetch``) with requests built as the follower's fetcher
builds them (Fetch v13, topics by id, ``last_fetched_epoch`` set; and v12, by name, as it
fetches a partition without a topic id), both in one run.  N partitions are led here
(broker 1) with brokers 2 and 3 followers in the ISR, caught up.  The follower's session
is created by a full fetch; then each measured fetch is what an idle follower sends all day:
an incremental fetch naming no partition.  Measured with ``time.process_time`` (CPU of this
process, not wall-clock):

* ``answer now``: ``max.wait.ms`` 0, the fetch is read and answered at once;
* ``long poll``: ``max.wait.ms`` 20, the fetch waits in the purgatory, times out and is
  answered (what an idle follower's 500 ms long poll costs the leader per cycle);

with the broker's garbage-collector settings (``weir.server.gc_tuning``), each as µs of
CPU per partition in the session, with the Python function calls per fetch
(cProfile's count, which does not depend on the machine's load).  Compare commits by
running it with ``PYTHONPATH`` set to another checkout.

    .venv/bin/python -m bench run idle_fetch [--partitions 3333] [--fetches 20] [--versions 13,12]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import datetime
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

from kio.index import load_request_schema

from bench.harness import out_dir
from weir.common import TopicPartition
from weir.protocol import codec
from weir.protocol.errors import ErrorCode
from weir.replication.partition import LeaderState
from weir.replication.replica_manager import PartitionStateUpdate, ReplicaManager
from weir.server.fetch_session import FetchSessionCache
from weir.server.gc_tuning import freeze_startup_heap, tune_thresholds
from weir.server.handlers import fetch as fetch_handler
from weir.storage.log import LogConfig
from weir.storage.log_manager import LogManager

TOPIC_SIZE = 1000  # partitions per topic, as bench/control_plane.py creates them


def _manager(path: Path, n: int) -> tuple[ReplicaManager, list[TopicPartition],
                                          dict[str, uuid.UUID]]:
    lm = LogManager([path], LogConfig.from_dict({}))
    lm.startup(0)
    rm = ReplicaManager(1, lm, lambda _t: LogConfig.from_dict({}), lambda _t: 2)
    tps = [TopicPartition(f"idle-{i // TOPIC_SIZE}", i % TOPIC_SIZE) for i in range(n)]
    ids = {tp.topic: uuid.uuid5(uuid.NAMESPACE_OID, tp.topic) for tp in tps}
    state = LeaderState(leader=1, leader_epoch=3, isr=[1, 2, 3], replicas=[1, 2, 3],
                        partition_epoch=0, controller_epoch=1)
    rm.apply_leader_and_isr(
        1, {tp: PartitionStateUpdate(state, ids[tp.topic], True) for tp in tps}, False)
    return rm, tps, ids


def _context(rm: ReplicaManager, cache: FetchSessionCache, version: int,
             ids: dict[str, uuid.UUID]) -> SimpleNamespace:
    def partition_error(_tp, code):
        return code

    names = {tid: name for name, tid in ids.items()}
    return SimpleNamespace(
        version=version, replica_manager=rm, fetch_sessions=cache, broker_id=1,
        metadata=SimpleNamespace(topic_by_id=names.get, partition=lambda _tp: None),
        partition_error=partition_error, config=SimpleNamespace(get=lambda _k: None),
        listener="PLAINTEXT", authorizer=None)


def _request(version: int, ids: dict[str, uuid.UUID], replica_id: int, max_wait_ms: int,
             session_id: int, epoch: int, tps: list[TopicPartition],
             leo: dict[TopicPartition, int]):
    by_topic: dict[str, list[dict]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append({
            "partition": tp.partition, "current_leader_epoch": 3, "fetch_offset": leo[tp],
            "last_fetched_epoch": 3, "log_start_offset": 0, "partition_max_bytes": 1 << 20})
    topics = [{"topic_id": ids[t], "partitions": p} if version >= 13
              else {"topic": t, "partitions": p} for t, p in by_topic.items()]
    return codec.build(
        load_request_schema(1, version), replica_id=replica_id,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1,
        max_bytes=10 << 20, isolation_level=0, session_id=session_id, session_epoch=epoch,
        rack_id="", topics=topics, forgotten_topics_data=[])


async def _run(rm: ReplicaManager, tps: list[TopicPartition], ids: dict[str, uuid.UUID],
               version: int, fetches: int, profile: bool) -> dict:
    cache = FetchSessionCache()
    ctx = _context(rm, cache, version, ids)
    leo = {tp: rm.partitions[tp].log.log_end_offset for tp in tps}
    sessions = {}
    for follower in (2, 3):  # full fetches: each follower's session
        before = set(cache.sessions)
        await fetch_handler.handle(ctx, _request(version, ids, follower, 0, 0, 0, tps, leo))
        (sessions[follower],) = set(cache.sessions) - before
    out = {}
    for mode, wait_ms in (("answer now", 0), ("long poll", 20)):
        cpu = 0.0
        calls = 0
        for i in range(fetches):
            follower = 2 + i % 2
            session = cache.sessions[sessions[follower]]
            request = _request(version, ids, follower, wait_ms, session.id, session.epoch,
                               [], leo)
            prof = cProfile.Profile() if profile and i == 0 else None
            start = time.process_time()
            if prof is not None:
                prof.enable()
            response = await fetch_handler.handle(ctx, request)
            if prof is not None:
                prof.disable()
                calls = pstats.Stats(prof).total_calls  # type: ignore[attr-defined]
            else:
                cpu += time.process_time() - start
            body = b"".join(c for c in response.body if isinstance(c, bytes)) \
                if isinstance(response.body, list) else response.body
            assert int.from_bytes(body[4:6], "big", signed=True) == ErrorCode.none, body[:16]
        measured = fetches - (1 if profile else 0)
        out[mode] = {"us_per_partition": cpu / measured / len(tps) * 1e6,
                     "ms_per_fetch": cpu / measured * 1000, "calls_per_fetch": calls}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=3333)
    parser.add_argument("--fetches", type=int, default=20)
    parser.add_argument("--versions", default="13,12",
                        help="Fetch versions, in this order (13: topics by id, as followers "
                             "fetch; 12: by name)")
    args = parser.parse_args(argv)
    out = {}
    with tempfile.TemporaryDirectory(prefix="weir-idle-fetch-") as tmp:
        rm, tps, ids = _manager(Path(tmp), args.partitions)
        tune_thresholds()  # the broker's collector settings (weir.server.gc_tuning)
        freeze_startup_heap()
        try:
            for run, version in enumerate(int(v) for v in args.versions.split(",")):
                for mode, r in asyncio.run(_run(rm, tps, ids, version, args.fetches + 1,
                                                profile=True)).items():
                    out[f"v{version} (run {run + 1}), {mode}"] = r
        finally:
            rm.log_manager.shutdown()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=Path(__file__).parent, check=False).stdout.strip()
    import weir

    print(f"weir from {Path(weir.__file__).parent}; tree commit {commit}; "
          f"{args.partitions} partitions, {args.fetches} fetches; load average "
          f"{[round(x, 2) for x in os.getloadavg()]}")
    for mode, r in out.items():
        print(f"idle incremental follower fetch, {mode}: {r['us_per_partition']:.2f} µs CPU per "
              f"partition ({r['ms_per_fetch']:.1f} ms per fetch), "
              f"{r['calls_per_fetch']} Python calls per fetch")
    (out_dir() / "idle_fetch.json").write_text(json.dumps(
        {"partitions": args.partitions, "fetches": args.fetches,
         "weir": str(Path(weir.__file__).parent), "fetch": out}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
