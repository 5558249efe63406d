"""Transactional offset commits (TxnOffsetCommit) in the group coordinator: pending per
producer until the marker, and the same outcome when a new coordinator loads the log."""

from __future__ import annotations

import asyncio
import time

from tests.unit.groups.test_coordinator import (
    DATA_TP,
    OFFSETS_TP,
    _loaded,
    make_broker,
    make_coordinator,
)
from weir.groups.codec import OffsetAndMetadata
from weir.protocol.errors import ErrorCode
from weir.records.control import build_marker
from weir.storage.producer_state import AppendOrigin


def _marker(broker, producer_id: int, commit: bool) -> None:
    """What the WriteTxnMarkers handler appends (an EndTransactionMarker control batch)."""
    batch = build_marker(producer_id, 0, commit, 0, int(time.time() * 1000))
    broker.replica_manager.log.append_as_leader(batch, 0, int(time.time() * 1000),
                                                AppendOrigin.COORDINATOR)


def test_pending_until_the_marker_then_committed_or_dropped(tmp_path):
    async def scenario():
        broker = make_broker(tmp_path)
        coord = make_coordinator(broker)
        coord.on_leadership(OFFSETS_TP, True, 0)
        await _loaded(coord)
        assert await coord.commit_txn_offsets("g", 7, 0, "", None, -1, {
            DATA_TP: OffsetAndMetadata(10)}) == {DATA_TP: ErrorCode.none}
        assert coord.fetch_offsets("g", [DATA_TP]) == {DATA_TP: None}  # not visible yet
        assert coord.has_pending_txn_offsets("g", DATA_TP)
        assert await coord.commit_txn_offsets("g", 8, 0, "", None, -1, {
            DATA_TP: OffsetAndMetadata(20)}) == {DATA_TP: ErrorCode.none}
        # Producer 8 aborts, producer 7 commits.
        _marker(broker, 8, commit=False)
        coord.on_txn_marker(OFFSETS_TP, 8, committed=False)
        assert coord.fetch_offsets("g", [DATA_TP]) == {DATA_TP: None}
        _marker(broker, 7, commit=True)
        coord.on_txn_marker(OFFSETS_TP, 7, committed=True)
        assert coord.fetch_offsets("g", [DATA_TP])[DATA_TP].offset == 10
        assert not coord.has_pending_txn_offsets("g", DATA_TP)
        # A member check applies when the producer names its consumer's generation (KIP-447).
        assert await coord.commit_txn_offsets("g", 9, 0, "someone", None, 3, {
            DATA_TP: OffsetAndMetadata(30)}) == {DATA_TP: ErrorCode.unknown_member_id}
        # Still undecided when the partition is loaded elsewhere: producer 9's commit.
        assert await coord.commit_txn_offsets("g", 9, 0, "", None, -1, {
            DATA_TP: OffsetAndMetadata(40)}) == {DATA_TP: ErrorCode.none}

        again = make_coordinator(broker)
        again.on_leadership(OFFSETS_TP, True, 1)
        await _loaded(again)
        assert again.fetch_offsets("g", [DATA_TP])[DATA_TP].offset == 10  # 20 was aborted
        assert again.has_pending_txn_offsets("g", DATA_TP)
        _marker(broker, 9, commit=True)
        again.on_txn_marker(OFFSETS_TP, 9, committed=True)
        assert again.fetch_offsets("g", [DATA_TP])[DATA_TP].offset == 40

        third = make_coordinator(broker)
        third.on_leadership(OFFSETS_TP, True, 2)
        await _loaded(third)
        assert third.fetch_offsets("g", [DATA_TP])[DATA_TP].offset == 40
        assert not third.has_pending_txn_offsets("g", DATA_TP)
    asyncio.run(asyncio.wait_for(scenario(), 20))


def test_markers_for_other_partitions_or_producers_change_nothing(tmp_path):
    async def scenario():
        broker = make_broker(tmp_path)
        coord = make_coordinator(broker)
        coord.on_leadership(OFFSETS_TP, True, 0)
        await _loaded(coord)
        await coord.commit_txn_offsets("g", 7, 0, "", None, -1, {DATA_TP: OffsetAndMetadata(5)})
        coord.on_txn_marker(DATA_TP, 7, committed=True)  # not __consumer_offsets
        coord.on_txn_marker(OFFSETS_TP, 99, committed=True)  # another producer
        assert coord.fetch_offsets("g", [DATA_TP]) == {DATA_TP: None}
        assert coord.has_pending_txn_offsets("g", DATA_TP)
    asyncio.run(asyncio.wait_for(scenario(), 20))
