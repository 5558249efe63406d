"""The log cleaner's core: offset map, cleaning a log, checkpoints, the swap and its crash
recovery at every step."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.storage.compaction_helpers import latest as _latest
from tests.unit.storage.compaction_helpers import view as _view
from tests.unit.storage.compaction_helpers import write_keyed as _write
from weir.common import TopicPartition
from weir.records.builder import build_batch
from weir.storage import swap
from weir.storage.cleaner import Cleaner
from weir.storage.cleaner_manager import CLEANER_OFFSET_CHECKPOINT, LogCleanerManager
from weir.storage.log import Log, LogConfig
from weir.storage.log_cleaner import clean_now
from weir.storage.offset_map import ENTRY_BYTES, OffsetMap

TP = TopicPartition("topic", 0)
COMPACT = {"cleanup.policy": "compact", "segment.bytes": 400, "min.cleanable.dirty.ratio": 0.01}


def _open(log_dir: Path, clean: bool = True, **extra) -> Log:
    cfg = LogConfig.from_dict({**COMPACT, **extra})
    return Log.open(log_dir, cfg, clean_shutdown=clean, now_ms=0)


def _clean(log: Log, log_dir: Path, mgr=None, now=0, buffer=1 << 20):
    mgr = mgr or LogCleanerManager([log_dir.parent])
    return clean_now(mgr, Cleaner(OffsetMap(buffer), 2**63), {TP: (log, log_dir.parent)}, now)


PAIRS = [(b"k%d" % (i % 5), b"v%d" % i) for i in range(40)]


def test_offset_map_bounds_and_latest():
    omap = OffsetMap(ENTRY_BYTES * 10, load_factor=0.5)
    assert (omap.slots, omap.max_entries) == (10, 5)
    omap.put(b"a", 1)
    omap.put(b"a", 7)
    omap.put(b"b", 3)
    assert (omap.get(b"a"), omap.get(b"b"), omap.get(b"zz"), omap.latest_offset) == (7, 3, -1, 7)
    assert len(omap) == 2 and not omap.is_full and omap.utilization == 0.2
    for k in (b"c", b"d", b"e"):
        omap.put(k, 9)
    assert omap.is_full
    omap.clear()
    assert len(omap) == 0 and omap.latest_offset == -1
    with pytest.raises(ValueError):
        OffsetMap(10)


def test_clean_keeps_latest_value_per_key_with_offsets(log_dir):
    log = _open(log_dir)
    _write(log, PAIRS)
    before = log.log_end_offset
    result = _clean(log, log_dir)
    assert result is not None and result.stats.records_kept < result.stats.records_read
    view = _view(log)
    assert [(o, k, v) for o, k, v in view] == _latest(PAIRS)
    assert log.log_end_offset == before and log.log_start_offset == 0
    checkpoint = (log_dir.parent / CLEANER_OFFSET_CHECKPOINT).read_text().split("\n")
    assert checkpoint[2] == f"topic 0 {before}"
    log.close()
    # reloaded: the cleaned segments are valid, nothing to clean again
    again = _open(log_dir, clean=False)
    assert _view(again) == _latest(PAIRS)
    assert _clean(again, log_dir) is None
    again.close()


def test_never_cleans_active_segment_or_above_high_watermark(log_dir):
    log = _open(log_dir)
    _write(log, PAIRS[:20])
    hw = log.log_end_offset
    for key, value in PAIRS[20:]:  # above the HW: must survive untouched
        log.append_as_leader(build_batch([value], keys=[key]), 0, 0)
    log.update_high_watermark(hw)
    _clean(log, log_dir)
    view = _view(log)
    assert [x for x in view if x[0] >= hw] == [(i, k, v) for i, (k, v) in enumerate(PAIRS)
                                                 if i >= hw]
    assert [x for x in view if x[0] < hw] == _latest(PAIRS[:20])
    log.close()


def test_tombstones_kept_until_delete_retention(log_dir):
    log = _open(log_dir, **{"delete.retention.ms": 1000})
    _write(log, [(b"a", b"1"), (b"b", b"1"), (b"a", None)] * 5)
    _clean(log, log_dir, now=10_000)
    assert [(k, v) for _o, k, v in _view(log)] == [(b"b", b"1"), (b"a", None)]
    _write(log, [(b"c", b"1")] * 3)  # more dirty data: another cleaning
    mgr = LogCleanerManager([log_dir.parent])
    _clean(log, log_dir, mgr, now=10_500)  # before the horizon: the tombstone stays
    assert (b"a", None) in [(k, v) for _o, k, v in _view(log)]
    _write(log, [(b"c", b"2")] * 3)
    _clean(log, log_dir, mgr, now=11_001)
    assert [(k, v) for _o, k, v in _view(log)] == [(b"b", b"1"), (b"c", b"2")]
    log.close()


def test_keyless_records_and_producer_last_batches(log_dir):
    log = _open(log_dir)
    # producer 7's last batch is superseded by a later non-idempotent write of its key
    log.append_as_leader(build_batch([b"p0"], keys=[b"x"], producer_id=7, producer_epoch=0,
                                     base_sequence=0), 0, 0)
    log.append_as_leader(build_batch([b"p1"], keys=[b"y"], producer_id=7, producer_epoch=0,
                                     base_sequence=1), 0, 0)
    _write(log, [(b"y", b"new"), (b"x", b"new")] * 3)
    _clean(log, log_dir)
    headers = [h for seg in log.segments for h in seg.headers_from(0)]
    kept = [h for h in headers if h.producer_id == 7]
    assert len(kept) == 1 and kept[0].records_count == 0 and kept[0].base_sequence == 1
    assert log.producer_state.entry(7).last_seq == 1
    log.close()
    reloaded = _open(log_dir, clean=False)
    assert reloaded.producer_state.entry(7).last_seq == 1
    # the producer goes on at sequence 2 without OUT_OF_ORDER_SEQUENCE
    reloaded.append_as_leader(build_batch([b"p2"], keys=[b"z"], producer_id=7,
                                          producer_epoch=0, base_sequence=2), 0, 0)
    reloaded.close()


def test_open_transaction_is_not_cleaned(log_dir):
    """Data of a transaction without its marker is past the last stable offset: uncleanable."""
    log = _open(log_dir)
    txn = build_batch([b"t"], keys=[b"a"], producer_id=9, producer_epoch=0, base_sequence=0,
                      transactional=True)
    log.append_as_leader(txn, 0, 0)
    _write(log, [(b"a", b"later")] * 4)
    _clean(log, log_dir)
    assert (b"a", b"t") in [(k, v) for _o, k, v in _view(log)]
    log.close()


def test_follower_accepts_gaps_from_a_compacted_leader(log_dir, tmp_path):
    log = _open(log_dir)
    _write(log, PAIRS)
    _clean(log, log_dir)
    follower = Log.open(tmp_path / "f" / "topic-0", LogConfig.from_dict(COMPACT),
                        clean_shutdown=True, now_ms=0)
    offset = 0
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20, max_offset=None).read_bytes()
        follower.append_as_follower(data)
        offset = follower.log_end_offset
    assert _view(follower) == _view(log) and follower.log_end_offset == log.log_end_offset
    follower.close()
    log.close()


def test_checkpoint_truncated_with_the_log(log_dir):
    log = _open(log_dir)
    _write(log, PAIRS)
    mgr = LogCleanerManager([log_dir.parent])
    _clean(log, log_dir, mgr)
    log.truncate_to(10)
    _write(log, PAIRS[:10])
    _clean(log, log_dir, mgr)
    assert mgr.checkpoints(log_dir.parent)[TP] == log.segments[-1].base_offset
    log.close()


def test_aborted_job_is_not_swapped(log_dir):
    log = _open(log_dir)
    _write(log, PAIRS)
    mgr = LogCleanerManager([log_dir.parent])
    chosen = mgr.grab_filthiest({TP: (log, log_dir.parent)}, 0)
    job = mgr.make_job(chosen, 0)
    result = Cleaner(OffsetMap(1 << 20), 2**63).clean(job)
    log.truncate_to(5)  # the log changes under the job
    for new, old in result.groups:
        assert not log.replace_segments([new], old, job.generation)
    assert not list(log_dir.glob("*.cleaned"))
    mgr.done_cleaning(TP)
    log.close()


STEPS = ["renamed-to-swap", "swap-durable", "old-deleted", "swap-renamed"]


class Crash(Exception):
    pass


@pytest.mark.parametrize("step", ["cleaned-written", *STEPS])
@pytest.mark.parametrize("nth", [1, 2])
def test_crash_at_every_swap_step_loses_nothing(log_dir, monkeypatch, step, nth):
    log = _open(log_dir)
    _write(log, PAIRS)
    seen = {"n": 0}
    real = swap.replace_files

    def crashing(directory, cleaned, old, crash_at=None):
        def hook(name):
            if name == step:
                seen["n"] += 1
                if seen["n"] == nth:
                    raise Crash(name)
        if step == "cleaned-written":
            raise Crash(step)
        return real(directory, cleaned, old, crash_at=hook)

    monkeypatch.setattr("weir.storage.log.replace_files", crashing)
    with pytest.raises(Crash):
        _clean(log, log_dir)
    for seg in log.segments:  # the process dies: descriptors go, nothing is flushed
        seg.release()
    monkeypatch.setattr("weir.storage.log.replace_files", real)
    reloaded = _open(log_dir, clean=False)
    view = _view(reloaded)
    latest = _latest(PAIRS)
    # every key's latest value is there, at its offset; offsets increase
    assert [x for x in view if (x[0], x[1], x[2]) in set(latest)] == latest
    assert [o for o, _k, _v in view] == sorted({o for o, _k, _v in view})
    assert not [p for p in log_dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    # and it can still be cleaned to the full compacted view
    reloaded.update_high_watermark(reloaded.log_end_offset)
    _clean(reloaded, log_dir)
    assert _view(reloaded) == latest
    reloaded.close()


def test_keyless_produce_to_compacted_log_is_refused(log_dir):
    from weir.protocol.errors import ErrorCode
    from weir.records.filter import RecordValidationError

    log = _open(log_dir)
    with pytest.raises(RecordValidationError) as err:
        log.append_as_leader(build_batch([b"a", b"b", b"c"], keys=[b"k", None, None]), 0, 0)
    assert err.value.code == ErrorCode.invalid_record
    message = "Compacted topic cannot accept message without key in topic partition topic-0"
    assert err.value.record_errors == [(1, message), (2, message)]
    assert "2 record errors" in err.value.message and log.log_end_offset == 0
    log.config = LogConfig.from_dict({"cleanup.policy": "delete"})
    log.append_as_leader(build_batch([b"a"], keys=[None]), 0, 0)  # fine without compaction
    log.close()


def test_compacted_log_has_no_time_or_size_retention(log_dir):
    log = _open(log_dir, **{"retention.ms": 10, "retention.bytes": 1})
    _write(log, PAIRS)
    assert log.apply_retention(now_ms=10**9) == 0
    log.config = LogConfig.from_dict({**COMPACT, "cleanup.policy": "compact,delete",
                                      "retention.ms": 10})
    assert log.apply_retention(now_ms=10**9) > 0
    log.close()


def test_aborted_transaction_data_dropped_committed_and_markers_kept(log_dir):
    from weir.records.control import build_marker
    from weir.storage.producer_state import AppendOrigin

    log = _open(log_dir)

    def txn(pid, value, seq):
        log.append_as_leader(build_batch([value], keys=[b"t%d" % pid], producer_id=pid,
                                         producer_epoch=0, base_sequence=seq,
                                         transactional=True), 0, 0)

    def marker(pid, committed):
        log.append_as_leader(build_marker(pid, 0, committed, 0, 0), 0, 0,
                             origin=AppendOrigin.COORDINATOR)

    txn(1, b"aborted-1", 0)
    txn(2, b"committed", 0)
    txn(1, b"aborted-2", 1)
    marker(1, False)
    marker(2, True)
    txn(1, b"aborted-3", 2)  # producer 1's last data batch: its header stays
    marker(1, False)
    _write(log, PAIRS)
    assert log.segments[0].txn_index.entries or any(s.txn_index.entries for s in log.segments)
    _clean(log, log_dir)
    values = [v for _o, _k, v in _view(log)]
    assert b"committed" in values
    assert not [v for v in values if v and v.startswith(b"aborted")]
    headers = [h for seg in log.segments for h in seg.headers_from(0)]
    assert sum(1 for h in headers if h.is_control) == 3  # markers kept
    last = [h for h in headers if h.producer_id == 1 and not h.is_control]
    assert len(last) == 1 and last[0].records_count == 0 and last[0].base_sequence == 2
    assert any(s.txn_index.entries for s in log.segments)  # aborted ranges still indexed
    log.close()


def test_worker_process_cleaning_is_swapped_in(log_dir):
    """The broker's path: the job stripped to plain values cleans in another process (spawn)
    and the .cleaned segments it wrote are opened and swapped in here."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from weir.storage.cleaner import clean_in_worker, open_result

    log = _open(log_dir)
    pairs = [(b"k%d" % (i % 4), b"v%d" % i) for i in range(40)]
    _write(log, pairs)
    mgr = LogCleanerManager([log_dir.parent])
    chosen = mgr.grab_filthiest({TP: (log, log_dir.parent)}, 0)
    job = mgr.make_job(chosen, 0)
    portable = job.portable()
    assert all(v.segment is None for v in portable.segments)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        files = pool.submit(clean_in_worker, portable, 1 << 20, 0.9, 2**63).result(60)
    assert files.groups and list(log_dir.glob("*.log.cleaned"))
    result = open_result(job, files)
    for new, old in result.groups:
        assert log.replace_segments([new], old, job.generation)
    mgr.done_cleaning(TP)
    view = _view(log)
    assert {k: v for _o, k, v in view} == dict(pairs)  # each key's latest value survives
    assert len(view) < len(pairs)
    log.close()


