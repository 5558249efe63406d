"""Transactions in the log (KIP-98): control records, producer state with transactions, the
last stable offset, the aborted-transaction index, producer snapshots and recovery."""

from __future__ import annotations

import struct

import pytest

from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import parse_header
from weir.records.builder import build_batch
from weir.records.control import (
    build_marker,
    decode_marker_key,
    encode_marker_key,
    encode_marker_value,
    read_marker,
)
from weir.storage.producer_snapshot import (
    decode_snapshot,
    encode_snapshot,
    list_snapshots,
    snapshot_path,
)
from weir.storage.producer_state import AppendOrigin, ProducerEntry, ProducerStateManager
from weir.storage.txn_index import (
    ENTRY_SIZE,
    AbortedTxn,
    TransactionIndex,
    collect_aborted_transactions,
)

COORD = AppendOrigin.COORDINATOR


def txn_batch(pid, seq, n=1, *, epoch=0, offset=0, transactional=True):
    return build_batch([b"v%d" % i for i in range(n)], producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, base_offset=offset, transactional=transactional)


def marker(pid, committed, *, epoch=0, coordinator_epoch=0, offset=0):
    buf = bytearray(build_marker(pid, epoch, committed, coordinator_epoch, 1000))
    struct.pack_into(">q", buf, 0, offset)
    return bytes(buf)


def apply(psm, buf):
    h = parse_header(buf)
    return psm.apply(h, read_marker(buf) if h.is_control else None)


# -- control records ------------------------------------------------------------------


def test_marker_batch_is_kafkas_control_record():
    buf = build_marker(42, 3, True, 7, 1234)
    h = parse_header(buf)
    assert h.is_control and h.is_transactional
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (42, 3, -1, 1)
    m = read_marker(buf)
    assert m.committed and m.coordinator_epoch == 7
    assert encode_marker_key(True) == b"\x00\x00\x00\x01"  # version 0, COMMIT
    assert encode_marker_key(False) == b"\x00\x00\x00\x00"  # version 0, ABORT
    assert encode_marker_value(7) == b"\x00\x00\x00\x00\x00\x07"
    assert not read_marker(build_marker(1, 0, False, 0, 0)).committed


def test_marker_decoding_refuses_garbage():
    with pytest.raises(KafkaError) as err:
        decode_marker_key(b"\x00")
    assert err.value.code == ErrorCode.corrupt_message
    with pytest.raises(KafkaError):
        read_marker(build_batch([b"x"]))  # not a control batch
    other = build_batch([b"\x00\x00\x00\x00\x00\x00"], keys=[b"\x00\x00\x00\x05"],
                        producer_id=1, producer_epoch=0, transactional=True, control=True)
    assert read_marker(other) is None  # another control type: not a transaction marker


# -- producer state -------------------------------------------------------------------


def test_transaction_lifecycle_and_first_unstable_offset():
    psm = ProducerStateManager()
    assert apply(psm, txn_batch(1, 0, 2, offset=10)) is None
    assert psm.entry(1).current_txn_first_offset == 10
    assert psm.first_unstable_offset() == 10
    assert apply(psm, txn_batch(2, 0, offset=12)) is None  # a second transaction
    assert apply(psm, txn_batch(1, 2, offset=13)) is None  # same txn goes on
    txn, lso = apply(psm, marker(1, False, offset=14))
    assert (txn.producer_id, txn.first_offset, txn.last_offset, txn.is_aborted) == (1, 10, 14, True)
    assert lso == 12  # producer 2's transaction is still open
    # Decided but not yet replicated: still unstable until the HW passes the marker.
    assert psm.first_unstable_offset() == 10
    psm.on_high_watermark_updated(14)
    assert psm.first_unstable_offset() == 10
    psm.on_high_watermark_updated(15)
    assert psm.first_unstable_offset() == 12
    txn, lso = apply(psm, marker(2, True, offset=15))
    assert not txn.is_aborted and lso == 16
    psm.on_high_watermark_updated(16)
    assert psm.first_unstable_offset() is None
    entry = psm.entry(1)
    assert entry.current_txn_first_offset is None and entry.last_seq == 2


