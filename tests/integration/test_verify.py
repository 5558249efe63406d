"""``weir verify`` end to end: a short run with every fault kind on the built-in cluster.

Fixed seeds, short fault windows (each kind once), a bounded run: the verifier starts and
stops its own ZooKeeper, brokers (by pid) and proxies on free loopback ports.
"""

from __future__ import annotations

import json

import pytest

from weir.verify.nemesis import FAULTS
from weir.verify.runner import Options, run

pytestmark = pytest.mark.integration

REPORT_FILES = {"history.jsonl", "results.json", "summary.md", "index.html", "latency.png",
                "throughput.png"}


def _short_run(tmp_path, workload: str, seed: int) -> tuple:
    opts = Options(brokers=3, duration_s=75, nemesis=list(FAULTS), seed=seed,
                   workload=workload, report_dir=tmp_path / "report", rate=40,
                   partitions=3, topic=f"verify-{workload}", quiet_s=(1.0, 2.0),
                   hold_s=(2.0, 3.0), windows=len(FAULTS), heal_timeout_s=90)
    outcome = run(opts)
    return opts, outcome


def _assert_clean(tmp_path, outcome) -> None:
    result = outcome.result
    bad = {k: n for k, n in result.counts.items() if n}
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert not bad, f"anomalies {bad}\n{summary}"
    assert sorted(w.fault for w in result.windows) == sorted(FAULTS), summary
    assert all(w.end is not None for w in result.windows)
    assert result.stats["acks"] > 100, summary
    assert REPORT_FILES <= {p.name for p in (tmp_path / "report").iterdir()}
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    assert results["valid"] is True
    # the replicas were compared, and the final read reached every high watermark
    ops = [json.loads(line) for line in outcome.history_path.read_text().splitlines()]
    [replicas] = [op for op in ops if op["f"] == "replicas" and op["type"] == "ok"]
    assert len(replicas["value"]["partitions"]) == 3
    assert all(len(r["replicas"]) == 3 for r in replicas["value"]["partitions"])


def test_verify_produce_consume_every_fault(tmp_path):
    _, outcome = _short_run(tmp_path, "produce-consume", seed=11)
    _assert_clean(tmp_path, outcome)


@pytest.mark.slow
def test_verify_groups_every_fault(tmp_path):
    _, outcome = _short_run(tmp_path, "groups", seed=12)
    _assert_clean(tmp_path, outcome)
    ops = [json.loads(line) for line in outcome.history_path.read_text().splitlines()]
    assert any(op["f"] == "commit" and op["type"] == "ok" for op in ops)