def test_abort_file_stops_a_worker_cleaning(log_dir, tmp_path):
    """An abort reaches a cleaning with no shared memory: the job's abort file."""
    from weir.storage.cleaner import CleaningAborted

    log = _open(log_dir)
    _write(log, PAIRS)
    mgr = LogCleanerManager([log_dir.parent])
    chosen = mgr.grab_filthiest({TP: (log, log_dir.parent)}, 0)
    job = mgr.make_job(chosen, 0)
    job.abort_path = str(tmp_path / "abort-1")
    portable = job.portable()
    mgr.abort_and_pause(TP)  # the broker side: job.abort() creates the file
    assert job.aborted and Path(job.abort_path).exists()
    assert not portable.aborted  # the worker's copy learns it from the file
    with pytest.raises(CleaningAborted):
        Cleaner(OffsetMap(1 << 20), 2**63).clean_files(portable)
    assert not list(log_dir.glob("*.cleaned"))
    mgr.done_cleaning(TP)
    log.close()


def _txn_log(log_dir: Path):
    """A log with an aborted transaction (producer 1), a committed one (producer 2) with one
    key overwritten later, and plain data after both."""
    from weir.records.control import build_marker
    from weir.storage.producer_state import AppendOrigin

    log = _open(log_dir, **{"delete.retention.ms": 100})

    def txn(pid, key, value, seq):
        log.append_as_leader(build_batch([value], keys=[key], producer_id=pid,
                                         producer_epoch=0, base_sequence=seq,
                                         transactional=True), 0, 0)

    def marker(pid, committed):
        log.append_as_leader(build_marker(pid, 0, committed, 0, 0), 0, 0,
                             origin=AppendOrigin.COORDINATOR)

    txn(1, b"t1", b"aborted-1", 0)
    txn(2, b"t2", b"committed-old", 0)
    txn(2, b"t3", b"committed-kept", 1)
    marker(1, False)
    marker(2, True)
    # both producers go on (idempotent, not transactional): the transactions' batches are
    # not their last (a producer's last batch keeps its header, Kafka's
    # isBatchLastRecordOfProducer, and a marker stays while a batch of its transaction does)
    log.append_as_leader(build_batch([b"p1-later"], keys=[b"t4"], producer_id=1,
                                     producer_epoch=0, base_sequence=1), 0, 0)
    log.append_as_leader(build_batch([b"p2-later"], keys=[b"t5"], producer_id=2,
                                     producer_epoch=0, base_sequence=2), 0, 0)
    _write(log, [(b"t2", b"plain-new")] + PAIRS)
    return log