def test_empty_transaction_marker_completes_nothing():
    psm = ProducerStateManager()
    apply(psm, txn_batch(1, 0, transactional=False))
    assert apply(psm, marker(1, True, coordinator_epoch=4, offset=1)) is None
    assert psm.entry(1).coordinator_epoch == 4


def test_fencing_rules():
    psm = ProducerStateManager()
    apply(psm, txn_batch(1, 0, epoch=2))
    apply(psm, marker(1, True, epoch=2, coordinator_epoch=5, offset=1))
    apply(psm, txn_batch(1, 1, epoch=2, offset=2))
    # INVALID_PRODUCER_EPOCH for an older epoch, data or marker
    for buf in (txn_batch(1, 2, epoch=1), marker(1, False, epoch=1, coordinator_epoch=5)):
        h = parse_header(buf)
        with pytest.raises(KafkaError) as err:
            psm.check_all([h], COORD, {0: read_marker(buf) if h.is_control else None})
        assert err.value.code == ErrorCode.invalid_producer_epoch
    # an older coordinator epoch is a zombie coordinator
    old = marker(1, False, epoch=2, coordinator_epoch=4)
    with pytest.raises(KafkaError) as err:
        psm.check_all([parse_header(old)], COORD, {0: read_marker(old)})
    assert err.value.code == ErrorCode.transaction_coordinator_fenced
    # a non-transactional write while a transaction is open
    with pytest.raises(KafkaError) as err:
        psm.check(parse_header(txn_batch(1, 2, epoch=2, transactional=False)))
    assert err.value.code == ErrorCode.invalid_txn_state
    # a new epoch (the coordinator aborted on timeout) must start at sequence 0
    with pytest.raises(KafkaError) as err:
        psm.check(parse_header(txn_batch(1, 5, epoch=3)))
    assert err.value.code == ErrorCode.out_of_order_sequence_number
    # replication never refuses
    assert psm.check(parse_header(txn_batch(1, 9, epoch=0)), AppendOrigin.REPLICATION) is None


def test_unknown_transactional_producer_is_accepted_at_any_sequence():
    """Kafka 3.x's ProducerAppendInfo: no current epoch → any sequence (KIP-360)."""
    psm = ProducerStateManager()
    assert psm.check(parse_header(txn_batch(9, 17))) is None


def test_check_all_sees_markers_of_the_same_append():
    psm = ProducerStateManager()
    apply(psm, txn_batch(1, 0))
    m = marker(1, True, coordinator_epoch=3)
    data = txn_batch(1, 1, transactional=False)
    headers = [parse_header(m), parse_header(data)]
    headers[1].position = 0  # positions key the markers; use distinct ones
    headers[0].position = 100
    assert psm.check_all(headers, COORD, {100: read_marker(m)}) is None


# -- aborted transaction index --------------------------------------------------------


def test_txn_index_format_round_trip_and_truncate(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    idx = TransactionIndex(path, 0)
    entries = [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 10), AbortedTxn(1, 11, 14, 15)]
    for e in entries:
        idx.append(e)
    raw = path.read_bytes()
    assert len(raw) == 3 * ENTRY_SIZE == 102
    assert raw[:ENTRY_SIZE] == struct.pack(">hqqqq", 0, 1, 0, 5, 6)
    assert TransactionIndex(path, 0).entries == entries
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(3, 12, 13, 14))  # markers only move forward
    idx.truncate_to(10)
    assert TransactionIndex(path, 0).entries == entries[:2]
    with open(path, "ab") as f:
        f.write(b"\x00\x01\x02")  # a torn last entry
    assert TransactionIndex(path, 0).entries == entries[:2]
    assert path.stat().st_size == 2 * ENTRY_SIZE
    idx.truncate_to(0)
    assert not path.exists() and TransactionIndex(path, 0).entries == []


