"""Log compaction: cleaner throughput against a floor, and produce latency while it runs.

1. **Throughput** (in process, no broker): a compacted log of ``--records`` keyed records
   (``--keys`` distinct keys, 100 records a batch, ``--codec``) in 8 MiB segments is cleaned
   once by Weir's ``Cleaner`` (offset map, filtering, re-batching, new indexes, the swap)
   and timed; MB/s = bytes of log cleaned (read) per second.  The floor reads the same
   segment files and writes their bytes to new files (fsynced) in one run: the least any
   cleaner must do.  Both repeated ``--repeat`` times on fresh copies, fastest kept.
2. **Produce latency while cleaning** (one real broker): a compacted topic (1 MiB
   segments) is loaded while ``min.compaction.lag.ms`` is a day (nothing cleanable), then
   single-record produces (acks=1, confluent-kafka, one at a time) to another topic are
   timed, first with the cleaner idle, then after the lag is set to 0 through AlterConfigs
   (the dynamic topic config path), while the cleaner works.

Results: bench/results/compaction.{md,json} (python -m bench run).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.harness import machine, out_dir
from weir.common import TopicPartition
from weir.records.builder import build_batch
from weir.records.filter import compress
from weir.storage.cleaner import Cleaner
from weir.storage.cleaner_manager import LogCleanerManager
from weir.storage.log import Log, LogConfig
from weir.storage.log_cleaner import clean_now
from weir.storage.offset_map import OffsetMap

HERE = Path(__file__).resolve().parent
RESULTS = out_dir()
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _batch(values, keys, base, codec):
    raw = build_batch(values, keys=keys, base_offset=base, timestamp_ms=int(time.time() * 1000))
    if codec == 0:
        return raw
    import struct

    import crc32c

    body = bytearray(raw[21:61])
    struct.pack_into(">h", body, 0, codec)
    body += compress(codec, raw[61:])
    head = struct.pack(">qiib", base, 9 + len(body), -1, 2)
    return head + struct.pack(">I", crc32c.crc32c(bytes(body))) + bytes(body)


def build_log(directory: Path, records: int, keys: int, codec: int) -> int:
    cfg = LogConfig.from_dict({"cleanup.policy": "compact", "segment.bytes": 8 << 20})
    lg = Log.open(directory / "bench-0", cfg, clean_shutdown=True, now_ms=0)
    for start in range(0, records, 100):
        n = min(100, records - start)
        lg.append_as_leader(_batch([b"v" * 100] * n,
                                   [b"key-%08d" % ((start + i) * 7919 % keys) for i in range(n)],
                                   start, codec), 0, 0)
    lg.roll()
    lg.update_high_watermark(lg.log_end_offset)
    size = sum(seg.size for seg in lg.segments)
    lg.close()
    return size


def time_clean(directory: Path) -> dict:
    lg = Log.open(directory / "bench-0", LogConfig.from_dict({"cleanup.policy": "compact",
                                                             "segment.bytes": 8 << 20}),
                  clean_shutdown=True, now_ms=0)
    lg.update_high_watermark(lg.log_end_offset)
    mgr = LogCleanerManager([directory])
    cleaner = Cleaner(OffsetMap(128 << 20), float(2**63))
    t0 = time.perf_counter()
    result = clean_now(mgr, cleaner, {TopicPartition("bench", 0): (lg, directory)},
                       int(time.time() * 1000))
    elapsed = time.perf_counter() - t0
    lg.close()
    assert result is not None
    return {"seconds": elapsed, "bytes_read": result.stats.bytes_read,
            "bytes_written": result.stats.bytes_written,
            "records_read": result.stats.records_read,
            "records_kept": result.stats.records_kept,
            "mb_per_s": result.stats.bytes_read / elapsed / 1e6}


def time_floor(directory: Path) -> dict:
    """Read every non-active segment and write its bytes to a new file, fsynced."""
    part = directory / "bench-0"
    logs = sorted(part.glob("*.log"))[:-1]
    t0 = time.perf_counter()
    total = 0
    for path in logs:
        data = path.read_bytes()
        out = path.with_name(path.name + ".floor")
        with open(out, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        total += len(data)
    elapsed = time.perf_counter() - t0
    for path in logs:
        path.with_name(path.name + ".floor").unlink()
    return {"seconds": elapsed, "bytes": total, "mb_per_s": total / elapsed / 1e6}


def throughput(args) -> dict:
    out = {}
    for codec_name in args.codecs.split(","):
        runs = []
        with tempfile.TemporaryDirectory(prefix="weir-bench-compaction-") as tmp:
            base = Path(tmp) / "template"
            size = build_log(base, args.records, args.keys, CODECS[codec_name])
            for i in range(args.repeat):
                for which in (("floor", "cleaner") if i % 2 else ("cleaner", "floor")):
                    work = Path(tmp) / f"run-{i}-{which}"
                    shutil.copytree(base, work)
                    runs.append((which, time_clean(work) if which == "cleaner"
                                 else time_floor(work)))
                    shutil.rmtree(work)
        best_c = max((r for w, r in runs if w == "cleaner"), key=lambda r: r["mb_per_s"])
        best_f = max((r for w, r in runs if w == "floor"), key=lambda r: r["mb_per_s"])
        best_c["records_per_s"] = best_c["records_read"] / best_c["seconds"]
        out[codec_name] = {"log_bytes": size, "cleaner": best_c, "floor": best_f,
                           "ratio": best_c["mb_per_s"] / best_f["mb_per_s"],
                           "runs": runs}
        print(f"{codec_name}: cleaner {best_c['mb_per_s']:.1f} MB/s, floor "
              f"{best_f['mb_per_s']:.1f} MB/s, ratio {out[codec_name]['ratio']:.3f}",
              flush=True)
    return out


def _percentiles(samples: list[float]) -> dict:
    s = sorted(samples)
    return {"n": len(s), "p50_ms": statistics.median(s) * 1000,
            "p99_ms": s[int(len(s) * 0.99) - 1] * 1000 if len(s) >= 100 else max(s) * 1000,
            "max_ms": s[-1] * 1000}


def latency(args) -> dict:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    from bench.harness import cluster as bench_cluster

    with bench_cluster(None, 1, overrides={"log.cleaner.backoff.ms": "100"}) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        compacted = {"cleanup.policy": "compact", "segment.bytes": str(1 << 20),
                     "min.cleanable.dirty.ratio": "0.01",
                     "min.compaction.lag.ms": str(86_400_000)}  # nothing cleanable yet
        for name, cfg in (("compacted", compacted), ("latency", {})):
            admin.create_topics([NewTopic(name, 1, 1, config=cfg)])[name].result(30)
        loader = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 20,
                           "batch.size": 65536})
        for i in range(args.load_records):
            while True:
                try:
                    loader.produce("compacted", key=b"key-%08d" % (i * 7919 % args.keys),
                                   value=b"v" * 100)
                    break
                except BufferError:
                    loader.poll(0.05)
        loader.flush(120)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0,
                             "acks": 1})
        producer.produce("latency", value=b"warm-up")
        producer.flush(30)

        def sample(seconds: float) -> list[float]:
            out, end = [], time.monotonic() + seconds
            while time.monotonic() < end:
                t0 = time.perf_counter()
                producer.produce("latency", value=b"x" * 100)
                producer.flush(10)
                out.append(time.perf_counter() - t0)
            return out

        idle = sample(args.seconds)
        checkpoint = cluster.broker_log_dirs(cluster.broker_ids[0])[0] / \
            "cleaner-offset-checkpoint"
        resource = ConfigResource("topic", "compacted",
                                  set_config={**compacted, "min.compaction.lag.ms": "0"})
        for future in admin.alter_configs([resource]).values():
            future.result(30)
        t_start = time.monotonic()
        during: list[float] = []
        while time.monotonic() - t_start < 120:
            during += sample(0.5)
            if checkpoint.exists() and "compacted" in checkpoint.read_text():
                break
        clean_s = time.monotonic() - t_start
    res = {"idle": _percentiles(idle), "during_cleaning": _percentiles(during),
           "cleaning_seconds_observed": clean_s, "load_records": args.load_records}
    print(f"produce latency idle p50 {res['idle']['p50_ms']:.2f} ms p99 "
          f"{res['idle']['p99_ms']:.2f} ms; while cleaning p50 "
          f"{res['during_cleaning']['p50_ms']:.2f} ms p99 "
          f"{res['during_cleaning']['p99_ms']:.2f} ms ({clean_s:.1f} s)", flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--keys", type=int, default=20_000)
    ap.add_argument("--codecs", default="none,lz4,zstd")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--load-records", type=int, default=300_000)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--quick", action="store_true", help="small sizes, one repeat")
    args = ap.parse_args()
    if args.quick:
        args.records, args.repeat, args.load_records, args.seconds = 50_000, 1, 50_000, 2.0
        args.codecs = "none"
    m = machine()
    results = {"throughput": throughput(args), "latency": latency(args)}
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"compaction-{stamp}.json").write_text(json.dumps(
        {"machine": m, "args": vars(args), "results": results}, indent=2))
    lines = [f"# Log compaction ({stamp})", "",
             (f"Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, commit "
              f"{m['commit']}, load {m['load_average_at_start']}. {args.records} records of "
              f"100 B over {args.keys} keys, batches of 100, 8 MiB segments; fastest of "
              f"{args.repeat}."), "",
             ("| codec | log MB | cleaner MB/s | cleaner records/s | floor MB/s (read + write + "
              "fsync) | cleaner ÷ floor | recopied |"), "|---|---|---|---|---|---|---|"]
    for codec_name, r in results["throughput"].items():
        c = r["cleaner"]
        lines.append(f"| {codec_name} | {r['log_bytes'] / 1e6:.1f} | {c['mb_per_s']:.1f} | "
                     f"{c['records_per_s']:.0f} | {r['floor']['mb_per_s']:.1f} | {r['ratio']:.3f} | "
                     f"{100 * c['bytes_written'] / c['bytes_read']:.1f}% |")
    lat = results["latency"]
    lines += ["", (f"Produce latency (acks=1, one record at a time, one broker) with "
                   f"{lat['load_records']} records to clean:"), "",
              "| cleaner | samples | p50 ms | p99 ms | max ms |", "|---|---|---|---|---|"]
    for label, key in (("idle", "idle"), ("cleaning", "during_cleaning")):
        p = lat[key]
        lines.append(f"| {label} | {p['n']} | {p['p50_ms']:.2f} | {p['p99_ms']:.2f} | "
                     f"{p['max_ms']:.2f} |")
    text = "\n".join(lines) + "\n"
    (RESULTS / f"compaction-{stamp}.md").write_text(text)
    (RESULTS / "compaction-latest.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
