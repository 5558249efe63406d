"""Broker answers turned into controller events (ControllerChannelManager's response_event)."""

from __future__ import annotations

import uuid

from weir.common import TopicPartition
from weir.controller.channel import response_event
from weir.controller.events import LeaderAndIsrResult, StopReplicaResult
from weir.protocol import codec
from weir.protocol.errors import ErrorCode
from weir.protocol.interbroker import (
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)

KNOWN, UNKNOWN = uuid.UUID(int=1), uuid.UUID(int=2)


def _leader_and_isr() -> LeaderAndIsrRequest:
    return codec.build(LeaderAndIsrRequest, controller_id=1, controller_epoch=1,
                       broker_epoch=5, topic_states=[
                           {"topic_name": "a", "topic_id": KNOWN, "partition_states": [
                               {"partition_index": 0}, {"partition_index": 1}]}])


def _stop_replica() -> StopReplicaRequest:
    return codec.build(StopReplicaRequest, controller_id=1, controller_epoch=1,
                       broker_epoch=5, topic_states=[
                           {"topic_name": "a", "partition_states": [
                               {"partition_index": 0}, {"partition_index": 1}]}])


def test_leader_and_isr_per_partition_codes_and_unknown_topic_ids() -> None:
    response = codec.build(LeaderAndIsrResponse, error_code=0, topics=[
        {"topic_id": KNOWN, "partition_errors": [
            {"partition_index": 0, "error_code": 0},
            {"partition_index": 1, "error_code": int(ErrorCode.kafka_storage_error)}]},
        {"topic_id": UNKNOWN, "partition_errors": [{"partition_index": 3, "error_code": 0}]}])
    event = response_event(2, _leader_and_isr(), response)
    assert isinstance(event, LeaderAndIsrResult) and event.broker_id == 2
    assert event.errors == {TopicPartition("a", 0): ErrorCode.none,
                            TopicPartition("a", 1): ErrorCode.kafka_storage_error,
                            TopicPartition(str(UNKNOWN), 3): ErrorCode.none}
    assert all(type(code) is ErrorCode for code in event.errors.values())


def test_leader_and_isr_request_error_applies_to_every_partition() -> None:
    response = codec.build(LeaderAndIsrResponse,
                           error_code=int(ErrorCode.stale_controller_epoch), topics=[])
    event = response_event(2, _leader_and_isr(), response)
    assert isinstance(event, LeaderAndIsrResult)
    assert event.errors == {TopicPartition("a", p): ErrorCode.stale_controller_epoch
                            for p in (0, 1)}


def test_stop_replica_codes() -> None:
    ok = codec.build(StopReplicaResponse, error_code=0, partition_errors=[
        {"topic_name": "a", "partition_index": 1,
         "error_code": int(ErrorCode.kafka_storage_error)}])
    event = response_event(3, _stop_replica(), ok)
    assert isinstance(event, StopReplicaResult)
    assert event.errors == {TopicPartition("a", 0): ErrorCode.none,
                            TopicPartition("a", 1): ErrorCode.kafka_storage_error}
    failed = codec.build(StopReplicaResponse, error_code=int(ErrorCode.stale_broker_epoch),
                         partition_errors=[])
    event = response_event(3, _stop_replica(), failed)
    assert isinstance(event, StopReplicaResult)
    assert set(event.errors.values()) == {ErrorCode.stale_broker_epoch}


def test_update_metadata_needs_no_event() -> None:
    request = codec.build(UpdateMetadataRequest, controller_id=1, controller_epoch=1,
                          broker_epoch=5, topic_states=[], live_brokers=[])
    assert response_event(2, request, codec.build(UpdateMetadataResponse, error_code=0)) is None
