"""The log cleaner's asyncio shell: threads clean compacted logs of a LogManager, a log
deleted during a cleaning aborts it, stop() leaves no .cleaned file behind."""

from __future__ import annotations

import asyncio
import time

from weir.common import TopicPartition
from weir.records.builder import build_batch
from weir.storage.log import LogConfig
from weir.storage.log_cleaner import CleanerConfig, LogCleaner
from weir.storage.log_manager import LogManager

COMPACT = LogConfig.from_dict({"cleanup.policy": "compact", "segment.bytes": 600,
                               "min.cleanable.dirty.ratio": 0.01})


def _fill(lg, n=300):
    for i in range(n):
        lg.append_as_leader(build_batch([b"v%d" % i], keys=[b"k%d" % (i % 7)]), 0, 0)
    lg.roll()
    lg.update_high_watermark(lg.log_end_offset)


async def _wait(predicate, timeout_s=20.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def test_cleaner_threads_clean_and_stop(tmp_path):
    lm = LogManager([tmp_path], LogConfig())
    lm.startup(0)
    compacted = lm.get_or_create_log(TopicPartition("c", 0), COMPACT)
    plain = lm.get_or_create_log(TopicPartition("p", 0), LogConfig.from_dict(
        {"segment.bytes": 600}))
    _fill(compacted)
    _fill(plain)
    size_before = compacted.size_bytes

    async def run():
        cleaner = LogCleaner(lm, CleanerConfig(num_threads=2, backoff_ms=20))
        cleaner.start()
        await _wait(lambda: cleaner.metrics.cleanings >= 1)
        await cleaner.stop()
        return cleaner

    cleaner = asyncio.run(run())
    assert compacted.size_bytes < size_before / 3
    assert plain.size_bytes > size_before / 2  # cleanup.policy delete: never compacted
    assert cleaner.metrics.cleaner_recopy_percent > 0 and cleaner.metrics.dead_thread_count == 0
    text = (tmp_path / "cleaner-offset-checkpoint").read_text()
    assert f"c 0 {compacted.segments[-1].base_offset}" in text and "p 0" not in text
    lm.shutdown()


def test_log_deleted_during_cleaning_aborts_it(tmp_path):
    lm = LogManager([tmp_path], LogConfig())
    lm.startup(0)
    tp = TopicPartition("c", 0)
    lg = lm.get_or_create_log(tp, COMPACT)
    _fill(lg, 2000)

    async def run():
        # 20 kB/s: the cleaning is still running when the log is deleted
        cleaner = LogCleaner(lm, CleanerConfig(backoff_ms=20, max_io_bytes_per_second=20000))
        cleaner.start()
        await _wait(lambda: any(p.name.endswith(".cleaned") for p in lg.dir.iterdir()))
        lm.delete_log(tp)
        await asyncio.sleep(0.3)
        await cleaner.stop()
        return cleaner

    cleaner = asyncio.run(run())
    assert not lg.dir.exists() or not any(lg.dir.iterdir())
    assert cleaner.metrics.cleanings == 0 and not lm.offline_dirs
    assert cleaner.manager.state(tp) is None  # resumed after the deletion
    lm.shutdown()


def test_reconfigure_restarts_the_threads_with_new_values(tmp_path):
    lm = LogManager([tmp_path], LogConfig())
    lm.startup(0)
    lg = lm.get_or_create_log(TopicPartition("c", 0), COMPACT)

    async def run():
        cleaner = LogCleaner(lm, CleanerConfig(backoff_ms=60_000))
        cleaner.start()
        await asyncio.sleep(0.05)
        _fill(lg)  # nothing wakes the old threads for a minute
        await cleaner.reconfigure(CleanerConfig(num_threads=2, backoff_ms=20))
        assert len(cleaner._tasks) == 2 and cleaner.config.num_threads == 2
        await _wait(lambda: cleaner.metrics.cleanings >= 1)
        await cleaner.stop()

    asyncio.run(run())
    lm.shutdown()


def test_swap_file_work_runs_on_the_cleaners_storage_thread(tmp_path, monkeypatch):
    """The renames, unlinks and directory fsyncs of a swap never run on the event loop."""
    import threading

    from weir.storage import swap

    seen: list[str] = []
    real = swap.replace_files

    def recording(directory, cleaned, old, crash_at=None):
        seen.append(threading.current_thread().name)
        return real(directory, cleaned, old, crash_at=crash_at)

    monkeypatch.setattr("weir.storage.log.replace_files", recording)
    lm = LogManager([tmp_path], LogConfig())
    lm.startup(0)
    lg = lm.get_or_create_log(TopicPartition("c", 0), COMPACT)
    _fill(lg)

    async def run():
        cleaner = LogCleaner(lm, CleanerConfig(backoff_ms=20))
        cleaner.start()
        await _wait(lambda: cleaner.metrics.cleanings >= 1 and seen)
        await cleaner.stop()

    asyncio.run(run())
    assert seen and all(name.startswith("log-cleaner-swap") for name in seen)
    assert not [p for p in lg.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    assert f"c 0 {lg.segments[-1].base_offset}" in (
        tmp_path / "cleaner-offset-checkpoint").read_text()
    lm.shutdown()
