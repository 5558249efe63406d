"""The log cleaner's swap with its file work on another thread (Kafka's
``UnifiedLog.replaceSegments``): reads, appends and flushes go on meanwhile, operations that
change segment files wait for it, and a crash before that work ran keeps the old segments."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.unit.storage.compaction_helpers import latest as _latest
from tests.unit.storage.compaction_helpers import view as _view
from tests.unit.storage.compaction_helpers import write_keyed as _write
from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.builder import build_batch
from weir.storage import swap
from weir.storage.cleaner import Cleaner
from weir.storage.cleaner_manager import LogCleanerManager
from weir.storage.log import Log, LogConfig
from weir.storage.offset_map import OffsetMap

TP = TopicPartition("topic", 0)
COMPACT = {"cleanup.policy": "compact", "segment.bytes": 400, "min.cleanable.dirty.ratio": 0.01}
PAIRS = [(b"k%d" % (i % 5), b"v%d" % i) for i in range(40)]


def _open(log_dir: Path, clean: bool = True) -> Log:
    return Log.open(log_dir, LogConfig.from_dict(COMPACT), clean_shutdown=clean, now_ms=0)


def _prepared(log: Log, log_dir: Path):
    """A finished cleaning, not swapped in yet: (groups, generation)."""
    mgr = LogCleanerManager([log_dir.parent])
    chosen = mgr.grab_filthiest({TP: (log, log_dir.parent)}, 0)
    job = mgr.make_job(chosen, 0)
    result = Cleaner(OffsetMap(1 << 20), 2**63).clean(job)
    mgr.done_cleaning(TP)
    assert result.groups
    return [([new], old) for new, old in result.groups], job.generation


def _names(log_dir: Path, suffix: str) -> list[str]:
    return sorted(p.name for p in log_dir.iterdir() if p.name.endswith(suffix))


class Gated:
    """An executor whose jobs start only once ``gate`` is set."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="gated-storage")

    def submit(self, fn):
        def run():
            assert self.gate.wait(30), "gate never opened"
            return fn()
        return self.pool.submit(run)


def test_reads_appends_and_flushes_go_on_while_the_files_are_swapped(log_dir, monkeypatch):
    log = _open(log_dir)
    _write(log, PAIRS)
    groups, generation = _prepared(log, log_dir)
    old_logs = [seg.log_path.name for _new, old in groups for seg in old]
    threads = []
    real = swap.replace_files

    def recording(directory, cleaned, old, crash_at=None):
        threads.append(threading.current_thread().name)
        return real(directory, cleaned, old, crash_at=crash_at)

    monkeypatch.setattr("weir.storage.log.replace_files", recording)
    executor = Gated()
    work = log.swap_in_cleaned(groups, generation, executor)
    assert work is not None and not work.done()
    # the segment list is swapped already; no file has been renamed or deleted yet
    assert [seg for seg in log.segments if seg.suffix] == [new for (new,), _old in groups]
    assert _names(log_dir, ".log.cleaned") and not _names(log_dir, ".swap")
    assert set(old_logs) <= set(_names(log_dir, ".log"))
    latest = _latest(PAIRS)
    assert _view(log) == latest  # served from the cleaned segments' open descriptors
    appended = log.append_as_leader(build_batch([b"new"], keys=[b"k9"], timestamp_ms=0), 0, 0)
    log.flush()  # the swapping segments are durable already: no wait for them
    assert not work.done()
    log.update_high_watermark(log.log_end_offset)
    assert _view(log) == [*latest, (appended.first_offset, b"k9", b"new")]

    # a truncation must wait for the file work: it returns only once the swap is complete
    threading.Timer(0.2, executor.gate.set).start()
    log.truncate_to(appended.first_offset)
    assert work.done() and work.exception() is None
    assert threads == ["gated-storage_0"] * len(groups)
    assert not _names(log_dir, ".cleaned") and not _names(log_dir, ".swap")
    assert not [s for s in log.segments if s.suffix]
    assert _view(log) == latest
    log.close()
    executor.pool.shutdown()
    reopened = _open(log_dir, clean=False)
    assert _view(reopened) == latest
    reopened.close()


def test_crash_before_the_file_work_ran_keeps_the_old_segments(log_dir):
    log = _open(log_dir)
    _write(log, PAIRS)
    before = _view(log)
    groups, generation = _prepared(log, log_dir)

    class Never:  # the process dies before the storage thread gets to the job
        def submit(self, fn):
            return Future()

    work = log.swap_in_cleaned(groups, generation, Never())
    assert work is not None and not work.done()
    for seg in log.segments:
        seg.release()
    reopened = _open(log_dir, clean=False)
    assert _view(reopened) == before  # the .cleaned files deleted, the old segments whole
    assert not _names(log_dir, ".cleaned")
    reopened.close()


def test_a_failed_file_work_takes_the_log_offline_at_the_next_change(log_dir, monkeypatch):
    log = _open(log_dir)
    _write(log, PAIRS)
    groups, generation = _prepared(log, log_dir)

    def failing(directory, cleaned, old, crash_at=None):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("weir.storage.log.replace_files", failing)
    with ThreadPoolExecutor(1) as pool:
        work = log.swap_in_cleaned(groups, generation, pool)
        assert isinstance(work.exception(10), OSError)
    with pytest.raises(KafkaError) as info:
        log.apply_retention(0)
    assert info.value.code == ErrorCode.kafka_storage_error
    assert log.offline_reason is not None


def test_a_log_changed_before_the_swap_deletes_the_cleaned_files(log_dir):
    log = _open(log_dir)
    _write(log, PAIRS)
    groups, generation = _prepared(log, log_dir)
    log.truncate_to(3)
    with ThreadPoolExecutor(1) as pool:
        assert log.swap_in_cleaned(groups, generation, pool) is None
    assert not _names(log_dir, ".cleaned")
    assert [o for o, _k, _v in _view(log)] == [0, 1, 2]
    log.close()
