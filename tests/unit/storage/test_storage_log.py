"""Log: appends, reads, rolls, retention, truncation, timestamps."""

from __future__ import annotations

import pytest

from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import iter_headers, validate_produce
from weir.records.builder import build_batch
from weir.storage.log import LogConfig


def produce(log, n=1, *, ts=0, now=0, epoch=0, size=10, **kw):
    return log.append_as_leader(build_batch([b"v" * size] * n, timestamp_ms=ts, **kw), epoch, now)


def test_config_defaults_and_overrides():
    cfg = LogConfig.from_dict({})
    assert cfg.segment_bytes == 1073741824 and cfg.retention_ms == 604800000
    assert cfg.flush_messages == 2**63 - 1 and cfg.max_message_bytes == 1048588
    cfg = LogConfig.from_dict(
        {"retention.ms": -1, "message.timestamp.type": "LogAppendTime", "cleanup.policy": "delete"}
    )
    assert cfg.retention_ms == -1 and cfg.log_append_time
    assert cfg.to_dict()["retention.ms"] == -1
    with pytest.raises(KafkaError):
        LogConfig.from_dict({"message.timestamp.type": "Whenever"})


def test_append_assigns_offsets_and_epochs(open_log, log_dir):
    log = open_log()
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    r1 = produce(log, 3, epoch=1)
    r2 = produce(log, 2, epoch=1)
    r3 = produce(log, 1, epoch=4)
    assert (r1.first_offset, r1.last_offset, r2.first_offset, r3.last_offset) == (0, 2, 3, 5)
    assert r1.num_messages == 3 and r1.log_append_time_ms == -1 and not r1.duplicate
    assert log.log_end_offset == 6
    assert log.epoch_cache.entries == [(1, 0), (4, 5)]
    assert (log_dir / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n4 5\n"
    assert log.topic_partition == ("topic", 0)


def test_log_append_time(open_log):
    log = open_log(message_timestamp_type="LogAppendTime")
    r = produce(log, 2, ts=5, now=777)
    assert r.log_append_time_ms == 777
    data = log.read(0, 10**6, max_offset=None).read_bytes()
    (h,) = validate_produce(data, 10**6)
    assert h.max_timestamp == 777 and h.timestamp_type == 1


def test_validation_errors_append_nothing(open_log):
    log = open_log(max_message_bytes=200)
    with pytest.raises(KafkaError) as err:
        produce(log, 1, size=500)
    assert err.value.code == ErrorCode.message_too_large
    assert log.log_end_offset == 0


def test_read_respects_max_offset_and_max_bytes(open_log):
    log = open_log()
    sizes = [produce(log, 2).valid_bytes for _ in range(5)]  # offsets 0..9
    res = log.read(0, 10**6, max_offset=None)
    assert (res.first_offset, res.last_offset, res.size) == (0, 9, sum(sizes))
    assert [h.base_offset for h in iter_headers(res.read_bytes())] == [0, 2, 4, 6, 8]
    res = log.read(3, 10**6, max_offset=6)  # high watermark 6: batches [2,3], [4,5]
    assert (res.first_offset, res.last_offset) == (2, 5)
    res = log.read(0, sizes[0] + sizes[1] + 1, max_offset=None)
    assert res.last_offset == 3
    res = log.read(0, 1, max_offset=None)  # min_one_batch
    assert res.size == sizes[0]
    assert log.read(0, 1, max_offset=None, min_one_batch=False).size == 0
    assert log.read(10, 100, max_offset=None).size == 0  # at LEO: empty
    assert log.read(4, 100, max_offset=4).size == 0
    assert res.fd >= 0 and res.file_path.name == "00000000000000000000.log"
    for bad in (11, -1):
        with pytest.raises(KafkaError) as err:
            log.read(bad, 100, max_offset=None)
        assert err.value.code == ErrorCode.offset_out_of_range


def test_roll_by_bytes_and_read_across_segments(open_log, log_dir):
    log = open_log(segment_bytes=300)
    for _ in range(10):
        produce(log, 1, size=100)
    assert len(log.segments) > 3
    assert [s.base_offset for s in log.segments] == sorted(s.base_offset for s in log.segments)
    assert all(s.size <= 300 for s in log.segments)
    for offset in range(10):
        res = log.read(offset, 10**6, max_offset=None)
        assert res.first_offset <= offset <= res.last_offset
    names = sorted(p.name for p in log_dir.glob("*.log"))
    assert names[1] == f"{log.segments[1].base_offset:020d}.log"
    assert (log_dir / f"{log.segments[1].base_offset:020d}.index").exists()


def test_roll_by_time(open_log):
    log = open_log(segment_ms=1000)
    produce(log, now=0)
    produce(log, now=1000)
    assert len(log.segments) == 1
    produce(log, now=1001)
    assert [s.base_offset for s in log.segments] == [0, 2]
    produce(log, now=1500)
    assert len(log.segments) == 2


def test_retention_by_time_moves_log_start(open_log):
    log = open_log(segment_bytes=200, retention_ms=1000)
    for i in range(6):
        produce(log, 1, ts=i * 1000, size=100)  # one batch per segment
    assert len(log.segments) == 6
    log.update_high_watermark(6)
    assert log.apply_retention(now_ms=3500) == 3  # max ts 0, 1000, 2000 are > 1000 ms old
    assert log.log_start_offset == 3 and log.segments[0].base_offset == 3
    with pytest.raises(KafkaError):
        log.read(2, 100, max_offset=None)
    assert log.apply_retention(now_ms=10**9) == 2  # never the active segment
    assert log.log_start_offset == 5


def test_retention_never_beyond_high_watermark(open_log):
    log = open_log(segment_bytes=200, retention_ms=0)
    for i in range(4):
        produce(log, 1, ts=i, size=100)
    log.update_high_watermark(1)
    assert log.apply_retention(now_ms=10**6) == 1
    assert log.log_start_offset == 1 and log.high_watermark == 1


def test_retention_by_bytes(open_log):
    log = open_log(segment_bytes=200, retention_bytes=350, retention_ms=-1)
    for i in range(5):
        produce(log, 1, ts=i, size=100)
    seg_size = log.segments[0].size
    log.update_high_watermark(log.log_end_offset)
    deleted = log.apply_retention(now_ms=10**12)
    # Kafka deletes whole segments only while the log stays at or above retention.bytes
    assert deleted == 2 and log.log_start_offset == 2
    assert log.size_bytes - seg_size < 350 <= log.size_bytes


def test_high_watermark_clamped(open_log):
    log = open_log()
    produce(log, 3)
    assert log.update_high_watermark(10) == 3
    assert log.update_high_watermark(-5) == 0


def test_offset_for_timestamp(open_log):
    log = open_log(segment_bytes=400, index_interval_bytes=0)
    for i in range(12):
        produce(log, 2, ts=100 * i, size=50)
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(0) == (0, 0)
    assert log.offset_for_timestamp(450) == (10, 500)
    assert log.offset_for_timestamp(500) == (10, 500)
    assert log.offset_for_timestamp(1100) == (22, 1100)
    assert log.offset_for_timestamp(1101) is None


def test_duplicate_produce_returns_original_offsets(open_log):
    log = open_log()
    produce(log, 1)
    first = produce(log, 2, producer_id=9, producer_epoch=0, base_sequence=0)
    dup = produce(log, 2, producer_id=9, producer_epoch=0, base_sequence=0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (1, 2) == (
        first.first_offset,
        first.last_offset,
    )
    assert log.log_end_offset == 3
    with pytest.raises(KafkaError) as err:
        produce(log, 1, producer_id=9, producer_epoch=0, base_sequence=5)
    assert err.value.code == ErrorCode.out_of_order_sequence_number


def test_truncate_to(open_log):
    log = open_log(segment_bytes=300)
    for i in range(10):
        produce(log, 1, epoch=i // 3, size=100, producer_id=1, producer_epoch=0, base_sequence=i)
    log.update_high_watermark(9)
    assert log.truncate_to(5)
    assert log.log_end_offset == 5 and log.high_watermark == 5
    assert log.epoch_cache.entries == [(0, 0), (1, 3)]
    assert all(s.base_offset <= 5 for s in log.segments)
    assert log.producer_state.entry(1).last_seq == 4
    assert not log.truncate_to(7)
    r = produce(log, 1, epoch=5, producer_id=1, producer_epoch=0, base_sequence=5)
    assert r.first_offset == 5
    assert log.read(5, 1000, max_offset=None).first_offset == 5


def test_truncate_fully_and_start_at(open_log):
    log = open_log()
    produce(log, 5)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (100, 100, 100)
    assert produce(log, 1).first_offset == 100
    assert [s.base_offset for s in log.segments] == [100]


def test_follower_append(open_log):
    log = open_log()
    batch = bytearray(build_batch([b"a", b"b"], base_offset=0, partition_leader_epoch=3))
    r = log.append_as_follower(bytes(batch))
    assert (r.first_offset, r.last_offset) == (0, 1)
    assert log.epoch_cache.entries == [(3, 0)]
    with pytest.raises(KafkaError) as err:  # below the log end
        log.append_as_follower(build_batch([b"c"], base_offset=1))
    assert err.value.code == ErrorCode.unknown_server_error
    log.append_as_follower(build_batch([b"c"], base_offset=2, partition_leader_epoch=5))
    assert log.epoch_cache.entries == [(3, 0), (5, 2)]
    # a gap is legal (a compacted leader's log), as Kafka's follower append
    r = log.append_as_follower(build_batch([b"d"], base_offset=7, partition_leader_epoch=5))
    assert (r.first_offset, log.log_end_offset) == (7, 8)
    batch[-1] ^= 1
    with pytest.raises(KafkaError) as err:
        log.append_as_follower(bytes(batch))
    assert err.value.code == ErrorCode.corrupt_message


def test_delete_records_before(open_log):
    log = open_log(segment_bytes=200)
    for _ in range(5):
        produce(log, 1, size=100)
    with pytest.raises(KafkaError):
        log.delete_records_before(3)  # above the high watermark (0)
    log.update_high_watermark(5)
    assert log.delete_records_before(3) == 3
    assert log.log_start_offset == 3 and log.segments[0].base_offset <= 3
    assert log.read(3, 100, max_offset=None).first_offset == 3


def test_flush_moves_recovery_point(open_log):
    log = open_log(flush_messages=3)
    produce(log, 2)
    assert log.recovery_point == 0
    produce(log, 1)
    assert log.recovery_point == 3
    log.flush(up_to=2)
    assert log.recovery_point == 3


def test_flush_by_time(open_log):
    log = open_log(flush_ms=100)
    produce(log, 1, now=10)
    assert log.recovery_point == 0
    assert not log.maybe_flush(50)
    assert log.maybe_flush(100)
    assert log.recovery_point == 1


def test_delete(open_log, log_dir):
    log = open_log()
    produce(log)
    log.delete()
    assert not log_dir.exists()
