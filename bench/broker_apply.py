"""A broker applying the controller's 10,000-partition requests: CPU per step.

How to run::

    .venv/bin/python -m bench run broker_apply                  # 10,000 partitions, 5 rounds
    .venv/bin/python -m bench run broker_apply --partitions 3000 --profile

What a survivor of a controlled shutdown or a broker failure does with the controller's
batch (3 brokers, RF 3; the requests are built by the controller's own
:class:`~weir.controller.requests.RequestBatch`, as in ``bench/controller_encoding.py``:
every partition gets a new leader epoch, its second replica as leader, the first out of
the ISR), measured in CPU time of this process (``time.process_time``, so that other jobs
of a shared machine count little), each step as the broker's event loop runs it:

* ``decode``: the request bodies from bytes (``codec.decode_body``);
* ``LeaderAndIsr parse`` and ``apply``: the handler's partition states, then
  ``ReplicaManager.apply_leader_and_isr`` on a broker whose 10,000 logs exist (at leader
  epoch 4 before, so every state is applied: Kafka's becomeLeaderOrFollower);
* ``UpdateMetadata parse`` and ``update``: the handler's states, then
  ``MetadataCache.update``;
* ``Metadata (all topics)``: the Metadata handler's answer for every topic, encoded as the
  socket server sends it, first after the update and again (what the handler keeps
  between updates is reused), and after a further update naming a third of the
  partitions (a controlled shutdown's or a broker failure's new leaders).

Results: ``bench/results/broker_apply.md`` (``python -m bench run``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import os
import pstats
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from weir.common import TopicPartition
from weir.protocol import codec
from weir.replication.leader_endpoint import BrokerEndPoint
from weir.replication.replica_manager import PartitionStateUpdate, ReplicaManager
from weir.server import gc_tuning
from weir.server.context import RawResponse, RequestContext
from weir.server.handlers import REGISTRY, leader_and_isr, update_metadata
from weir.server.metadata_cache import MetadataCache
from weir.storage.config import LogConfig
from weir.storage.log_manager import LogManager

HERE = Path(__file__).resolve().parent
from bench.controller_encoding import build_batch
from bench.harness import machine, out_dir

BROKER = 1
METADATA = 3
METADATA_VERSION = 12


def cpu_ms(fn):
    start = time.process_time()
    out = fn()
    return (time.process_time() - start) * 1000, out


def requests_for(partitions: int):
    """The LeaderAndIsr to broker 1 and an UpdateMetadata of the batch, as bytes."""
    lai = next(r for r in build_batch(partitions)
               if type(r).__name__ == "LeaderAndIsrRequest"
               and any(BROKER in ps.replicas for t in r.topic_states
                       for ps in t.partition_states))
    umd = next(r for r in build_batch(partitions) if type(r).__name__ == "UpdateMetadataRequest")
    return (type(lai), codec.encode_body(lai)), (type(umd), codec.encode_body(umd))


def previous_epoch(updates: dict[TopicPartition, PartitionStateUpdate]
                   ) -> dict[TopicPartition, PartitionStateUpdate]:
    """The states before the batch: epoch 4, first replica leading, full ISR."""
    from weir.replication.partition import LeaderState
    return {tp: PartitionStateUpdate(LeaderState(
        leader=u.state.replicas[0], leader_epoch=u.state.leader_epoch - 1,
        isr=list(u.state.replicas), replicas=list(u.state.replicas),
        partition_epoch=u.state.partition_epoch - 1, controller_epoch=1), u.topic_id, True)
        for tp, u in updates.items()}


def metadata_ctx(cache: MetadataCache):
    broker = SimpleNamespace(metadata=cache, authorizer=None, cluster_id="c",
                             config=SimpleNamespace(auto_create_topics_enable=False,
                                                    get=lambda key: None))
    request_cls, response_cls = REGISTRY[METADATA].schemas(METADATA_VERSION)
    header = codec.RequestHeader(METADATA, METADATA_VERSION, 1, "bench", 0)
    ctx = RequestContext(broker, header, request_cls, response_cls, "10.1.2.3:5555",
                         listener="PLAINTEXT")
    return ctx, codec.build(request_cls, topics=None, allow_auto_topic_creation=False)


def with_epochs(updates: dict[TopicPartition, PartitionStateUpdate], shift: int
                ) -> dict[TopicPartition, PartitionStateUpdate]:
    return {tp: PartitionStateUpdate(dataclasses.replace(
        u.state, leader_epoch=u.state.leader_epoch + shift,
        partition_epoch=u.state.partition_epoch + shift), u.topic_id, u.is_new)
        for tp, u in updates.items()}


async def run_rounds(data_dir: Path, lai_req, umd_req, rounds: int,
                     profile: cProfile.Profile | None) -> list[dict[str, float]]:
    """One broker with the request's logs (created once); each round applies the batch
    at new leader epochs (10 apart: the states before it, then the batch's)."""
    lm = LogManager([data_dir], LogConfig.from_dict({}))
    lm.startup(now_ms=0)
    rm = ReplicaManager(BROKER, lm, lambda _t: LogConfig.from_dict({}), lambda _t: 2)
    live = {b: BrokerEndPoint(b, "127.0.0.1", 1) for b in (1, 2, 3)}
    (lai_cls, lai_bytes), (umd_cls, umd_bytes) = lai_req, umd_req
    out = []
    for r in range(rounds):
        ms: dict[str, float] = {}
        if profile:
            profile.enable()
        ms["decode LeaderAndIsr"], lai = cpu_ms(lambda: codec.decode_body(lai_cls, lai_bytes))
        ms["decode UpdateMetadata"], umd = cpu_ms(lambda: codec.decode_body(umd_cls, umd_bytes))
        ms["LeaderAndIsr parse"], (parsed, _) = cpu_ms(
            lambda lai=lai: leader_and_isr.parse_partition_states(lai))
        if profile:
            profile.disable()
        before = previous_epoch(with_epochs(parsed, 10 * r))
        updates = with_epochs(parsed, 10 * r)
        if r == 0:
            # The broker's collector settings (weir.server.gc_tuning), in its order: the
            # start-up heap frozen out of full collections, then the topics created.
            gc_tuning.tune_thresholds()
            gc_tuning.freeze_startup_heap()
            await rm.create_new_logs(1, before)
        rm.apply_leader_and_isr(1, before, r == 0, live)
        if profile:
            profile.enable()
        ms["LeaderAndIsr apply"], results = cpu_ms(
            lambda updates=updates: rm.apply_leader_and_isr(1, updates, False, live))
        cache = MetadataCache()
        ms["UpdateMetadata parse"], (brokers, partitions) = cpu_ms(
            lambda umd=umd: update_metadata.parse_request(umd, "PLAINTEXT"))
        ms["UpdateMetadata update"], _ = cpu_ms(
            lambda umd=umd, b=brokers, p=partitions, cache=cache: cache.update(
                int(umd.controller_id), int(umd.controller_epoch), b, p))
        ctx, request = metadata_ctx(cache)
        handler = REGISTRY[METADATA].module.handle
        # The handler's answer as the socket server sends it: encoded (by the handler, a
        # RawResponse, or else by the server).
        for step in ("Metadata (all topics), first after the update",
                     "Metadata (all topics), again"):
            start = time.process_time()
            answer = await handler(ctx, request)
            body = answer.body if isinstance(answer, RawResponse) else codec.encode_body(answer)
            ms[step] = (time.process_time() - start) * 1000
        # An update naming a third of the partitions (a controlled shutdown's or a broker
        # failure's new leaders), then the next Metadata for every topic.
        third = [(t, tid, i, dataclasses.replace(m, leader_epoch=m.leader_epoch + 1))
                 for t, tid, i, m in partitions[::3]]
        cache.update(int(umd.controller_id), int(umd.controller_epoch), brokers, third)
        start = time.process_time()
        answer = await handler(ctx, request)
        body = answer.body if isinstance(answer, RawResponse) else codec.encode_body(answer)
        ms["Metadata (all topics), first after an update of a third"] = (
            time.process_time() - start) * 1000
        response = codec.decode_body(ctx.response_cls, body)
        assert all(p.leader_epoch == m.leader_epoch + 1 for (_t, _tid, _i, m), p in zip(
            partitions[::3], [p for t in response.topics for p in t.partitions][::3],
            strict=False)), "the third's new epochs are in the answer"
        if profile:
            profile.disable()
        assert set(results.values()) == {0}, "every state applied"
        assert sum(len(t.partitions) for t in response.topics) == len(partitions)
        out.append(ms)
    await rm.close()
    # The queued checkpoint files (the new epochs', the new logs' partition.metadata),
    # which a broker writes on its storage thread long before it stops.
    wall, start = time.perf_counter(), time.process_time()
    lm.deferred.drain()
    out[-1]["storage thread: queued checkpoints written"] = (time.process_time() - start) * 1000
    out[-1]["storage thread: queued checkpoints written, wall"] = (
        time.perf_counter() - wall) * 1000
    # The broker's last step (a controlled shutdown's victim): checkpoints, every log
    # closed.  Wall time too: it is mostly file-system calls.
    wall, start = time.perf_counter(), time.process_time()
    if profile:
        profile.enable()
    lm.shutdown()
    if profile:
        profile.disable()
    out[-1]["LogManager.shutdown (last round)"] = (time.process_time() - start) * 1000
    out[-1]["LogManager.shutdown wall (last round)"] = (time.perf_counter() - wall) * 1000
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="cProfile the measured steps")
    parser.add_argument("--label", default="")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    lai_req, umd_req = requests_for(args.partitions)
    profile = cProfile.Profile() if args.profile else None
    load_start = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="broker-apply-") as tmp:
        rounds = asyncio.run(run_rounds(Path(tmp), lai_req, umd_req, args.rounds, profile))
    if profile:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(40)
    m = machine()
    steps = list(rounds[0])
    lines = [
        f"# Broker applying the controller's requests: {args.partitions} partitions",
        "",
        (f"Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, commit "
         f"{m['commit']}{' ' + args.label if args.label else ''}. Load average at start "
         f"{load_start}, at end {[round(x, 2) for x in os.getloadavg()]}. CPU time of this "
         f"process (ms), best of {args.rounds} (all rounds listed)."),
        "",
        "| step | CPU ms (best) | all rounds |",
        "|---|---|---|",
        *(f"| {s} | {min(r[s] for r in rounds):.0f} | "
          f"{', '.join(f'{r[s]:.0f}' for r in rounds)} |" for s in steps),
        (f"| **total of the request steps** | {min(sum(r[s] for s in steps) for r in rounds):.0f}"
         f" | {', '.join(f'{sum(r[s] for s in steps):.0f}' for r in rounds)} |"),
        *(f"| {s} | {v:.0f} | |" for s, v in rounds[-1].items() if s not in steps),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_save:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        (out_dir() / f"broker_apply-{stamp}.md").write_text(text)
        (out_dir() / "broker_apply-latest.md").write_text(text)


if __name__ == "__main__":
    main()
