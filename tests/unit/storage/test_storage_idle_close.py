"""Closing a log fsyncs only what was written since the last fsync: a broker with
thousands of idle replicas does not fsync every segment at a clean shutdown."""

from __future__ import annotations

import os

from weir.records.builder import build_batch
from weir.storage import segment as segment_module


def _count_fsyncs(monkeypatch):
    calls = []
    real = os.fsync

    def counting(fd):
        calls.append(fd)
        real(fd)
    monkeypatch.setattr(segment_module.os, "fsync", counting)
    return calls


def test_idle_log_closes_without_fsync(open_log, monkeypatch):
    log = open_log()
    log.append_as_leader(build_batch([b"v"] * 3, timestamp_ms=0), 0, 0)
    log.close()
    log = open_log()  # reopened after a clean close: nothing unsynced
    calls = _count_fsyncs(monkeypatch)
    fd = log.active_segment.file.fileno()
    log.close()
    assert fd not in calls


def test_unflushed_appends_are_synced_at_close(open_log, monkeypatch):
    log = open_log()
    calls = _count_fsyncs(monkeypatch)
    log.append_as_leader(build_batch([b"v"] * 3, timestamp_ms=0), 0, 0)
    fd = log.active_segment.file.fileno()
    log.close()
    assert calls.count(fd) == 1


def test_truncation_is_synced_at_close(open_log, monkeypatch):
    log = open_log()
    for _ in range(3):
        log.append_as_leader(build_batch([b"v"], timestamp_ms=0), 0, 0)
    log.flush()
    log.truncate_to(1)
    calls = _count_fsyncs(monkeypatch)
    fd = log.active_segment.file.fileno()
    log.close()
    assert calls.count(fd) == 1


def test_crash_recovery_fsyncs_only_segments_with_data(open_log, log_dir, monkeypatch):
    """Recovery after a crash costs what was unflushed, not one fsync per replica."""
    log = open_log()
    log.close()
    calls = _count_fsyncs(monkeypatch)
    idle = open_log(clean=False)  # empty active segment: recovered, nothing to sync
    assert calls == []
    idle.append_as_leader(build_batch([b"v"] * 2, timestamp_ms=0), 0, 0)
    for seg in idle.segments:  # crash: nothing flushed or closed
        seg.release()
    calls.clear()
    open_log(clean=False)  # two records past the recovery point: synced once
    assert len(calls) == 1