def test_collect_aborted_transactions_stops_at_a_complete_entry(tmp_path):
    a = TransactionIndex(tmp_path / "a.txnindex", 0)
    b = TransactionIndex(tmp_path / "b.txnindex", 100)
    a.append(AbortedTxn(1, 5, 20, 21))
    a.append(AbortedTxn(2, 30, 40, 41))
    b.append(AbortedTxn(3, 90, 105, 106))
    b.append(AbortedTxn(4, 150, 160, 161))
    got = collect_aborted_transactions([a, b], 25, 100)
    assert [t.producer_id for t in got] == [2, 3]  # 1 ended before 25; 4 starts after 100
    got = collect_aborted_transactions([a, b], 0, 35)
    assert [t.producer_id for t in got] == [1, 2]  # entry 2's LSO 41 ≥ 35: done, b unread
    assert collect_aborted_transactions([a, b], 161, 200) == []


# -- snapshots ------------------------------------------------------------------------


def test_snapshot_round_trip_and_corruption():
    e1 = ProducerEntry(1, 4, coordinator_epoch=2, last_timestamp=77, current_txn_first_offset=10)
    psm = ProducerStateManager()
    apply(psm, txn_batch(1, 5, 3, epoch=4, offset=8))
    e1.batches.extend(psm.entry(1).batches)
    e2 = ProducerEntry(2, 0)  # a producer that only wrote a marker
    data = encode_snapshot([e1, e2])
    assert data[:2] == b"\x00\x01"
    back = decode_snapshot(data)
    assert [(e.producer_id, e.epoch, e.coordinator_epoch, e.last_timestamp,
             e.current_txn_first_offset, e.last_seq, e.last_data_offset) for e in back] == [
        (1, 4, 2, 77, 10, 7, 10), (2, 0, -1, -1, None, None, -1)]
    assert back[0].batches[-1].first_seq == 5 and back[0].batches[-1].first_offset == 8
    bad = bytearray(data)
    bad[-1] ^= 1
    with pytest.raises(ValueError):
        decode_snapshot(bytes(bad))


# -- the log --------------------------------------------------------------------------


def test_log_lso_index_and_read_committed_bounds(open_log, log_dir):
    log = open_log()
    log.append_as_leader(build_batch([b"plain"]), 0, 0)  # offset 0
    log.append_as_leader(txn_batch(1, 0, 2), 0, 0)  # 1-2, txn of 1
    log.append_as_leader(txn_batch(2, 0), 0, 0)  # 3, txn of 2
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 1
    log.append_as_leader(marker(1, False), 0, 0, COORD)  # 4: abort producer 1
    assert log.last_stable_offset == 1  # the marker is not replicated yet
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 3  # producer 2 still open
    log.append_as_leader(marker(2, True), 0, 0, COORD)  # 5
    log.update_high_watermark(3)
    assert log.last_stable_offset == 3
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 6 == log.high_watermark
    assert log.active_segment.txn_index.entries == [AbortedTxn(1, 1, 4, 3)]
    assert (log_dir / "00000000000000000000.txnindex").stat().st_size == ENTRY_SIZE
    assert log.collect_aborted_transactions(0, 6) == [AbortedTxn(1, 1, 4, 3)]
    assert log.collect_aborted_transactions(5, 6) == []
    with pytest.raises(KafkaError) as err:  # clients may not write control records
        log.append_as_leader(marker(1, True), 0, 0)
    assert err.value.code == ErrorCode.invalid_record
    with pytest.raises(KafkaError) as err:  # a producer id needs a sequence from clients
        log.append_as_leader(txn_batch(3, -1), 0, 0)
    assert err.value.code == ErrorCode.invalid_record


