"""Corrupt files on disk: each gives a clear message naming the file and a recovery, never
an unhandled exception that would stop the broker at every start."""

from __future__ import annotations

import logging
import os
import struct

import pytest

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import parse_header
from weir.records.builder import build_batch
from weir.storage import checkpoints as cp
from weir.storage.integrity import read_checkpoint_or_reset
from weir.storage.log import LogConfig
from weir.storage.log_manager import LogManager

SEGMENT = "00000000000000000000"
TP = TopicPartition("topic", 0)


def produce(log, n=2, *, epoch=0, ts=0, **kw):
    return log.append_as_leader(build_batch([b"v" * 40] * n, timestamp_ms=ts, **kw), epoch, 0)


def fill(log, batches=10, **kw):
    """``batches`` batches of 2 records; returns the end position of each."""
    ends = []
    for i in range(batches):
        produce(log, ts=i, **kw)
        ends.append(log.active_segment.size)
    return ends


def warnings_naming(caplog, path) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and str(path) in r.getMessage()
    ]


# -- checkpoint files -------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [b"\xff\xfe\x00garbage", b"0\n1\ntopic 0 -5\n", b"0\n1\ntopic -1 5\n", b"0\n-1\n"],
    ids=["invalid-utf8", "negative-offset", "negative-partition", "negative-count"],
)
def test_malformed_offset_checkpoint_names_the_file(tmp_path, data):
    path = tmp_path / cp.RECOVERY_POINT_CHECKPOINT
    path.write_bytes(data)
    with pytest.raises(KafkaError) as err:
        cp.read_offset_checkpoint(path)
    assert err.value.code == ErrorCode.kafka_storage_error
    assert str(path) in str(err.value)


@pytest.mark.parametrize("data", [b"\xff\xfe", b"0\n1\n-3 0\n", b"0\n1\n2 -1\n"])
def test_malformed_epoch_checkpoint_names_the_file(tmp_path, data):
    path = tmp_path / cp.LEADER_EPOCH_CHECKPOINT
    path.write_bytes(data)
    with pytest.raises(KafkaError) as err:
        cp.read_epoch_checkpoint(path)
    assert err.value.code == ErrorCode.kafka_storage_error
    assert str(path) in str(err.value)


@pytest.mark.parametrize("data", [b"\xff\xfe\x00", b"version: 7\ntopic_id: x\n", b"nonsense",
                                  b"version: 0\ntopic_id: not-base64!\n",
                                  b"version: 0\ntopic_id: AAAA\n"])
def test_malformed_partition_metadata_names_the_file(tmp_path, data):
    (tmp_path / cp.PARTITION_METADATA_FILE).write_bytes(data)
    with pytest.raises(KafkaError) as err:
        cp.read_partition_metadata(tmp_path)
    assert err.value.code == ErrorCode.kafka_storage_error
    assert str(tmp_path / cp.PARTITION_METADATA_FILE) in str(err.value)


@pytest.fixture
def crashed_dir(tmp_path):
    """A log dir whose broker wrote its checkpoints and then crashed (no clean marker):
    one partition, offsets 0..19 in 10 batches, high watermark 12, log start 4."""
    log_dir = tmp_path / "logs"
    m = LogManager([log_dir], LogConfig())
    m.startup(now_ms=0)
    lg = m.get_or_create_log(TP, LogConfig())
    fill(lg)
    lg.update_high_watermark(12)
    lg.delete_records_before(4)
    lg.flush()
    m.checkpoint_recovery_points()
    m.checkpoint_log_start_offsets()
    m.checkpoint_high_watermarks()
    lg.close()
    return log_dir


def start(log_dir):
    m = LogManager([log_dir], LogConfig())
    m.startup(now_ms=0)
    return m


def test_corrupt_recovery_point_checkpoint_recovers_every_segment(crashed_dir, caplog):
    path = crashed_dir / cp.RECOVERY_POINT_CHECKPOINT
    path.write_bytes(b"0\n1\ntopic 0 not-a-number\n")
    seg = crashed_dir / "topic-0" / f"{SEGMENT}.log"
    data = bytearray(seg.read_bytes())
    data[-5] ^= 0xFF  # flushed, but only a full recovery can notice it
    seg.write_bytes(bytes(data))
    m = start(crashed_dir)
    assert m.offline_dirs == {}
    lg = m.get_log(TP)
    assert lg.log_end_offset == 18  # recovered from offset 0: the bad last batch is cut
    assert (lg.log_start_offset, lg.high_watermark) == (4, 12)
    assert warnings_naming(caplog, path)
    assert cp.read_offset_checkpoint(path) == {TP: 18}  # rewritten at once


def test_corrupt_log_start_checkpoint_falls_back_to_first_segment(crashed_dir, caplog):
    path = crashed_dir / cp.LOG_START_OFFSET_CHECKPOINT
    path.write_bytes(b"\x00\x01binary junk")
    m = start(crashed_dir)
    assert m.offline_dirs == {}
    lg = m.get_log(TP)
    assert (lg.log_start_offset, lg.log_end_offset, lg.high_watermark) == (0, 20, 12)
    assert warnings_naming(caplog, path)
    assert cp.read_offset_checkpoint(path) == {TP: 0}


