"""KIP-516 topic ids on a broker: ``partition.metadata`` loaded with the log, a
LeaderAndIsr or a Fetch naming another id refused with INCONSISTENT_TOPIC_ID, a log
without an id given the controller's (Kafka's ReplicaManager.becomeLeaderOrFollower,
readFromLog, LogManager.getOrCreateLog)."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.builder import build_batch
from weir.replication.local_reads import FetchPartition
from weir.replication.partition import LeaderState
from weir.replication.replica_manager import PartitionStateUpdate, ReplicaManager
from weir.storage.checkpoints import PARTITION_METADATA_FILE, read_partition_metadata
from weir.storage.config import LogConfig
from weir.storage.log_manager import LogManager

TP = TopicPartition("t", 0)
OLD = uuid.UUID(int=1)
NEW = uuid.UUID(int=2)
OLD_S, NEW_S = "AAAAAAAAAAAAAAAAAAAAAQ", "AAAAAAAAAAAAAAAAAAAAAg"


def _update(epoch: int, topic_id: uuid.UUID | None, is_new: bool = False) -> PartitionStateUpdate:
    return PartitionStateUpdate(
        LeaderState(leader=1, leader_epoch=epoch, isr=[1], replicas=[1], partition_epoch=epoch,
                    controller_epoch=1), topic_id, is_new)


def _start(log_dir):
    lm = LogManager([log_dir], LogConfig.from_dict({}))
    lm.startup(now_ms=0)
    return lm, ReplicaManager(1, lm, lambda _t: LogConfig.from_dict({}), lambda _t: 1)


def _written(lm: LogManager, rm: ReplicaManager) -> None:
    asyncio.run(rm.close())
    lm.shutdown()  # drains the storage thread


@pytest.fixture
def old_topic_dir(tmp_path):
    """A log dir holding ``t-0`` of the topic whose id is OLD, with 3 records."""
    lm, rm = _start(tmp_path)
    assert rm.apply_leader_and_isr(1, {TP: _update(0, OLD, is_new=True)}, True) == {TP: 0}
    rm.partitions[TP].log.append_as_leader(build_batch([b"a", b"b", b"c"]), 0, 0)
    _written(lm, rm)
    assert read_partition_metadata(tmp_path / "t-0") == OLD_S
    return tmp_path


def test_the_topic_id_is_loaded_with_the_log(old_topic_dir):
    lm, rm = _start(old_topic_dir)
    assert lm.get_log(TP).topic_id == OLD_S
    _written(lm, rm)


def test_a_leader_and_isr_naming_another_topic_id_is_refused(old_topic_dir, caplog):
    lm, rm = _start(old_topic_dir)
    with caplog.at_level(logging.ERROR):
        results = rm.apply_leader_and_isr(1, {TP: _update(1, NEW)}, True)
    assert results == {TP: ErrorCode.inconsistent_topic_id}
    assert TP not in rm.partitions  # neither leader nor follower of the new topic
    assert lm.get_log(TP).log_end_offset == 3  # the old topic's records are kept
    assert any(OLD_S in r.getMessage() and NEW_S in r.getMessage() for r in caplog.records
               if r.levelno == logging.ERROR)
    _written(lm, rm)
    assert read_partition_metadata(old_topic_dir / "t-0") == OLD_S


def test_the_same_topic_id_is_applied(old_topic_dir):
    lm, rm = _start(old_topic_dir)
    assert rm.apply_leader_and_isr(1, {TP: _update(1, OLD)}, True) == {TP: ErrorCode.none}
    assert rm.partitions[TP].is_leader
    _written(lm, rm)


def test_a_request_without_a_topic_id_is_not_checked(old_topic_dir):
    lm, rm = _start(old_topic_dir)
    results = rm.apply_leader_and_isr(1, {TP: _update(1, uuid.UUID(int=0))}, True)
    assert results == {TP: ErrorCode.none}
    assert lm.get_log(TP).topic_id == OLD_S
    _written(lm, rm)


def test_a_log_without_a_topic_id_takes_the_controllers(old_topic_dir):
    (old_topic_dir / "t-0" / PARTITION_METADATA_FILE).unlink()
    lm, rm = _start(old_topic_dir)
    assert lm.get_log(TP).topic_id is None
    assert rm.apply_leader_and_isr(1, {TP: _update(1, NEW)}, True) == {TP: ErrorCode.none}
    assert lm.get_log(TP).topic_id == NEW_S
    _written(lm, rm)
    assert read_partition_metadata(old_topic_dir / "t-0") == NEW_S


def test_an_equal_epoch_assigns_a_missing_topic_id(old_topic_dir):
    """Kafka applies an equal-epoch LeaderAndIsr only to give a log its first topic id."""
    (old_topic_dir / "t-0" / PARTITION_METADATA_FILE).unlink()
    lm, rm = _start(old_topic_dir)
    assert rm.apply_leader_and_isr(1, {TP: _update(1, None)}, True) == {TP: ErrorCode.none}
    assert rm.apply_leader_and_isr(1, {TP: _update(1, NEW)}, True) == {TP: ErrorCode.none}
    assert lm.get_log(TP).topic_id == NEW_S
    # once it has one, an equal epoch is stale again
    assert rm.apply_leader_and_isr(1, {TP: _update(1, NEW)}, True) == {
        TP: ErrorCode.stale_controller_epoch}
    _written(lm, rm)
    assert read_partition_metadata(old_topic_dir / "t-0") == NEW_S


def test_a_malformed_partition_metadata_is_reported_and_rewritten(old_topic_dir, caplog):
    path = old_topic_dir / "t-0" / PARTITION_METADATA_FILE
    path.write_bytes(b"version: 0\ntopic_id: not-an-id!\n")
    with caplog.at_level(logging.WARNING):
        lm, rm = _start(old_topic_dir)
    assert lm.offline_dirs == {}
    assert lm.get_log(TP).topic_id is None
    assert any(str(path) in r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
    assert rm.apply_leader_and_isr(1, {TP: _update(1, OLD)}, True) == {TP: ErrorCode.none}
    assert lm.get_log(TP).log_end_offset == 3
    _written(lm, rm)
    assert read_partition_metadata(old_topic_dir / "t-0") == OLD_S


def test_get_or_create_log_checks_an_existing_log(old_topic_dir):
    lm, rm = _start(old_topic_dir)
    with pytest.raises(KafkaError) as err:
        lm.get_or_create_log(TP, topic_id=NEW_S)
    assert err.value.code == ErrorCode.inconsistent_topic_id
    assert str(old_topic_dir / "t-0") in err.value.message
    assert lm.get_or_create_log(TP, topic_id=OLD_S) is lm.get_log(TP)
    _written(lm, rm)


@pytest.mark.parametrize(("topic_id", "error"), [
    (OLD_S, ErrorCode.none), (NEW_S, ErrorCode.inconsistent_topic_id), (None, ErrorCode.none)])
@pytest.mark.parametrize("replica_id", [-1, 2])
def test_a_fetch_naming_another_topic_id_is_refused(old_topic_dir, topic_id, error, replica_id):
    lm, rm = _start(old_topic_dir)
    state = LeaderState(leader=1, leader_epoch=1, isr=[1, 2], replicas=[1, 2],
                        partition_epoch=1, controller_epoch=1)
    assert rm.apply_leader_and_isr(1, {TP: PartitionStateUpdate(state, OLD, False)}, True) == {
        TP: ErrorCode.none}
    p = rm.partitions[TP]
    p.log.update_high_watermark(3)

    async def fetch():
        return await rm.reads.fetch(replica_id, 0, 1, 1 << 20,
                              [FetchPartition(TP, 0, 1 << 20, topic_id=topic_id)])
    results = asyncio.run(fetch())
    assert results[TP].error == error
    assert (results[TP].size > 0) == (error == ErrorCode.none)
    _written(lm, rm)
