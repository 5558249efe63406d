"""Per-replica progress of a reassignment: metrics parsing, measuring, drawing."""

from __future__ import annotations

import io

from weir.cli.reassign_progress import (
    LiveView,
    ReplicaProgress,
    measure,
    parse_log_metrics,
    render,
)
from weir.common import TopicPartition

TP = TopicPartition("orders", 0)
PAGE = """# HELP kafka_log_log_logendoffset ...
# TYPE kafka_log_log_logendoffset gauge
kafka_log_log_logendoffset{topic="orders",partition="0"} 1000
kafka_log_log_size{topic="orders",partition="0"} 4096.0
kafka_log_log_logendoffset{topic="other",partition="3"} 7
kafka_server_replicamanager_leadercount 1
kafka_log_log_size{topic="broken"} 5
"""


def test_parse_log_metrics_takes_offsets_and_sizes_per_partition():
    assert parse_log_metrics(PAGE) == {TP: (1000, 4096), TopicPartition("other", 3): (7, None)}


def test_measure_compares_each_adding_replica_with_the_leader():
    moving = {TP: ([1, 2, 3, 4], [3, 4], [1])}
    logs = {1: {TP: (1000, 4096)}, 3: {TP: (250, 1024)}}
    rows = measure(moving, {TP: 1}, {TP: [1, 2, 4]}, logs)
    assert rows == [ReplicaProgress(TP, 3, False, (250, 1000), (1024, 4096)),
                    ReplicaProgress(TP, 4, True, None, None)]
    assert rows[0].share() == 0.25 and rows[1].share() == 1.0
    # no metrics for broker 3: bytes on disk of a local cluster instead
    local = measure(moving, {TP: 1}, {TP: [1]}, {}, {TP: {1: 4000, 3: 1000}})
    assert local[0].size == (1000, 4000) and local[0].share() == 0.25
    assert local[1].share() == 0.0
    unknown = measure(moving, {TP: 1}, {TP: [1]}, {})
    assert unknown[0].share() is None


def test_render_lines_and_totals():
    rows = [ReplicaProgress(TP, 3, False, (250, 1000), (1024, 4096)),
            ReplicaProgress(TP, 4, True, None, None)]
    lines = render(rows)
    assert lines[0].startswith("  orders-0 -> broker 3  [######..................]  25%")
    assert "offsets 250/1000" in lines[0] and "1.0 KiB/4.0 KiB" in lines[0]
    assert "in ISR" in lines[1] and "100%" in lines[1]
    assert lines[2].startswith("Replicas caught up: 1/2  overall") and "62%" in lines[2]
    assert render([]) == []


def test_live_view_redraws_on_a_terminal_and_prints_changes_otherwise():
    out = io.StringIO()
    view = LiveView(out, tty=True)
    view.show(["a", "b"])
    view.show(["c"])
    assert out.getvalue() == "a\nb\n\x1b[2F\x1b[Jc\n"
    plain = io.StringIO()
    view = LiveView(plain, tty=False, stamp=False)
    view.show(["a"])
    view.show(["a"])
    view.show(["b"])
    assert plain.getvalue() == "a\nb\n"
