"""``python -m bench``: list the benchmarks, run one, compare two revisions' results.

    .venv/bin/python -m bench list [--tier TIER]
    .venv/bin/python -m bench run NAME [--quick] [--dry-run] [ARGS for the benchmark ...]
    .venv/bin/python -m bench run --tier inprocess --quick
    .venv/bin/python -m bench compare REV_A REV_B [NAME ...]
    .venv/bin/python -m bench compare REV_A REV_B NAME --measure [--rounds 3] [ARGS ...]
    .venv/bin/python -m bench table            # bench/README.md's table of current results

``run`` starts ``python -m bench.NAME ARGS`` in a child process and writes the benchmark's
one current result, replacing the previous one: ``bench/results/NAME.md`` and
``bench/results/NAME.json`` (schema: ``bench/harness.py``), then the table in
``bench/README.md``. ``compare`` reads ``bench/results/NAME.json`` as committed at two
revisions and prints every figure of both side by side with B ÷ A, and whether commit and
machine differ (figures from different machines do not compare). ``compare --measure`` runs
an in-process benchmark now, on this machine, against each revision's ``weir/`` (``git
archive``) in interleaved rounds and prints the medians side by side; two revisions'
brokers compare in the ``ab`` tier.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import harness
from bench.registry import BENCHMARKS, TIERS, Benchmark, by_tier

README = harness.HERE / "README.md"
TABLE_BEGIN = "<!-- results table: python -m bench table -->"
TABLE_END = "<!-- end of results table -->"


# -- list -----------------------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    tiers = [args.tier] if args.tier else list(TIERS)
    for tier in tiers:
        print(f"{tier}:")
        for bench in by_tier(tier):
            current = _current(bench.name)
            when = f"  [{current['commit']}, {current['started_utc'][:10]}]" if current else ""
            print(f"  {bench.name:<20} {bench.summary}{when}")
    return 0


# -- run ------------------------------------------------------------------------------------
def _current(name: str, results: Path = harness.RESULTS) -> dict | None:
    path = results / f"{name}.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("schema") == harness.SCHEMA_VERSION else None


def _collect(out: Path, stdout: str) -> tuple[Any, str]:
    """What a benchmark module left in its output directory: its JSON (one document, or one
    per file) and its Markdown report (identical copies once; stdout when it wrote none)."""
    docs: dict[str, Any] = {}
    for path in sorted(out.rglob("*.json")):
        try:
            docs[path.name] = json.loads(path.read_text())
        except ValueError:
            continue
    reports: list[str] = []
    for path in sorted(out.rglob("*.md")):
        text = path.read_text(errors="replace").strip()
        if text and text not in reports:
            reports.append(text)
    report = "\n\n".join(reports) if reports else "```\n" + stdout.strip()[-20000:] + "\n```"
    results: Any = next(iter(docs.values())) if len(docs) == 1 else (docs or None)
    if results is None and reports:  # Markdown only: the numbers of its tables
        results = {"tables": harness.tables_of(report)} if harness.tables_of(report) else None
    return results, report


def run_one(bench: Benchmark, extra: list[str], *, quick: bool, save: bool,
            results_dir: Path = harness.RESULTS, tree: Path | None = None) -> int:
    """Run one benchmark in a child process; with ``tree``, against the ``weir`` package
    under it (a revision's, see :func:`measure`) instead of the checkout's."""
    argv = [*(bench.quick if quick else ()), *extra]
    info = harness.machine()
    started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"== {bench.name} ({bench.tier}) {' '.join(argv)}", flush=True)
    with tempfile.TemporaryDirectory(prefix=f"weir-bench-{bench.name}-") as tmp:
        child_env = dict(os.environ)
        child_env[harness.OUT_ENV] = tmp
        # Spark's Python workers import the benchmark's data sources by module name; a
        # revision's tree comes first, and -P keeps the working directory (the checkout,
        # whose weir/ would shadow it) off sys.path.
        child_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(tree or ""), str(harness.ROOT), child_env.get("PYTHONPATH", ""))
            if p)
        flags = ["-P"] if tree else []
        user0, system0 = harness.children_cpu_s()
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, *flags, "-m", bench.module, *argv],
                                cwd=harness.ROOT,
                                env=child_env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1)
        lines: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            lines.append(line)
        returncode = proc.wait()
        wall_s = time.monotonic() - t0
        user1, system1 = harness.children_cpu_s()
        results, report = _collect(Path(tmp), "".join(lines))
    info["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    doc = harness.envelope(
        name=bench.name, tier=bench.tier, argv=argv, started_utc=started, wall_s=wall_s,
        cpu_user_s=user1 - user0, cpu_system_s=system1 - system0, info=info,
        returncode=returncode, results=results, report=f"{bench.name}.md")
    cost = doc["cost"]
    print(f"== {bench.name}: exit {returncode}, {cost['wall_s']} s wall, "
          f"{cost['cpu_s']} CPU s (module, brokers, ZooKeeper)", flush=True)
    if returncode != 0:
        print(f"== {bench.name} failed: its current result is left as it was", file=sys.stderr)
        return returncode
    if save:
        results_dir.mkdir(parents=True, exist_ok=True)
        (results_dir / f"{bench.name}.json").write_text(json.dumps(doc, indent=1) + "\n")
        header = (f"<!-- python -m bench run {bench.name} {' '.join(argv)}".rstrip()
                  + f" -->\n_Commit {doc['commit']}, {started}; {harness.machine_line(info)}; "
                  f"{cost['wall_s']} s wall, {cost['cpu_s']} CPU s._\n\n")
        (results_dir / f"{bench.name}.md").write_text(header + report + "\n")
        print(f"== written: {results_dir / bench.name}.{{md,json}}")
    return 0


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    if args.tier:
        if args.name or extra:
            raise SystemExit("run: give a NAME or --tier, not both (and no arguments)")
        names = [b.name for b in by_tier(args.tier) if args.quick is False or b.quick]
    elif args.name:
        names = [args.name]
    else:
        raise SystemExit("run: name a benchmark (python -m bench list) or --tier")
    failed = 0
    for name in names:
        bench = BENCHMARKS.get(name)
        if bench is None:
            raise SystemExit(f"run: no benchmark {name!r} (python -m bench list)")
        if args.dry_run:
            print(" ".join([sys.executable, "-m", bench.module,
                            *(bench.quick if args.quick else ()), *extra]))
            continue
        # a diagnostic tool's output is its own (a profile, a stall log), not a result
        save = not args.no_save and bench.tier != "diagnostics"
        failed += run_one(bench, extra, quick=args.quick, save=save) != 0
    if not args.dry_run and not args.no_save:
        write_table()
    return 1 if failed else 0


# -- the README's table ---------------------------------------------------------------------
def table(results_dir: Path = harness.RESULTS) -> str:
    rows = ["| benchmark | tier | commit | run (UTC) | machine | wall s | CPU s | argv |",
            "|---|---|---|---|---|---:|---:|---|"]
    for bench in BENCHMARKS.values():
        doc = _current(bench.name, results_dir)
        if doc is None:
            what = "(a tool: no result)" if bench.tier == "diagnostics" else "(not run yet)"
            rows.append(f"| {bench.name} | {bench.tier} | {what} | | | | | |")
            continue
        m = doc["machine"]
        where = f"{m['cores']} cores, {m.get('cpu', '?')}" if m.get("cores") else "in the report"
        commit = doc["commit"] + (" (migrated)" if doc.get("migrated_from") else "")
        argv = (f"`{' '.join(doc['argv'])}`" if doc["argv"]
                else "in the report" if doc.get("migrated_from") else "defaults")
        rows.append(
            f"| [{bench.name}](results/{bench.name}.md) | {bench.tier} | {commit} "
            f"| {doc['started_utc'][:16].replace('T', ' ')} | {where} "
            f"| {_or_dash(doc['cost']['wall_s'])} | {_or_dash(doc['cost']['cpu_s'])} | {argv} |")
    return "\n".join(rows)


def _or_dash(value: object) -> str:
    return "–" if value is None else str(value)


def write_table(readme: Path = README, results_dir: Path = harness.RESULTS) -> None:
    text = readme.read_text()
    if TABLE_BEGIN not in text or TABLE_END not in text:
        return
    head, rest = text.split(TABLE_BEGIN, 1)
    _old, tail = rest.split(TABLE_END, 1)
    readme.write_text(f"{head}{TABLE_BEGIN}\n{table(results_dir)}\n{TABLE_END}{tail}")


def cmd_table(_args: argparse.Namespace) -> int:
    write_table()
    print(table())
    return 0


# -- compare --------------------------------------------------------------------------------
def flatten(value: Any, prefix: str = "") -> dict[str, float]:
    """Every number in a JSON document, by its path (``a.b[2].c``)."""
    out: dict[str, float] = {}
    if isinstance(value, bool):
        return out
    if isinstance(value, int | float):
        out[prefix] = float(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out.update(flatten(item, f"{prefix}[{i}]"))
    return out


def _at_revision(rev: str, name: str) -> dict | None:
    path = f"bench/results/{name}.json"
    answer = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=harness.ROOT,
                            capture_output=True, text=True, check=False)
    if answer.returncode != 0:
        return None
    try:
        doc = json.loads(answer.stdout)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and doc.get("schema") == harness.SCHEMA_VERSION else None


def compare(a: dict, b: dict) -> list[str]:
    """Side by side, the figures of two results of one benchmark, with B ÷ A."""
    lines = [f"commit: {a['commit']} → {b['commit']}",
             f"machine A: {harness.machine_line(a['machine'])}",
             f"machine B: {harness.machine_line(b['machine'])}"]
    same = {k: a["machine"].get(k) == b["machine"].get(k) for k in ("cpu", "cores", "ram_gib")}
    if not all(same.values()):
        lines.append("!! the machines differ: these figures do not compare")
    if a["argv"] != b["argv"]:
        lines.append(f"!! the arguments differ: {a['argv']} → {b['argv']}")
    fa = flatten({"cost": a["cost"], "results": a["results"]})
    fb = flatten({"cost": b["cost"], "results": b["results"]})
    return lines + figure_lines(fa, fb)


def _natural(key: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", key)]


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.6g}"


def export_weir(rev: str, into: Path) -> Path:
    """``rev``'s ``weir`` package under ``into`` (``git archive``), for PYTHONPATH."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev, "weir"], cwd=harness.ROOT,
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def _medians(docs: list[dict]) -> dict[str, float]:
    figures = [flatten({"cost": d["cost"], "results": d["results"]}) for d in docs]
    keys = {k for f in figures for k in f}
    return {k: statistics.median(f[k] for f in figures if k in f) for k in keys}


def measure(bench: Benchmark, revs: tuple[str, str], rounds: int, quick: bool,
            extra: list[str]) -> tuple[dict[str, float], dict[str, float]] | None:
    """Run an in-process benchmark against two revisions' ``weir`` (the checkout's bench
    modules), ``rounds`` times each, interleaved with the order alternating; the median of
    each figure per revision. None when a run failed."""
    with tempfile.TemporaryDirectory(prefix="weir-bench-compare-") as tmp:
        trees = [export_weir(rev, Path(tmp) / f"tree-{i}") for i, rev in enumerate(revs)]
        docs: list[list[dict]] = [[], []]
        for r in range(rounds):
            for side in ((0, 1) if r % 2 == 0 else (1, 0)):
                print(f"== round {r + 1}/{rounds}: {revs[side]}", flush=True)
                out = Path(tmp) / f"results-{side}-{r}"
                if run_one(bench, extra, quick=quick, save=True, results_dir=out,
                           tree=trees[side]) != 0:
                    return None
                docs[side].append(json.loads((out / f"{bench.name}.json").read_text()))
    return _medians(docs[0]), _medians(docs[1])


def figure_lines(fa: dict[str, float], fb: dict[str, float]) -> list[str]:
    width = max((len(k) for k in fa.keys() | fb.keys()), default=10)
    lines = [f"{'figure':<{width}}  {'A':>14}  {'B':>14}  {'B ÷ A':>8}"]
    for key in sorted(fa.keys() | fb.keys(), key=_natural):
        va, vb = fa.get(key), fb.get(key)
        ratio = f"{vb / va:8.3f}" if va and vb is not None else f"{'':>8}"
        lines.append(f"{key:<{width}}  {_num(va):>14}  {_num(vb):>14}  {ratio}")
    return lines


def cmd_measure(args: argparse.Namespace, extra: list[str]) -> int:
    if len(args.names) != 1:
        raise SystemExit("compare --measure: name one benchmark")
    bench = BENCHMARKS[args.names[0]]
    if bench.tier != "inprocess":
        raise SystemExit(f"compare --measure runs in-process benchmarks; {bench.name} is "
                         f"{bench.tier}: two revisions' brokers compare in the ab tier "
                         "(python -m bench list --tier ab)")
    medians = measure(bench, (args.rev_a, args.rev_b), args.rounds, args.quick, extra)
    if medians is None:
        print(f"== {bench.name}: a run failed (the benchmark may need what one revision "
              "lacks)", file=sys.stderr)
        return 1
    print(f"== {bench.name}: A = {args.rev_a}, B = {args.rev_b}, median of {args.rounds} "
          f"interleaved runs each, on {harness.machine_line(harness.machine())}")
    print("\n".join(figure_lines(*medians)))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    names = args.names or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        raise SystemExit(f"compare: no benchmark {', '.join(map(repr, unknown))}")
    for rev in (args.rev_a, args.rev_b):
        if subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                          cwd=harness.ROOT, capture_output=True, check=False).returncode:
            raise SystemExit(f"compare: {rev!r} is not a revision of this repository")
    shown = 0
    for name in names:
        a, b = _at_revision(args.rev_a, name), _at_revision(args.rev_b, name)
        if a is None or b is None:
            if args.names:
                side = "A" if a is None else "B"
                print(f"== {name}: no result at {side} "
                      f"({args.rev_a if a is None else args.rev_b})\n")
            continue
        print(f"== {name}")
        print("\n".join(compare(a, b)))
        print()
        shown += 1
    if not shown and not args.names:
        print(f"no benchmark has a result at both {args.rev_a} and {args.rev_b}")
    return 0


