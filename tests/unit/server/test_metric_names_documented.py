"""Every metric family a broker exposes is documented in docs/metrics.md, and every metric the
Grafana dashboard (docs/grafana-dashboard.json) queries is one the broker exposes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from weir.common import TopicPartition
from weir.server.loop_lag import EventLoopLagMonitor
from weir.server.metrics import ControllerSnapshot, MetricsSnapshot, PartitionSnapshot, registry_for

DOCS = Path(__file__).resolve().parents[3] / "docs"
SUFFIXES = ("_bucket", "_sum", "_count", "_created", "_total")


def exposed_names() -> set[str]:
    """Family names (counters with ``_total``) of a broker's full registry."""
    follower = PartitionSnapshot(TopicPartition("t", 0), False, 2, 3, 3, 2, 0, 5, 10,
                                 num_segments=1, follower_lag=1)
    snap = MetricsSnapshot(partitions=[follower], controller=ControllerSnapshot(True))
    registry = registry_for(lambda: snap)
    EventLoopLagMonitor(registry)
    names = set()
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        if family.name.endswith("_created"):  # prometheus_client's creation-time series
            continue
        names.add(family.name + "_total" if family.type == "counter" else family.name)
    return names


def test_every_exposed_family_is_documented():
    doc = (DOCS / "metrics.md").read_text()
    missing = sorted(n for n in exposed_names() if f"`{n}`" not in doc)
    assert not missing, f"not in docs/metrics.md: {missing}"


def test_the_dashboard_queries_only_exposed_metrics():
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert exprs
    used = set()
    for expr in exprs:
        used |= set(re.findall(r"\b(?:kafka|weir)_[a-z_]+", expr))
    exposed = exposed_names()

    def known(name: str) -> bool:
        if name in exposed:
            return True
        return any(name.endswith(s) and name.removesuffix(s) in exposed for s in SUFFIXES)

    unknown = sorted(n for n in used if not known(n))
    assert not unknown, f"the dashboard queries metrics no broker exposes: {unknown}"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
