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

import os
import platform
import resource
import subprocess
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