# -- main -----------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_list = sub.add_parser("list", help="the benchmarks by tier, with their current result")
    p_list.add_argument("--tier", choices=TIERS)
    p_run = sub.add_parser("run", help="run a benchmark; other arguments go to it",
                           allow_abbrev=False)  # a benchmark's --t... is not --tier
    p_run.add_argument("name", nargs="?")
    p_run.add_argument("--tier", choices=TIERS, help="every benchmark of a tier")
    p_run.add_argument("--quick", action="store_true", help="the registry's short arguments")
    p_run.add_argument("--no-save", action="store_true", help="leave bench/results/ alone")
    p_run.add_argument("--dry-run", action="store_true", help="print the command only")
    p_cmp = sub.add_parser("compare", help="two revisions' committed results, side by side")
    p_cmp.add_argument("rev_a")
    p_cmp.add_argument("rev_b")
    p_cmp.add_argument("names", nargs="*", metavar="NAME")
    p_cmp.add_argument("--measure", action="store_true",
                       help="run NAME (in-process) against each revision's weir/, interleaved")
    p_cmp.add_argument("--rounds", type=int, default=3, help="runs per revision (--measure)")
    p_cmp.add_argument("--quick", action="store_true", help="the registry's short arguments")
    sub.add_parser("table", help="rewrite bench/README.md's table of current results")
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "run" and not getattr(args, "measure", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "list":
        return cmd_list(args)
    if args.command == "run":
        return cmd_run(args, extra)
    if args.command == "compare":
        return cmd_measure(args, extra) if args.measure else cmd_compare(args)
    return cmd_table(args)


if __name__ == "__main__":
    sys.exit(main())
