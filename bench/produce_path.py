"""The leader's Produce path in process: CPU and Python calls per request, no socket.

One leader replica (a real ``ReplicaManager`` over a real ``Log`` in a temporary directory)
takes Produce v9 frames of one 1-KiB-record batch through what the socket server runs for a
frame: ``Dispatcher.begin`` (header, hand decoder, then the handler,
append: validation, offsets, segment write, HW, acks=all status, response encoding).  What
it leaves out is the event loop and the socket (bench/produce_cpu.py measures the whole
broker).  Two figures per configuration:

* Python and C calls per request (``sys.setprofile``): exact, whatever the machine's load;
* CPU µs per request (``time.process_time``, best of several rounds): the write of the batch
  into the page cache (``pwrite``) included.

Run it against another revision with that tree first on the path::

    .venv/bin/python -m bench run produce_path
    git worktree add --detach /tmp/wt_old REV
    PYTHONPATH=/tmp/wt_old .venv/bin/python -P bench/produce_path.py
"""

from __future__ import annotations

import argparse
import collections
import os
import struct
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from weir.common import TopicPartition
from weir.protocol.codec import encode_uvarint
from weir.records.builder import build_batch
from weir.replication.partition import LeaderState
from weir.replication.replica_manager import PartitionStateUpdate, ReplicaManager
from weir.server.network import Dispatcher
from weir.storage.config import LogConfig
from weir.storage.log_manager import LogManager

TOPIC = "bench"


def produce_frame(correlation_id: int, records: bytes, acks: int) -> bytes:
    """A Produce v9 request (flexible, as librdkafka 2.x sends) of one partition, unframed."""
    name = TOPIC.encode()
    header = struct.pack(">hhih", 0, 9, correlation_id, 7) + b"rdkafka" + b"\x00"
    body = (b"\x00" + struct.pack(">hi", acks, 30000)
            + b"\x02" + encode_uvarint(len(name) + 1) + name
            + b"\x02" + struct.pack(">i", 0) + encode_uvarint(len(records) + 1) + records
            + b"\x00\x00\x00")
    return header + body


class Leader:
    """A one-replica partition led here, and the dispatcher the socket server would use."""

    def __init__(self, directory: Path) -> None:
        config = LogConfig.from_dict({"segment.bytes": str(1 << 30)})
        manager = LogManager([directory], config)
        manager.startup(0)
        self.rm = ReplicaManager(1, manager, lambda _t: config, lambda _t: 1)
        self.tp = TopicPartition(TOPIC, 0)
        state = LeaderState(leader=1, leader_epoch=0, isr=[1], replicas=[1], partition_epoch=0,
                            controller_epoch=1)
        self.rm.apply_leader_and_isr(1, {self.tp: PartitionStateUpdate(state, None, False)},
                                     False)
        services = SimpleNamespace(replica_manager=self.rm, authorizer=None,
                                   config=SimpleNamespace(get=lambda _key: None))
        self.dispatcher = Dispatcher(services)  # type: ignore[arg-type]

    def handle(self, frame: bytes) -> bytes:
        answer = self.dispatcher.begin(frame, "127.0.0.1:1", None)
        assert isinstance(answer, bytes), answer
        return answer

    @property
    def log_end_offset(self) -> int:
        return self.rm.partitions[self.tp].log.log_end_offset  # type: ignore[union-attr]


def frames(count: int, batch_records: int, acks: int, idempotent: bool) -> list[bytes]:
    """``count`` requests of one batch; an idempotent producer's carry rising sequences."""
    values = [bytes([i % 256]) * 1024 for i in range(batch_records)]
    if not idempotent:
        return [produce_frame(0, build_batch(values, timestamp_ms=1_700_000_000_000), acks)] \
            * count
    return [produce_frame(0, build_batch(values, timestamp_ms=1_700_000_000_000,
                                         producer_id=5, producer_epoch=0,
                                         base_sequence=i * batch_records), acks)
            for i in range(count)]


def count_calls(batch_records: int, acks: int, idempotent: bool, n: int = 200
                ) -> tuple[float, float]:
    """(Python calls, C calls) per request, over ``n`` requests after 20 of warm-up."""
    counts: collections.Counter[str] = collections.Counter()

    def profiler(_frame, event: str, _arg) -> None:
        if event in ("call", "c_call"):
            counts[event] += 1

    with tempfile.TemporaryDirectory() as tmp:
        leader = Leader(Path(tmp))
        todo = frames(n + 20, batch_records, acks, idempotent)
        for frame in todo[:20]:
            leader.handle(bytes(frame))
        copies = [bytes(f) for f in todo[20:]]
        sys.setprofile(profiler)
        try:
            for frame in copies:
                leader.handle(frame)
        finally:
            sys.setprofile(None)
        assert leader.log_end_offset == (n + 20) * batch_records  # every one appended
    return counts["call"] / n, counts["c_call"] / n


def cpu_us(batch_records: int, acks: int, idempotent: bool, n: int, rounds: int) -> float:
    """CPU µs per request, best of ``rounds`` rounds of ``n`` (a fresh log each round when
    the producer is idempotent: its sequences start again)."""
    best = float("inf")
    plain = frames(n, batch_records, acks, idempotent)
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            leader = Leader(Path(tmp))
            copies = [bytes(f) for f in plain]
            start = time.process_time()
            for frame in copies:
                leader.handle(frame)
            best = min(best, time.process_time() - start)
    return best / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-kib", type=lambda s: [int(x) for x in s.split(",")],
                        default=[16, 64])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    import weir

    print(f"weir from {Path(weir.__file__).parent}; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("| batch | acks | producer | Python calls / request | C calls | CPU µs / request |")
    print("|---:|:---:|---|---:|---:|---:|")
    for kib in args.batch_kib:
        for acks in (1, -1):
            for idempotent in (False, True):
                py, c = count_calls(kib, acks, idempotent)
                us = cpu_us(kib, acks, idempotent, args.requests, args.rounds)
                print(f"| {kib} KiB | {'all' if acks == -1 else acks} | "
                      f"{'idempotent' if idempotent else 'plain'} | {py:.0f} | {c:.0f} | "
                      f"{us:.1f} |", flush=True)


if __name__ == "__main__":
    main()
