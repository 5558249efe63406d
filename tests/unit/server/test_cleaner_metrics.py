"""The log cleaner's gauges on /metrics, with Kafka's names, all documented."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from weir.server import metrics
from weir.storage.log_cleaner import CleanerMetrics


def test_cleaner_gauges_rendered_and_documented():
    m = CleanerMetrics(cleaner_recopy_percent=12.5, max_clean_time_secs=3.0,
                       dead_thread_count=1, uncleanable_partitions_count=2)
    values = metrics._cleaner_values(SimpleNamespace(metrics=m))
    snap = metrics.MetricsSnapshot(cleaner=values)
    parsed = metrics.parse(metrics.render(snap))
    assert parsed[("kafka_log_logcleaner_cleaner_recopy_percent", ())] == 12.5
    assert parsed[("kafka_log_logcleaner_max_clean_time_secs", ())] == 3.0
    assert parsed[("kafka_log_logcleaner_deadthreadcount", ())] == 1
    assert parsed[("kafka_log_logcleanermanager_uncleanable_partitions_count", ())] == 2
    doc = (Path(__file__).resolve().parents[3] / "docs" / "metrics.md").read_text()
    assert all(f"`{name}`" in doc for name in values)
    assert metrics._cleaner_values(None) == {}
