"""Controller request encoding at 10,000 partitions: per request, or UpdateMetadata shared.

How to run::

    .venv/bin/python -m bench run controller_encoding                  # 10,000 partitions, 5 rounds
    .venv/bin/python -m bench run controller_encoding --partitions 3000

The batch is the one a survivor-side event of a 3-broker, RF 3 cluster builds (a broker
failure or a controlled shutdown: every partition's new LeaderAndIsr to the two survivors,
and UpdateMetadata for every partition to all three brokers), made by the controller's own
:class:`~weir.controller.requests.RequestBatch`.  Measured, in CPU time of this process
(``time.process_time``, so that other jobs on a shared machine count little):

* ``per request``: what the channels did before ``pre_encode`` — each request's body
  encoded by its connection (``codec.encode_body`` per request);
* ``pre_encode``: what :class:`~weir.controller.channel.SharedBodies` does in the senders —
  the same bodies (checked byte for byte), UpdateMetadata encoded once and patched per
  broker epoch.  Both run on the controller broker's event loop, in send order;
* ``SharedBodies`` with kio's writer for every body (what it did before
  ``weir.protocol.interbroker.state_encoding``: the same class, its ``encode_request``
  swapped for ``codec.encode_body`` in this process), against ``SharedBodies`` as it is:
  partition states written by hand, each state object once per batch.

Results: ``bench/results/controller_encoding.md`` (``python -m bench run``).
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from pathlib import Path

from weir.common import TopicPartition
from weir.controller import channel
from weir.controller.channel import SharedBodies
from weir.controller.context import ControllerContext
from weir.controller.requests import RequestBatch
from weir.coordination.codecs import BrokerInfo, LeaderIsr
from weir.protocol import codec

HERE = Path(__file__).resolve().parent
from bench.harness import machine, out_dir


def build_batch(partitions: int) -> list:
    ctx = ControllerContext(controller_epoch=1)
    for b in (1, 2, 3):
        ctx.live_brokers[b] = BrokerInfo(id=b, host="127.0.0.1", port=9090 + b, epoch=100 + b)
    for t in range((partitions + 999) // 1000):
        name = f"cp-{t}"
        ctx.topic_ids[name] = uuid.uuid4()
        ctx.assignments[name] = {}
        for p in range(min(1000, partitions - t * 1000)):
            replicas = tuple((t * 1000 + p + i) % 3 + 1 for i in range(3))
            ctx.assignments[name][p] = replicas
            ctx.leadership[TopicPartition(name, p)] = LeaderIsr(
                leader=replicas[1], leader_epoch=5, isr=list(replicas[1:]), controller_epoch=1,
                zk_version=7)
    batch = RequestBatch(2, ctx)
    for tp, state in ctx.leadership.items():
        batch.add_leader_and_isr([1, 2], tp, state, ctx.assignments[tp.topic][tp.partition])
    return [item.request for item in batch.build()]


def cpu_ms(fn) -> tuple[float, object]:
    start = time.process_time()
    out = fn()
    return (time.process_time() - start) * 1000, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    requests = build_batch(args.partitions)
    kinds = [f"{type(r).__name__.removesuffix('Request')}" for r in requests]
    loop_ms, kio_shared_ms, shared_ms = [], [], []
    hand_written = channel.encode_request

    def kio_writer(request, memo=None):
        return codec.encode_body(request)

    for _ in range(args.rounds):  # interleaved: each round measures all three
        ms, plain = cpu_ms(lambda: [codec.encode_body(r) for r in requests])
        loop_ms.append(ms)
        channel.encode_request = kio_writer
        try:
            shared = SharedBodies()
            ms, bodies = cpu_ms(lambda shared=shared: [shared.body(r) for r in requests])
        finally:
            channel.encode_request = hand_written
        kio_shared_ms.append(ms)
        assert bodies == plain
        shared = SharedBodies()
        ms, bodies = cpu_ms(lambda shared=shared: [shared.body(r) for r in requests])
        shared_ms.append(ms)
        assert bodies == plain
    sizes = [len(b) for b in plain]
    m = machine()
    lines = [
        f"# Controller request encoding: {args.partitions} partitions, 3 brokers",
        "",
        (f"Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, commit "
         f"{m['commit']}. Load average at start {m['load_average_at_start']}, at end "
         f"{[round(x, 2) for x in os.getloadavg()]}. CPU time of this process, best of "
         f"{args.rounds} (all rounds listed)."),
        "",
        f"Requests of one batch: {', '.join(f'{k} {s // 1024} KiB' for k, s in zip(kinds, sizes, strict=True))}.",
        "",
        "| encoding | CPU ms (best) | all rounds |",
        "|---|---|---|",
        (f"| each body by its connection (before) | {min(loop_ms):.0f} | "
        f"{', '.join(f'{x:.0f}' for x in loop_ms)} |"),
        (f"| `SharedBodies` in the senders (`pre_encode`), kio's writer | "
         f"{min(kio_shared_ms):.0f} | {', '.join(f'{x:.0f}' for x in kio_shared_ms)} |"),
        (f"| `SharedBodies`, partition states by `state_encoding` | {min(shared_ms):.0f} | "
        f"{', '.join(f'{x:.0f}' for x in shared_ms)} |"),
        "",
        (f"Ratios: shared with kio's writer ÷ per request {min(kio_shared_ms) / min(loop_ms):.2f};"
         f" hand-written states ÷ shared with kio's writer "
         f"{min(shared_ms) / min(kio_shared_ms):.2f}: event-loop time for the batch's "
         f"encoding {min(loop_ms):.0f} → {min(kio_shared_ms):.0f} → {min(shared_ms):.0f} ms."),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_save:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        (out_dir() / f"controller_encoding-{stamp}.md").write_text(text)
        (out_dir() / "controller_encoding-latest.md").write_text(text)


if __name__ == "__main__":
    main()
