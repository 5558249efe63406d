"""Cost of the structural guard (weir.protocol.guard) on the request-decoding hot paths.

For each request shape the broker decodes most, the same bytes are decoded many times,
interleaved, by kio alone and by ``codec.decode_body`` (guard walk + kio): per-request
time percentiles and the ratio guarded ÷ kio-only, all measured in one run.

    .venv/bin/python -m bench run decode_guard [--iterations N]

Results: bench/results/decode_guard.{md,json} (python -m bench run).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import time
from pathlib import Path

from kio.index import load_request_schema

from bench.harness import machine, out_dir
from weir.protocol import codec
from weir.records.builder import build_batch

HERE = Path(__file__).resolve().parent
RESULTS = out_dir()


def _produce(version: int, partitions: int, batch_bytes: int) -> tuple[type, bytes]:
    cls = load_request_schema(0, version)
    values = [b"x" * 1024] * max(1, batch_bytes // 1100)
    records = build_batch(values)
    request = codec.build(cls, acks=-1, timeout_ms=30000, topic_data=[{
        "name": "events", "partition_data": [
            {"index": i, "records": records} for i in range(partitions)]}])
    return cls, codec.encode_body(request)


def _fetch(version: int, partitions: int, replica_id: int) -> tuple[type, bytes]:
    cls = load_request_schema(1, version)
    topics = [{"topic": f"topic-{t}", "partitions": [
        {"partition": p, "fetch_offset": 123456, "partition_max_bytes": 1048576,
         "current_leader_epoch": 3, "last_fetched_epoch": 3}
        for p in range(min(partitions, 10))]} for t in range(max(1, partitions // 10))]
    request = codec.build(cls, replica_id=replica_id, max_wait=datetime.timedelta(0, 0.5),
                          min_bytes=1,
                          max_bytes=52428800, topics=topics)
    return cls, codec.encode_body(request)


def _metadata(version: int, topics: int) -> tuple[type, bytes]:
    cls = load_request_schema(3, version)
    request = codec.build(cls, topics=[{"name": f"topic-{i}"} for i in range(topics)])
    return cls, codec.encode_body(request)


SHAPES = {
    "Produce v9, 1 partition, 16 KiB batch": lambda: _produce(9, 1, 16384),
    "Produce v9, 1 partition, 1 MiB batch": lambda: _produce(9, 1, 1 << 20),
    "Produce v7, 10 partitions, 16 KiB each": lambda: _produce(7, 10, 16384),
    "Fetch v12, consumer, 1 partition": lambda: _fetch(12, 1, -1),
    "Fetch v12, follower, 1,000 partitions": lambda: _fetch(12, 1000, 2),
    "Fetch v11, consumer, 100 partitions": lambda: _fetch(11, 100, -1),
    "Metadata v12, 10 topics": lambda: _metadata(12, 10),
}


def measure(cls: type, body: bytes, iterations: int) -> dict:
    kio_only = codec._reader(cls)
    guarded_ns, kio_ns = [], []
    for _ in range(iterations):
        t0 = time.perf_counter_ns()
        kio_only(body, 0)
        t1 = time.perf_counter_ns()
        codec.decode_body(cls, body)
        t2 = time.perf_counter_ns()
        kio_ns.append(t1 - t0)
        guarded_ns.append(t2 - t1)

    def pct(xs: list[int], q: float) -> float:
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(q * len(xs)))] / 1000

    out = {"bytes": len(body)}
    for name, xs in (("kio", kio_ns), ("guarded", guarded_ns)):
        out[name] = {"p50_us": pct(xs, 0.5), "p99_us": pct(xs, 0.99),
                     "p999_us": pct(xs, 0.999), "mean_us": statistics.fmean(xs) / 1000}
    out["ratio_p50"] = out["guarded"]["p50_us"] / max(out["kio"]["p50_us"], 1e-9)
    out["guard_p50_us"] = out["guarded"]["p50_us"] - out["kio"]["p50_us"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=20000)
    args = ap.parse_args()
    results = {}
    for name, make in SHAPES.items():
        cls, body = make()
        n = args.iterations if len(body) < 200_000 else max(args.iterations // 10, 1000)
        measure(cls, body, min(n, 500))  # warm-up
        results[name] = measure(cls, body, n)
        r = results[name]
        print(f"{name}: {r['bytes']} B, kio p50 {r['kio']['p50_us']:.1f} µs, "
              f"guarded p50 {r['guarded']['p50_us']:.1f} µs (×{r['ratio_p50']:.2f}), "
              f"p99 {r['guarded']['p99_us']:.1f} µs")
    m = machine()
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"decode_guard-{stamp}.json").write_text(
        json.dumps({"machine": m, "iterations": args.iterations, "results": results}, indent=2))
    lines = [f"# Guard cost on request decoding ({stamp})", "",
             (f"Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, "
             f"commit {m['commit']}, load {m['load_average_at_start']}. "
             f"{args.iterations} decodes per shape (a tenth for bodies over 200 kB), "
             "kio-only and guarded interleaved."), "",
             ("| request | bytes | kio p50 µs | guarded p50 µs | guarded p99 µs | "
             "guarded p99.9 µs | guarded ÷ kio (p50) |"), "|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        lines.append(f"| {name} | {r['bytes']} | {r['kio']['p50_us']:.1f} | "
                     f"{r['guarded']['p50_us']:.1f} | {r['guarded']['p99_us']:.1f} | "
                     f"{r['guarded']['p999_us']:.1f} | {r['ratio_p50']:.2f} |")
    text = "\n".join(lines) + "\n"
    (RESULTS / f"decode_guard-{stamp}.md").write_text(text)
    (RESULTS / "decode_guard-latest.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
