"""A/B of the first query of a Spark session: the working tree's ``weir/spark`` against
``--base`` (a revision), in interleaved fresh sessions, on one broker.

    .venv/bin/python -m bench run spark_first_query_ab [--base 901f837]

Checks out ``weir/spark`` of ``--base`` and of HEAD in turn (restored to HEAD at the end), so
run it in a clone made for it (``git clone`` the branch to /tmp, ``make deps``); it refuses
to start while ``weir/spark`` has uncommitted changes, which the checkouts would lose.  Sessions,
each a new process, JVM and Python workers (:mod:`bench.spark_first_query`'s session):

* weir first: base without a numba cache (a fresh clone), HEAD (kernel precompiled as by
  ``make deps``), base with the cache its first session left, HEAD again;
* range first: the same, without the last.

Prints one JSON line per session and writes them to ``bench/results/spark_first_query_ab.json``
(``python -m bench run``; the printed lines are its report).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from bench.harness import ROOT, out_dir
from bench.harness import commit as checkout_commit


def checkout(rev: str) -> None:
    subprocess.run(["git", "-C", str(ROOT), "checkout", "-q", rev, "--", "weir/spark"],
                   check=True)


def main() -> None:
    from bench import spark_first_query as fq
    from weir.ops.cluster import LocalCluster

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="901f837")
    args = parser.parse_args()
    changed = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "-uno", "--",
                              "weir/spark"], capture_output=True, text=True, check=True).stdout
    if changed.strip():
        raise SystemExit("spark_first_query_ab checks out weir/spark of two revisions in this "
                         "checkout; commit or stash its changes first (or run it in a clone):\n"
                         + changed)
    data_dir = tempfile.TemporaryDirectory(prefix="weir-first-ab-")
    cluster = LocalCluster(data_dir.name, brokers=1, port_base=0,
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
        data_dir.cleanup()
    commit = checkout_commit()
    (out_dir() / "spark_first_query_ab.json").write_text(json.dumps(
        {"head": commit, "base": args.base, "machine": f"{os.cpu_count()} CPUs",
         "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
