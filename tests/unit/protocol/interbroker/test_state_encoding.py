"""The hand-written topic-state encoders of LeaderAndIsr v7 and UpdateMetadata v8 write
exactly kio's bytes, and what kio's reader gives back is the request encoded."""

from __future__ import annotations

import dataclasses
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weir.protocol import codec
from weir.protocol.interbroker import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from weir.protocol.interbroker.leader_and_isr.v7.request import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrTopicState,
)
from weir.protocol.interbroker.state_encoding import encode_request
from weir.protocol.interbroker.update_metadata.v8.request import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataTopicState,
)

INT32 = st.integers(-2**31, 2**31 - 1)
BROKERS = st.lists(st.integers(-1, 2**31 - 1), max_size=5).map(tuple)
# up to 300 items: counts ≥ 127 take a two-byte varint
LONG_BROKERS = st.lists(st.integers(0, 2000), min_size=120, max_size=300).map(tuple)
NAMES = st.text(min_size=1, max_size=40) | st.text(alphabet="ab", min_size=126, max_size=300)
IDS = st.none() | st.uuids()


def _lai_partition() -> st.SearchStrategy[LeaderAndIsrPartitionState]:
    return st.builds(
        LeaderAndIsrPartitionState, partition_index=INT32, controller_epoch=INT32,
        leader=INT32, leader_epoch=INT32, isr=BROKERS | LONG_BROKERS, partition_epoch=INT32,
        replicas=BROKERS, adding_replicas=BROKERS, removing_replicas=BROKERS,
        is_new=st.booleans(), leader_recovery_state=st.integers(-128, 127))


def _um_partition() -> st.SearchStrategy[UpdateMetadataPartitionState]:
    return st.builds(
        UpdateMetadataPartitionState, partition_index=INT32, controller_epoch=INT32,
        leader=INT32, leader_epoch=INT32, isr=BROKERS, zk_version=INT32,
        replicas=BROKERS | LONG_BROKERS, offline_replicas=BROKERS)


def _topics(cls: type, partition: st.SearchStrategy[object], max_topics: int = 4):
    return st.lists(st.builds(
        cls, topic_name=NAMES, topic_id=IDS,
        partition_states=st.lists(partition, max_size=6).map(tuple)),
        max_size=max_topics).map(tuple)


LEADER_AND_ISR = st.builds(
    LeaderAndIsrRequest, controller_id=INT32, is_kraft_controller=st.booleans(),
    controller_epoch=INT32, broker_epoch=st.integers(-2**63, 2**63 - 1),
    type_=st.integers(0, 2), topic_states=_topics(LeaderAndIsrTopicState, _lai_partition()),
    live_leaders=st.lists(st.builds(LeaderAndIsrLiveLeader, broker_id=INT32,
                                    host_name=st.text(max_size=20), port=INT32),
                          max_size=3).map(tuple))

UPDATE_METADATA = st.builds(
    UpdateMetadataRequest, controller_id=INT32, is_kraft_controller=st.booleans(),
    type_=st.integers(0, 2), controller_epoch=INT32,
    broker_epoch=st.integers(-2**63, 2**63 - 1),
    topic_states=_topics(UpdateMetadataTopicState, _um_partition()),
    live_brokers=st.lists(st.builds(
        UpdateMetadataBroker, id=INT32, rack=st.none() | st.text(max_size=8),
        endpoints=st.lists(st.builds(
            UpdateMetadataEndpoint, port=INT32, host=st.text(max_size=12),
            listener=st.text(max_size=12), security_protocol=st.integers(0, 3)),
            max_size=2).map(tuple)), max_size=3).map(tuple))


@settings(max_examples=120, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(LEADER_AND_ISR, UPDATE_METADATA))
def test_bytes_are_kios(request):
    body = encode_request(request)
    assert body == codec.encode_body(request)
    assert codec.decode_body(type(request), body, 0) == request


def _many_topics_request(topics: int) -> UpdateMetadataRequest:
    state = UpdateMetadataPartitionState(partition_index=0, controller_epoch=1, leader=1,
                                         leader_epoch=0, isr=(1,), zk_version=0,
                                         replicas=(1,), offline_replicas=())
    return UpdateMetadataRequest(
        controller_id=1, controller_epoch=1, broker_epoch=5, type_=2,
        topic_states=tuple(UpdateMetadataTopicState(
            topic_name=f"t{i}", topic_id=uuid.UUID(int=i),
            partition_states=(dataclasses.replace(state, partition_index=i),) * (i % 3 + 1))
            for i in range(topics)),
        live_brokers=())


def test_counts_past_one_varint_byte():
    for topics in (126, 127, 128, 300, 20000):
        request = _many_topics_request(topics)
        assert encode_request(request) == codec.encode_body(request)


def test_memo_reuses_a_state_s_bytes_and_is_keyed_by_identity():
    request = _many_topics_request(50)
    memo: dict[int, tuple[object, bytes]] = {}
    first = encode_request(request, memo)
    assert len(memo) == 50  # a state repeated within a topic is one object, one entry
    assert encode_request(request, memo) == first == codec.encode_body(request)
    # another object at a reused id (the first one freed) is encoded anew, not taken
    # from the memo: the entry keeps its object, so the identity check sees the change
    ps = request.topic_states[0].partition_states[0]
    changed = dataclasses.replace(ps, leader=9)
    memo[id(changed)] = (ps, b"stale")
    other = dataclasses.replace(request, topic_states=(dataclasses.replace(
        request.topic_states[0], partition_states=(changed,)),))
    assert encode_request(other, memo) == codec.encode_body(other)


def test_other_requests_and_empty_states_are_kios():
    stop = StopReplicaRequest(controller_id=1, controller_epoch=2, broker_epoch=3,
                              topic_states=())
    assert encode_request(stop) == codec.encode_body(stop)
    empty = dataclasses.replace(_many_topics_request(1), topic_states=())
    assert encode_request(empty) == codec.encode_body(empty)