def test_corrupt_high_watermark_checkpoint_is_treated_as_unknown(crashed_dir, caplog):
    path = crashed_dir / cp.REPLICATION_OFFSET_CHECKPOINT
    path.write_bytes(b"0\n5\ntopic 0 12\n")  # truncated: says 5 entries, has 1
    m = start(crashed_dir)
    assert m.offline_dirs == {}
    lg = m.get_log(TP)
    assert (lg.log_start_offset, lg.high_watermark, lg.log_end_offset) == (4, 4, 20)
    assert warnings_naming(caplog, path)
    assert cp.read_offset_checkpoint(path) == {TP: 4}  # rewritten at once
    path.write_bytes(b"junk")  # read again (the next start): unknown, logged, not fatal
    assert read_checkpoint_or_reset(path, "no high watermark is known from it") == ({}, True)
    assert m.offline_dirs == {}


def test_clean_shutdown_marker_content_is_ignored(crashed_dir):
    (crashed_dir / cp.CLEAN_SHUTDOWN_FILE).write_bytes(b"\xff{not json")
    m = start(crashed_dir)
    assert m.offline_dirs == {}
    assert m.get_log(TP).log_end_offset == 20
    assert not (crashed_dir / cp.CLEAN_SHUTDOWN_FILE).exists()


@pytest.mark.parametrize(
    "data",
    [b"garbage\n", b"0\n3\n1 0\n", b"0\n2\n5 0\n3 10\n"],
    ids=["garbage", "truncated", "non-monotonic"],
)
def test_corrupt_leader_epoch_checkpoint_is_rebuilt_from_batches(open_log, log_dir, data, caplog):
    log = open_log()
    fill(log, batches=2, epoch=1)
    fill(log, batches=3, epoch=3)
    fill(log, batches=1, epoch=5)
    assert log.epoch_cache.entries == [(1, 0), (3, 4), (5, 10)]
    log.close()
    path = log_dir / cp.LEADER_EPOCH_CHECKPOINT
    path.write_bytes(data)
    log = open_log(clean=True)
    assert log.epoch_cache.entries == [(1, 0), (3, 4), (5, 10)]
    assert cp.read_epoch_checkpoint(path) == [(1, 0), (3, 4), (5, 10)]
    assert warnings_naming(caplog, path)
    assert log.epoch_cache.end_offset_for(3, log.log_end_offset) == (3, 10)


def test_producer_snapshot_files_are_not_trusted(open_log, log_dir):
    """Weir keeps no producer-state snapshots (Kafka's ``<offset>.snapshot``): a stray or
    corrupt one is ignored and the state is rebuilt from the batches."""
    log = open_log()
    produce(log, producer_id=7, producer_epoch=0, base_sequence=0)
    log.close()
    (log_dir / f"{SEGMENT}.snapshot").write_bytes(b"\x00\x01corrupt snapshot")
    log = open_log(clean=False)
    assert log.producer_state.entry(7).last_seq == 1
    dup = produce(log, producer_id=7, producer_epoch=0, base_sequence=0)
    assert dup.duplicate and dup.first_offset == 0


# -- indexes ------------------------------------------------------------------------------


def test_corrupt_index_is_rebuilt_with_a_warning(open_log, log_dir, caplog):
    log = open_log(index_interval_bytes=100)
    fill(log)
    entries = log.active_segment.index.entries()
    log.close()
    index = log_dir / f"{SEGMENT}.index"
    index.write_bytes(index.read_bytes()[:-3])  # truncated mid-entry
    log = open_log(clean=True, index_interval_bytes=100)
    assert log.active_segment.index.entries() == entries
    assert warnings_naming(caplog, index)


def _unparseable_position(data: bytes) -> int:
    for position in range(1, 60):
        try:
            parse_header(data, position)
        except KafkaError:
            return position
    raise AssertionError("every position parses")


def test_index_entry_pointing_inside_a_batch_is_rebuilt(open_log, log_dir, caplog):
    log = open_log()
    fill(log)
    log.close()
    data = (log_dir / f"{SEGMENT}.log").read_bytes()
    index = log_dir / f"{SEGMENT}.index"
    index.write_bytes(struct.pack(">II", 0, _unparseable_position(data)))
    log = open_log(clean=True)
    assert log.log_end_offset == 20
    assert log.read(5, 10**6, max_offset=None).first_offset == 4
    assert warnings_naming(caplog, index)


def test_index_entry_with_the_wrong_offset_is_rebuilt(open_log, log_dir, caplog):
    log = open_log()
    ends = fill(log)
    log.close()
    index = log_dir / f"{SEGMENT}.index"
    index.write_bytes(struct.pack(">II", 1, ends[2]))  # the batch at ends[2] starts at 6
    log = open_log(clean=True)
    assert log.active_segment.index.entries() == []
    assert log.read(1, 10**6, max_offset=None).first_offset == 0
    assert warnings_naming(caplog, index)


