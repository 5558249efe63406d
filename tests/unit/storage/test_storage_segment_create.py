"""A new segment truncates its file only when stale bytes are in it (ext4 auto_da_alloc).

ext4 marks a file truncated to size 0, even an empty one, so that the next close of any of
its descriptors writes back its dirty pages; a segment truncated at creation made the first
Fetch response sent from it (which opens and closes the file) write back everything
appended since, on the event loop.  See ``weir.storage.segment._consume_auto_da_alloc``.
"""

from __future__ import annotations

import os

from weir.records.batch import validate_produce
from weir.records.builder import build_batch
from weir.storage import segment as segment_module
from weir.storage.segment import LogSegment, segment_file_name

PAST_NS = 1_000_000_000 * 1_000_000_000  # 2001-09-09: older than any write made now


def _create(path):
    return LogSegment.create(path, 0, index_interval_bytes=4096, max_index_bytes=1 << 20,
                             now_ms=0)


def test_new_segment_over_a_missing_or_empty_file_is_not_truncated(tmp_path, monkeypatch):
    spent = []
    monkeypatch.setattr(segment_module, "_consume_auto_da_alloc", spent.append)
    log_file = tmp_path / segment_file_name(0, ".log")
    log_file.touch()
    os.utime(log_file, ns=(PAST_NS, PAST_NS))
    seg = _create(tmp_path)
    # A truncate, even to the size the file has, updates its mtime (Linux do_truncate).
    assert os.stat(log_file).st_mtime_ns == PAST_NS
    assert spent == []
    buf = bytearray(build_batch([b"v"], base_offset=0, timestamp_ms=1))
    seg.append(buf, validate_produce(bytes(buf), 1 << 20))
    assert seg.size == len(buf)
    seg.close()


def test_new_segment_over_stale_bytes_empties_them_and_spends_the_mark(tmp_path, monkeypatch):
    spent = []
    real = segment_module._consume_auto_da_alloc

    def spend(path):
        spent.append(path)
        real(path)

    monkeypatch.setattr(segment_module, "_consume_auto_da_alloc", spend)
    log_file = tmp_path / segment_file_name(0, ".log")
    log_file.write_bytes(b"stale" * 100)
    seg = _create(tmp_path)
    assert os.stat(log_file).st_size == 0
    assert seg.size == 0
    assert spent == [seg.log_path]
    seg.close()


def test_truncation_to_the_first_byte_spends_the_mark(tmp_path, monkeypatch):
    spent = []
    monkeypatch.setattr(segment_module, "_consume_auto_da_alloc", spent.append)
    seg = _create(tmp_path)
    for offset in range(3):
        buf = bytearray(build_batch([b"v"], base_offset=offset, timestamp_ms=1))
        seg.append(buf, validate_produce(bytes(buf), 1 << 20))
    seg.truncate_to(1)  # keeps the first batch: the file is not emptied
    assert spent == []
    seg.truncate_to(0)
    assert seg.size == 0
    assert spent == [seg.log_path]
    seg.close()
