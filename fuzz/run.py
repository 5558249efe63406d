"""``make fuzz``: a long fuzzing run of everything that decodes untrusted bytes.

Phases, each for a share of ``--minutes``:

- ``decode``: structure-aware cases (see :mod:`fuzz.cases`) for every request *and* response
  schema the broker serves or reads, through :func:`weir.protocol.codec.decode_body`; plus
  random and mutated record batches through the batch validator and the record decoder, and
  mutated ``__consumer_offsets`` keys and values through the group codec. In process, tens of
  thousands of cases a minute.
- ``live``: the same request cases against a real single-broker cluster (its own ZooKeeper),
  checking after every batch that the process is alive, its memory bounded, and that it still
  serves a produce and a fetch. The broker log is scanned for handler errors.

Line coverage of the decoding modules is measured with ``coverage`` when it is installed.
Any case that breaks a rule is written to ``fuzz/corpus/`` (replayed by the test suite) and
the run exits 1. The report (``--report``, default ``fuzz/last-report.md``) lists cases per
API, outcomes, coverage and findings.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from fuzz import corpus
from fuzz.cases import MUTATIONS, make_case, targets
from fuzz.codecs import codec_case_outcome
from weir.protocol import codec

COVERED = ("weir/protocol/guard.py", "weir/protocol/codec.py", "weir/records/batch.py",
           "weir/records/records.py", "weir/groups/codec.py")


def decode_phase(deadline: float, seed: int, stats: Counter, findings: list[str]) -> None:
    all_targets = targets()
    schemas = [(t, cls) for t in all_targets for cls in (t.request_cls, t.response_cls)]
    rng = random.Random(seed)
    i = 0
    while time.monotonic() < deadline:
        target, cls = schemas[i % len(schemas)]
        mutation = MUTATIONS[rng.randrange(len(MUTATIONS))]
        case = make_case(target, mutation, rng.getrandbits(32), schema=cls)
        try:
            if cls is target.request_cls:
                frame = case.frame(1)[4:]
                header = codec.parse_request_header(frame, bool(cls.__flexible__))
                codec.decode_body(cls, frame, header.size)
            else:
                codec.decode_body(cls, case.body)
            stats["decode: accepted"] += 1
        except codec.MalformedRequest:
            stats["decode: rejected"] += 1
        except Exception as exc:  # noqa: BLE001 - anything else breaks the codec contract
            stats["decode: FINDING"] += 1
            findings.append(f"decode {cls.__name__} of {target.name} v{target.version} "
                            f"{mutation} seed {case.seed}: {exc!r}")
            corpus.save(case, f"decode-{type(exc).__name__}")
        outcome = codec_case_outcome(rng)
        stats[f"codecs: {outcome}"] += 1
        if outcome.startswith("FINDING"):
            findings.append(outcome)
        i += 1


def live_phase(deadline: float, seed: int, stats: Counter, findings: list[str]) -> None:
    from fuzz.live import rss_bytes, run_cases
    from tests.integration.clients import consume_assigned, create_topic, produce
    from weir.ops.cluster import LocalCluster

    with tempfile.TemporaryDirectory() as tmp:
        cluster = LocalCluster(Path(tmp), brokers=1, port_base=0)
        cluster.start(timeout_s=90)
        try:
            slot = cluster.brokers[0]
            pid = cluster.broker_pid(slot.id)
            round_no = 0
            while time.monotonic() < deadline:
                round_no += 1
                batch = [make_case(t, MUTATIONS[(round_no + j) % len(MUTATIONS)],
                                   seed * 1_000_003 + round_no * 31 + j)
                         for t in targets() for j in range(3)]
                outcomes, bad = asyncio.run(run_cases(slot.host, slot.port, batch))
                for k, v in outcomes.items():
                    stats[f"live: {k}"] += v
                for case, outcome in bad:
                    findings.append(f"live {case.target.name} v{case.target.version} "
                                    f"{case.mutation} seed {case.seed}: {outcome}")
                    corpus.save(case, f"live-{outcome}")
                if cluster.broker_pid(slot.id) != pid:
                    findings.append(f"live: the broker died in round {round_no}")
                    break
                stats["live: max RSS MiB"] = max(stats["live: max RSS MiB"],
                                                 rss_bytes(pid) >> 20)
                topic = f"alive-{round_no}"
                try:
                    create_topic(cluster.bootstrap, topic)
                    produce(cluster.bootstrap, topic, [b"alive"])
                    serving = bool(consume_assigned(cluster.bootstrap, topic, [0], 1))
                except Exception as exc:  # noqa: BLE001 - any failure to serve is the finding
                    serving = False
                    stats["live: serving check error"] += 1
                    findings.append(f"live: serving check failed in round {round_no}: {exc!r}")
                if not serving:
                    findings.append(f"live: not serving after round {round_no}")
                    break
            log = cluster.log_path(slot.id).read_text(errors="replace")
            stats["live: handler errors in the log"] = log.count("unexpected error")
        finally:
            if findings:  # keep the evidence: the directory goes with the cluster
                Path("fuzz/last-broker.log").write_text(
                    cluster.log_path(cluster.broker_ids[0]).read_text(errors="replace"))
            cluster.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fuzz.run", description=__doc__)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--phases", default="decode,live")
    ap.add_argument("--report", default="fuzz/last-report.md")
    args = ap.parse_args(argv)
    phases = args.phases.split(",")
    share = args.minutes * 60 / len(phases)
    stats: Counter = Counter()
    findings: list[str] = []
    cov = _start_coverage()
    started = time.monotonic()
    for name in phases:
        phase = {"decode": decode_phase, "live": live_phase}[name]
        phase(time.monotonic() + share, args.seed, stats, findings)
    elapsed = time.monotonic() - started
    coverage_lines = _stop_coverage(cov)
    report = _report(args, elapsed, stats, findings, coverage_lines)
    Path(args.report).write_text(report)
    print(report)
    return 1 if findings else 0


def _start_coverage():
    try:
        import coverage
    except ImportError:
        return None
    cov = coverage.Coverage(include=[f"*/{p}" for p in COVERED], branch=True)
    cov.start()
    return cov


def _stop_coverage(cov) -> list[str]:
    if cov is None:
        return ["(coverage is not installed: pip install coverage)"]
    cov.stop()
    lines = []
    for path in cov.get_data().measured_files():
        _f, statements, _excl, missing, _fmt = cov.analysis2(path)
        short = path[path.index("weir/"):]
        done = len(statements) - len(missing)
        lines.append(f"| {short} | {done}/{len(statements)} | "
                     f"{100 * done / max(len(statements), 1):.0f}% |")
    return sorted(lines)


def _report(args, elapsed: float, stats: Counter, findings: list[str],
            coverage_lines: list[str]) -> str:
    out = [(f"# Fuzzing report (seed {args.seed}, {elapsed / 60:.1f} minutes, "
           f"phases {args.phases})"), "", "| outcome | cases |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in sorted(stats.items())]
    out += ["", "Line coverage of the decoding modules:", "", "| module | lines | % |",
            "|---|---|---|", *coverage_lines, "", f"Findings: {len(findings)}"]
    out += [f"- {f}" for f in findings[:200]]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