def _markers(log: Log) -> list:
    return [h for seg in log.segments for h in seg.headers_from(0) if h.is_control]


def _more(log: Log, log_dir: Path, mgr, now: int):
    """New dirty data, then a cleaning at ``now``."""
    _write(log, PAIRS, now=now)
    return _clean(log, log_dir, mgr, now=now)


def test_committed_transactional_data_is_compacted(log_dir):
    log = _txn_log(log_dir)
    mgr = LogCleanerManager([log_dir.parent])
    _clean(log, log_dir, mgr)
    latest = {k: v for _o, k, v in _view(log)}
    assert latest[b"t2"] == b"plain-new" and latest[b"t3"] == b"committed-kept"
    values = [v for _o, _k, v in _view(log)]
    assert b"committed-old" not in values  # superseded like any record (Kafka)
    assert b"aborted-1" not in values and b"t1" not in latest
    # the transactions' data was read in this cleaning: both markers stay, the aborted one
    # still indexed
    assert len(_markers(log)) == 2
    assert [(e.producer_id) for s in log.segments for e in s.txn_index.entries] == [1]
    log.close()


def test_markers_get_a_delete_horizon_then_go(log_dir):
    from weir.records.filter import DELETE_HORIZON_BIT

    log = _txn_log(log_dir)
    mgr = LogCleanerManager([log_dir.parent])
    _clean(log, log_dir, mgr)
    assert len(_markers(log)) == 2  # round 1: data of both transactions seen
    # t3's committed record is still there: the COMMIT marker stays without a horizon
    _more(log, log_dir, mgr, now=1000)
    markers = _markers(log)
    commit, abort = sorted(markers, key=lambda h: h.producer_id, reverse=True)
    assert len(markers) == 2
    assert not commit.attributes & DELETE_HORIZON_BIT  # data of its transaction remains
    # the aborted transaction's data is gone: its marker has a horizon (KIP-534), no entry
    assert abort.attributes & DELETE_HORIZON_BIT and abort.base_timestamp == 1100
    assert not [e for s in log.segments for e in s.txn_index.entries]
    _more(log, log_dir, mgr, now=1050)  # before the horizon: kept
    assert [h.producer_id for h in _markers(log)] == [1, 2]
    _more(log, log_dir, mgr, now=1200)  # past it: the ABORT marker goes
    assert [h.producer_id for h in _markers(log)] == [2]
    # once t3 is overwritten the COMMIT marker follows the same way
    _write(log, [(b"t3", b"plain-t3")], now=2000)
    _more(log, log_dir, mgr, now=2000)
    _more(log, log_dir, mgr, now=2001)
    (commit,) = _markers(log)
    assert commit.attributes & DELETE_HORIZON_BIT and commit.base_timestamp == 2101
    _more(log, log_dir, mgr, now=2200)
    assert _markers(log) == []
    latest = {k: v for _o, k, v in _view(log)}
    assert latest[b"t2"] == b"plain-new" and latest[b"t3"] == b"plain-t3"
    log.close()


def test_marker_that_is_a_producers_last_entry_keeps_its_header(log_dir):
    """A producer whose last entry is its marker keeps it (its epoch fences zombies), as
    an empty batch once removable (Kafka's isBatchLastRecordOfProducer)."""
    from weir.records.control import build_marker
    from weir.storage.producer_state import AppendOrigin

    log = _open(log_dir, **{"delete.retention.ms": 100})
    log.append_as_leader(build_marker(7, 3, False, 0, 0), 0, 0,
                         origin=AppendOrigin.COORDINATOR)  # an abort with no data
    _write(log, PAIRS)
    mgr = LogCleanerManager([log_dir.parent])
    _clean(log, log_dir, mgr)
    _more(log, log_dir, mgr, now=1000)
    (marker,) = _markers(log)
    assert marker.producer_id == 7 and marker.producer_epoch == 3
    assert marker.records_count == 0  # past the horizon: the header alone
    log.close()
