"""What every benchmark shares: the machine it ran on, where its files go, the CPU it used,
and the one schema of ``bench/results/<name>.json``.

A benchmark module measures and writes its report (Markdown, often JSON beside it) into
:func:`out_dir`. ``python -m bench run NAME`` runs the module in a child process with
``WEIR_BENCH_OUT`` set to a fresh directory, then writes the benchmark's one current result:
``bench/results/<name>.md`` (the report under a header naming commit and machine) and
``bench/results/<name>.json`` (:func:`envelope`: the commit, the machine, the wall time, the
CPU seconds of every process of the run, and the module's own JSON under ``results``).
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import resource
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
SCHEMA_VERSION = 1
OUT_ENV = "WEIR_BENCH_OUT"


def out_dir() -> Path:
    """Where a benchmark module writes its files: the runner's directory for this run
    (``WEIR_BENCH_OUT``), or ``bench/.out/`` (not committed) for a module run on its own."""
    path = Path(os.environ.get(OUT_ENV) or HERE / ".out")
    path.mkdir(parents=True, exist_ok=True)
    return path


def commit(cwd: Path = ROOT) -> str:
    """The checkout's short commit, ``+dirty`` when tracked files differ from it."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                                  check=False, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    rev = git("rev-parse", "--short", "HEAD") or "?"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "weir")
    return f"{rev}+dirty" if dirty else rev


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def machine() -> dict:
    """The machine and load a run saw: CPU model, cores, memory, Python, kernel, commit,
    the load average at the start, and the Kafka client's versions."""
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    info: dict[str, Any] = {
        "cpu": cpu_model(), "cores": os.cpu_count(), "ram_gib": round(mem_gib, 1),
        "python": platform.python_version(), "kernel": platform.release(),
        "os": platform.platform(), "commit": commit(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}
    try:
        import confluent_kafka

        info["confluent_kafka"] = confluent_kafka.version()[0]
        info["librdkafka"] = confluent_kafka.libversion()[0]
    except ImportError:
        pass
    return info


@contextlib.contextmanager
def cluster(data_dir: Path | None, brokers: int = 1, *, timeout_s: float = 90,
            serve_metrics: bool = False, **kwargs: Any) -> Iterator[Any]:
    """A ``LocalCluster`` of ``brokers`` on free loopback ports under ``data_dir`` (None: a
    temporary directory, removed after), started (``kwargs``: ``overrides``,
    ``session_timeout_ms``, ...), its brokers' log tails printed if it fails to start or the
    benchmark fails, stopped by PID at the end."""
    if data_dir is None:
        with (tempfile.TemporaryDirectory(prefix="weir-bench-cluster-") as tmp,
              cluster(Path(tmp), brokers, timeout_s=timeout_s, serve_metrics=serve_metrics,
                      **kwargs) as local):
            yield local
        return
    from weir.ops.cluster import LocalCluster

    local = LocalCluster(data_dir, brokers=brokers, port_base=0, **kwargs)
    local.serve_metrics = serve_metrics
    try:
        local.start(timeout_s=timeout_s)
        yield local
    except BaseException:
        for broker_id in local.broker_ids:
            path = local.log_path(broker_id)
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-40:]
                print(f"---- broker {broker_id} log tail ----", *tail, sep="\n", flush=True)
        raise
    finally:
        local.stop()


