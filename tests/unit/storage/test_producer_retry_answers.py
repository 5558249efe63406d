"""What a leader answers an idempotent producer's retried batch, wherever the producer state
came from: the batch's original offsets while it is among the producer's last five
(Kafka's ``ProducerStateEntry.findDuplicateBatch``), OUT_OF_ORDER_SEQUENCE_NUMBER once it is
older (``ProducerAppendInfo.checkSequence``), never DUPLICATE_SEQUENCE_NUMBER, which
librdkafka takes for a success without an offset.  The producer state is the leader's own,
rebuilt by a follower that replicated the batches and then leads, across a leader-epoch
change, and after a restart (snapshot and replay)."""

from __future__ import annotations

import pytest

from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.builder import build_batch
from weir.storage.log import Log, LogConfig

PID = 4242


def batch(seq: int, n: int = 2, epoch: int = 0) -> bytes:
    return build_batch([b"r%d" % (seq + i) for i in range(n)], producer_id=PID,
                       producer_epoch=epoch, base_sequence=seq)


def open_log(path, *, clean: bool = True) -> Log:
    return Log.open(path, LogConfig.from_dict({}), clean_shutdown=clean, now_ms=0)


def write_six(log: Log, leader_epoch: int = 0) -> list[tuple[int, int]]:
    """Six batches of two records, each after a foreign record; their (first, last) offsets."""
    spans = []
    for seq in range(0, 12, 2):
        log.append_as_leader(build_batch([b"other"]), leader_epoch, 0)
        result = log.append_as_leader(batch(seq), leader_epoch, 0)
        spans.append((result.first_offset, result.last_offset))
    return spans


def assert_answers(log: Log, spans: list[tuple[int, int]], leader_epoch: int = 0) -> None:
    leo = log.log_end_offset
    for i, seq in enumerate(range(2, 12, 2), start=1):  # the last five batches
        result = log.append_as_leader(batch(seq), leader_epoch, 0)
        assert result.duplicate and (result.first_offset, result.last_offset) == spans[i]
    with pytest.raises(KafkaError) as err:  # the sixth-newest: out of the window
        log.append_as_leader(batch(0), leader_epoch, 0)
    assert err.value.code == ErrorCode.out_of_order_sequence_number
    assert log.log_end_offset == leo  # nothing written twice


def test_the_leader_answers_its_last_five_batches_with_their_offsets(tmp_path):
    log = open_log(tmp_path / "t-0")
    assert_answers(log, write_six(log))


def test_a_follower_that_becomes_leader_answers_the_same(tmp_path):
    leader, follower = open_log(tmp_path / "a" / "t-0"), open_log(tmp_path / "b" / "t-0")
    spans = write_six(leader)
    read = leader.read(0, 1 << 20, max_offset=None)
    follower.append_as_follower(read.read_bytes())
    assert_answers(follower, spans, leader_epoch=1)


def test_a_retry_across_a_leader_epoch_change_gets_its_offsets(tmp_path):
    log = open_log(tmp_path / "t-0")
    spans = write_six(log, leader_epoch=3)
    log.epoch_cache.assign(4, log.log_end_offset)  # re-elected (say, the ISR shrank)
    assert_answers(log, spans, leader_epoch=4)


def test_after_a_crash_the_window_is_replayed_from_the_log(tmp_path):
    log = open_log(tmp_path / "t-0")
    spans = write_six(log)
    log.flush()
    assert_answers(open_log(tmp_path / "t-0", clean=False), spans)


def test_after_a_clean_restart_the_snapshot_keeps_the_last_batch(tmp_path):
    """As Kafka's snapshot (one batch per producer): the last batch keeps its offsets, an
    earlier one is OUT_OF_ORDER_SEQUENCE_NUMBER, not a success without offsets."""
    log = open_log(tmp_path / "t-0")
    spans = write_six(log)
    log.close()
    reopened = open_log(tmp_path / "t-0")
    last = reopened.append_as_leader(batch(10), 0, 0)
    assert last.duplicate and (last.first_offset, last.last_offset) == spans[-1]
    with pytest.raises(KafkaError) as err:
        reopened.append_as_leader(batch(8), 0, 0)
    assert err.value.code == ErrorCode.out_of_order_sequence_number
