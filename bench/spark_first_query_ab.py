"""A/B of the first query of a Spark session: the working tree's ``weir/spark`` against
``--base`` (a revision), in interleaved fresh sessions, on one broker.

    .venv/bin/python bench/spark_first_query_ab.py [--base 901f837]

Checks out ``weir/spark`` of ``--base`` and of HEAD in turn (restored to HEAD at the end), so
run it in a clone made for it (``git clone`` the branch to /tmp, ``make deps``).  Sessions,
each a new process, JVM and Python workers (``bench/spark_first_query.py``'s session):

* weir first: base without a numba cache (a fresh clone), HEAD (kernel precompiled as by
  ``make deps``), base with the cache its first session left, HEAD again;
* range first: the same, without the last.

Prints one JSON line per session and writes them to
``bench/results/spark_first_query_ab-<UTC timestamp>.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))


def checkout(rev: str) -> None:
    subprocess.run(["git", "-C", str(ROOT), "checkout", "-q", rev, "--", "weir/spark"],
                   check=True)


def main() -> None:
    import spark_first_query as fq

    from weir.cli.cluster import LocalCluster

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="901f837")
    args = parser.parse_args()
    cluster = LocalCluster(tempfile.mkdtemp(prefix="weir-first-ab-"), brokers=1, port_base=0,
                           overrides={"num.partitions": "1"})
    cluster.start(timeout_s=90)
    runs = []
    plan = [(f"{args.base}, no numba cache (fresh clone)", args.base, True),
            ("HEAD, kernel precompiled", "HEAD", False),
            (f"{args.base}, numba cache present", args.base, False),
            ("HEAD, kernel precompiled", "HEAD", False)]
    try:
        fq.produce(cluster.bootstrap, "first-query-ab", 50)
        for order in ("weir-first", "range-first"):
            for label, rev, clear in (plan if order == "weir-first" else plan[:3]):
                checkout(rev)
                if clear:
                    for cached in (ROOT / "weir" / "spark" / "__pycache__").glob("*.nb*"):
                        cached.unlink()
                elif rev == "HEAD":
                    subprocess.run([sys.executable, "-m", "weir.spark.kernel"], check=True,
                                   capture_output=True)
                load = os.getloadavg()[0]
                run = fq.session(sys.executable, cluster.bootstrap, "first-query-ab", order, 50)
                run.update(label=label, load_before=round(load, 2))
                print(json.dumps(run), flush=True)
                runs.append(run)
    finally:
        checkout("HEAD")
        cluster.stop()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=False).stdout.strip()
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    (ROOT / "bench" / "results" / f"spark_first_query_ab-{stamp}.json").write_text(json.dumps(
        {"head": commit, "base": args.base, "machine": f"{os.cpu_count()} CPUs",
         "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