_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a running process (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def children_cpu_s() -> tuple[float, float]:
    """User and system CPU seconds of this process's waited-for descendants (a benchmark
    module and the brokers, ZooKeeper and Spark it started and stopped)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime, usage.ru_stime


def envelope(*, name: str, tier: str, argv: list[str], started_utc: str, wall_s: float,
             cpu_user_s: float, cpu_system_s: float, info: dict, returncode: int,
             results: Any, report: str | None) -> dict:
    """The one schema of ``bench/results/<name>.json``."""
    cpu_s = cpu_user_s + cpu_system_s
    return {
        "schema": SCHEMA_VERSION,
        "benchmark": name,
        "tier": tier,
        "commit": info.get("commit", "?"),
        "started_utc": started_utc,
        "argv": argv,
        "returncode": returncode,
        "machine": info,
        "cost": {
            "wall_s": round(wall_s, 2),
            # Every process of the run (the module, its brokers, ZooKeeper, Spark): on a
            # shared machine this holds still where wall-clock figures do not.
            "cpu_s": round(cpu_s, 2),
            "cpu_user_s": round(cpu_user_s, 2),
            "cpu_system_s": round(cpu_system_s, 2),
            "cpu_per_wall": round(cpu_s / wall_s, 2) if wall_s > 0 else None,
        },
        "results": results,
        "report": report,
    }


def machine_line(info: dict) -> str:
    load = info.get("load_average_at_start") or []
    return (f"{info.get('cpu', '?')}, {info.get('cores', '?')} cores, "
            f"{info.get('ram_gib', '?')} GiB, Python {info.get('python', '?')}"
            + (f", load {load[0]}" if load else ""))


_RULE = re.compile(r"^\|(\s*:?-+:?\s*\|)+$")
_NUMBER = re.compile(r"^[-+]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?$")
_STAMP = re.compile(r"\d{8}T\d{6}Z|\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2})?(\+00:00)?( UTC)?)?")
_UNIT = re.compile(r"\s*(ms|µs|us|s|%|×|x|MB/s|MiB|KiB|B)$")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def number(cell: str) -> float | None:
    """A table cell as a number (``**0.68**``, ``1,000``, ``33.3 ms``), or None."""
    text = _UNIT.sub("", cell.replace("*", "").replace("`", "").strip())
    return float(text.replace(",", "")) if _NUMBER.match(text) else None


def _pure(cell: str) -> bool:
    return bool(_NUMBER.match(cell.replace("*", "").replace("`", "").strip()))


def tables_of(markdown: str) -> dict[str, dict[str, dict[str, float]]]:
    """The numbers of a report's Markdown tables, for a module that writes no JSON:
    ``{table title: {row label: {column: number}}}``. A table's title is the heading above it
    (``#2`` and on for the next ones under the same heading). The leading columns up to the
    first one after the first holding only plain numbers label the rows (``16 KiB | all |
    plain``); the cells after them that read as numbers (``**0.68**``, ``1,000``,
    ``33.3 ms``, ``0.4 / 2.3`` as two) are the figures."""
    tables: dict[str, dict[str, dict[str, float]]] = {}
    heading = "report"
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("#"):
            # a title without the run's date, so that two runs' tables line up
            heading = _STAMP.sub("", line.lstrip("#")).strip(" —-:(),") or heading
        if line.startswith("|") and i + 1 < len(lines) and _RULE.match(lines[i + 1].strip()):
            header = [c.replace("*", "").replace("`", "") for c in _cells(line)]
            body: list[list[str]] = []
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                body.append(_cells(lines[i]))
                i += 1
            labels = next((c for c in range(1, len(header))
                           if body and all(c < len(r) and _pure(r[c]) for r in body)), 1)
            rows: dict[str, dict[str, float]] = {}
            for cells in body:
                key = " | ".join(c.replace("*", "").replace("`", "")
                                 for c in cells[:labels] if c) or f"row {len(rows) + 1}"
                while key in rows:
                    key += " (again)"
                values: dict[str, float] = {}
                for c, (column, cell) in enumerate(zip(header, cells, strict=False)):
                    name = column or f"column {c + 1}"
                    parts = [number(part) for part in cell.split(" / ")]
                    if c < labels or None in parts:
                        continue
                    if len(parts) == 1:
                        values[name] = parts[0]
                    else:  # "median / max"
                        values.update({f"{name} [{k + 1}]": v for k, v in enumerate(parts)})
                if values:
                    rows[key] = values
            if rows:
                title, n = heading, 2
                while title in tables:
                    title, n = f"{heading} #{n}", n + 1
                tables[title] = rows
            continue
        i += 1
    return tables