# -- segments -----------------------------------------------------------------------------


def _corrupt(path, position, data):
    raw = bytearray(path.read_bytes())
    raw[position : position + len(data)] = data
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize(
    "kind", ["garbage", "huge-length", "negative-length", "zero-length", "bad-crc"]
)
def test_corrupt_batch_in_the_middle_truncates_there_on_recovery(open_log, log_dir, kind, caplog):
    log = open_log()
    ends = fill(log)
    log.close()
    path = log_dir / f"{SEGMENT}.log"
    bad = ends[3]  # batch 4: offsets 8-9
    if kind == "garbage":
        _corrupt(path, bad, os.urandom(61))
    elif kind == "huge-length":
        _corrupt(path, bad + 8, struct.pack(">i", 2**31 - 1))
    elif kind == "negative-length":
        _corrupt(path, bad + 8, struct.pack(">i", -40))
    elif kind == "zero-length":
        _corrupt(path, bad + 8, struct.pack(">i", 0))
    else:
        _corrupt(path, bad + 65, b"\x00\x00\x00")
    log = open_log(clean=False)
    assert log.log_end_offset == 8
    assert path.stat().st_size == bad
    assert log.read(0, 10**6, max_offset=None).last_offset == 7
    assert produce(log).first_offset == 8
    assert warnings_naming(caplog, path)


def test_garbage_after_the_last_batch_is_cut(open_log, log_dir):
    log = open_log()
    ends = fill(log)
    log.close()
    path = log_dir / f"{SEGMENT}.log"
    with open(path, "ab") as f:
        f.write(b"\x00" * 7 + os.urandom(200))
    log = open_log(clean=False)
    assert log.log_end_offset == 20
    assert path.stat().st_size == ends[-1]


@pytest.mark.parametrize(
    ("kind", "batch"),
    [
        ("unparseable", 2),
        ("bad-magic", 2),
        ("huge-length", 2),
        ("unparseable", 0),
        ("offsets-backwards", 2),
    ],
)
def test_corrupt_batch_in_a_trusted_segment_is_recovered_not_fatal(
    open_log, log_dir, kind, batch, caplog
):
    """After a clean shutdown (or below the recovery point) segments are trusted, as in
    Kafka; a header that turns out broken when the producer state is rebuilt by a replay
    (here: no producer snapshot, as for data written before snapshots existed) makes that
    segment go through recovery instead of failing the log's load."""
    log = open_log(index_interval_bytes=300)
    ends = fill(log)
    assert log.active_segment.index.entries()  # the damage sits before the last entry
    log.close()
    for snapshot in log_dir.glob("*.snapshot"):
        snapshot.unlink()
    path = log_dir / f"{SEGMENT}.log"
    bad = ends[batch - 1] if batch else 0  # offsets 2 * batch, 2 * batch + 1
    if kind == "unparseable":
        _corrupt(path, bad + 8, struct.pack(">i", 3))
    elif kind == "bad-magic":
        _corrupt(path, bad + 16, b"\x07")
    elif kind == "offsets-backwards":
        _corrupt(path, bad, struct.pack(">q", 1))
    else:
        _corrupt(path, bad + 8, struct.pack(">i", 2**31 - 1))
    log = open_log(clean=True, index_interval_bytes=300)
    assert log.log_end_offset == 2 * batch
    assert path.stat().st_size == bad
    assert produce(log).first_offset == 2 * batch
    assert warnings_naming(caplog, path)


def test_corrupt_trusted_segment_drops_the_later_ones(open_log, log_dir):
    log = open_log(segment_bytes=400)
    fill(log, batches=12)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    log.close()
    path = log_dir / f"{bases[1]:020d}.log"
    _corrupt(path, 8, struct.pack(">i", 3))  # the segment's first batch
    log = open_log(clean=True, segment_bytes=400)
    assert [s.base_offset for s in log.segments] == bases[:2]
    assert log.log_end_offset == bases[1]
    assert sorted(p.name for p in log_dir.glob("*.log")) == [f"{b:020d}.log" for b in bases[:2]]


def test_time_index_claiming_a_later_offset_than_the_log_is_rebuilt(open_log, log_dir, caplog):
    """A time-index entry (T, O) says nothing after O is older than T: a log whose newest
    timestamp sits below O contradicts it (and would fail the next time-index append)."""
    log = open_log()
    for ts in [*range(9), 0]:
        produce(log, ts=ts)  # offsets 2*i, 2*i+1; the newest timestamp 8 is at offset 16
    log.close()
    timeindex = log_dir / f"{SEGMENT}.timeindex"
    timeindex.write_bytes(struct.pack(">qI", 3, 18))
    log = open_log(clean=True)
    assert log.active_segment.max_timestamp == 8
    assert log.active_segment.offset_of_max_timestamp == 16
    log.roll()  # appends the final time-index entry of the old segment
    assert produce(log).first_offset == 20
    assert log.offset_for_timestamp(5) == (10, 5)
    assert warnings_naming(caplog, timeindex)
