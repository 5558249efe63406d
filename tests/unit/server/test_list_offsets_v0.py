"""ListOffsets v0: Kafka's ``UnifiedLog.legacyFetchOffsetsBefore`` over segment boundaries."""

from __future__ import annotations

from weir.server.handlers.list_offsets import legacy_offsets


def test_legacy_list_offsets_follows_kafkas_segment_walk():
    # (segment base or log end offset, time): three segments and the log end.
    entries = [(0, 1000), (100, 2000), (200, 3000), (250, 4000)]
    assert legacy_offsets(entries, -1, 10) == [250, 200, 100, 0]
    assert legacy_offsets(entries, -1, 2) == [250, 200]
    assert legacy_offsets(entries, -2, 10) == [0]
    assert legacy_offsets(entries, 2500, 10) == [100, 0]
    assert legacy_offsets(entries, 999, 10) == []
    assert legacy_offsets(entries, 5000, 1) == [250]