def test_follower_builds_the_same_state(open_log, tmp_path):
    from weir.storage.log import Log, LogConfig

    leader = open_log()
    for buf, origin in ((txn_batch(1, 0, 2), AppendOrigin.CLIENT),
                        (txn_batch(2, 0), AppendOrigin.CLIENT),
                        (marker(1, False), COORD)):
        leader.append_as_leader(buf, 0, 0, origin)
    follower = Log.open(tmp_path / "t-0", LogConfig.from_dict({}), clean_shutdown=True,
                        now_ms=0)
    data = leader.read(0, 1 << 20, max_offset=None).read_bytes()
    follower.append_as_follower(data)
    follower.update_high_watermark(follower.log_end_offset)
    leader.update_high_watermark(leader.log_end_offset)
    assert follower.last_stable_offset == leader.last_stable_offset == 2
    assert follower.active_segment.txn_index.entries == leader.active_segment.txn_index.entries
    follower.close()


def test_snapshot_at_roll_and_close_and_restart_without_full_scan(open_log, log_dir,
                                                                  monkeypatch):
    log = open_log(segment_bytes=300)
    log.append_as_leader(txn_batch(1, 0, 3), 0, 0)
    for i in range(6):
        log.append_as_leader(txn_batch(2, i, transactional=False), 0, 0)
    log.append_as_leader(marker(1, False, coordinator_epoch=6), 0, 0, COORD)
    log.append_as_leader(txn_batch(3, 0), 0, 0)
    assert len(log.segments) > 2
    rolled = list_snapshots(log_dir)
    assert rolled and set(rolled) <= {s.base_offset for s in log.segments[1:]}
    log.update_high_watermark(log.log_end_offset)
    expected_lso, leo = log.last_stable_offset, log.log_end_offset
    log.close()
    assert snapshot_path(log_dir, leo).exists()
    # A restart from the snapshot at the log end walks no segment's headers.
    import weir.storage.producer_state_loader as loader

    walked = []
    real = loader.checked_headers
    monkeypatch.setattr(loader, "checked_headers",
                        lambda segs: walked.extend(segs) or real(segs))
    reopened = open_log(clean=True)
    assert walked == []
    reopened.update_high_watermark(leo)
    assert reopened.last_stable_offset == expected_lso == leo - 1
    e1, e3 = reopened.producer_state.entry(1), reopened.producer_state.entry(3)
    assert e1.coordinator_epoch == 6 and e1.current_txn_first_offset is None
    assert e3.current_txn_first_offset == leo - 1
    assert reopened.producer_state.entry(2).last_seq == 5
    # the duplicate window survives: a retry of producer 2's last batch is a duplicate
    r = reopened.append_as_leader(txn_batch(2, 5, transactional=False), 0, 0)
    assert r.duplicate
    # Without the log-end snapshot, the replay starts at the newest roll snapshot.
    reopened.close()
    snapshot_path(log_dir, leo).unlink()
    again = open_log(clean=True)
    assert walked and walked[0].base_offset == max(rolled)
    assert again.producer_state.entry(1).coordinator_epoch == 6


def test_unclean_restart_rebuilds_index_of_recovered_segments(open_log, log_dir):
    log = open_log(segment_bytes=400)
    log.append_as_leader(txn_batch(1, 0, 2), 0, 0)
    while len(log.segments) < 2:
        log.append_as_leader(txn_batch(2, log.producer_state.entry(2).last_seq + 1
                                       if log.producer_state.entry(2) else 0,
                                       transactional=False), 0, 0)
    log.append_as_leader(marker(1, False), 0, 0, COORD)
    aborted = list(log.active_segment.txn_index.entries)
    assert aborted and aborted[0].producer_id == 1
    log.flush()
    active_base = log.active_segment.base_offset
    log.active_segment.txn_index.path.unlink()  # lost in the crash
    for seg in log.segments:
        seg.file.close()
    reopened = open_log(clean=False, recovery_point=active_base)
    assert reopened.active_segment.txn_index.entries == aborted
    assert reopened.producer_state.entry(1).current_txn_first_offset is None


def test_truncation_reloads_state_and_index(open_log):
    log = open_log()
    log.append_as_leader(txn_batch(1, 0), 0, 0)  # 0
    log.append_as_leader(marker(1, False), 0, 0, COORD)  # 1
    log.append_as_leader(txn_batch(1, 1), 0, 0)  # 2: a new transaction
    log.truncate_to(1)
    assert log.active_segment.txn_index.entries == []
    assert log.producer_state.entry(1).current_txn_first_offset == 0
    log.update_high_watermark(1)
    assert log.last_stable_offset == 0
    log.truncate_fully_and_start_at(50)
    assert log.producer_state.producers == {} and log.last_stable_offset == 50


# -- transaction verification (KIP-890) -------------------------------------------------


def test_verification_guard_is_needed_to_start_a_transaction(open_log):
    log = open_log()
    psm = log.producer_state
    guard = psm.maybe_start_verification(1, 0, 0)
    assert guard is not None and psm.maybe_start_verification(1, 0, 0) is guard
    with pytest.raises(KafkaError) as err:  # no guard, or another one: refused
        log.append_as_leader(txn_batch(1, 0), 0, 0, verification=(None,))
    assert err.value.code == ErrorCode.invalid_txn_state
    with pytest.raises(KafkaError):
        log.append_as_leader(txn_batch(1, 0), 0, 0, verification=(object(),))
    log.append_as_leader(txn_batch(1, 0), 0, 0, verification=(guard,))
    assert psm.verification_guard(1) is None  # used up by the transaction's first append
    assert psm.maybe_start_verification(1, 1, 0) is None  # open here: nothing to verify
    log.append_as_leader(txn_batch(1, 1), 0, 0, verification=(None,))
    # A marker written after the coordinator answered makes the old guard worthless.
    stale = psm.maybe_start_verification(2, 0, 0)
    log.append_as_leader(marker(2, False), 0, 0, COORD)
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(txn_batch(2, 0), 0, 0, verification=(stale,))
    assert err.value.code == ErrorCode.invalid_txn_state
    # Non-transactional data never needs verification.
    log.append_as_leader(txn_batch(3, 0, transactional=False), 0, 0, verification=(None,))


def test_pending_verification_blocks_higher_sequences():
    """Kafka's checkSequence with a VerificationStateEntry: nothing above the lowest
    sequence being verified, and a new epoch resets that sequence."""
    psm = ProducerStateManager()
    psm.maybe_start_verification(1, 3, 0)
    with pytest.raises(KafkaError) as err:
        psm.check_all([parse_header(txn_batch(1, 4))])
    assert err.value.code == ErrorCode.out_of_order_sequence_number
    assert psm.check_all([parse_header(txn_batch(1, 3))]) is None
    psm.maybe_start_verification(1, 1, 0)  # a lower one lowers the bar
    with pytest.raises(KafkaError):
        psm.check_all([parse_header(txn_batch(1, 3))])
    psm.maybe_start_verification(1, 0, 1)  # a new epoch resets it
    assert psm.check_all([parse_header(txn_batch(1, 0, epoch=1))]) is None


def test_idle_producers_expire_but_not_with_an_open_transaction():
    """producer.id.expiration.ms (Kafka's isProducerExpired): by the last batch's time."""
    psm = ProducerStateManager()
    apply(psm, build_batch([b"a"], producer_id=1, producer_epoch=0, base_sequence=0,
                           timestamp_ms=1000))
    apply(psm, build_batch([b"b"], producer_id=2, producer_epoch=0, base_sequence=0,
                           timestamp_ms=1000, transactional=True))
    apply(psm, build_batch([b"c"], producer_id=3, producer_epoch=0, base_sequence=0,
                           timestamp_ms=5000))
    psm.maybe_start_verification(4, 0, 0, now_ms=1000)
    assert psm.remove_expired(now_ms=5999, expiration_ms=5000) == 0
    assert psm.remove_expired(now_ms=6000, expiration_ms=5000) == 1
    assert set(psm.producers) == {2, 3}  # 2 has a transaction open
    assert psm.verification_guard(4) is None
    assert psm.first_unstable_offset() == 0
