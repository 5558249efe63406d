"""Kafka's ZooKeeper JSON shapes, byte for byte where Kafka's order is known."""

import json
import uuid

import pytest

from weir.common import TopicPartition
from weir.coordination import codecs, paths
from weir.coordination.codecs import BrokerInfo, LeaderIsr, ProducerIdBlock, TopicAssignment


def test_topic_id_string_is_kafka_base64url() -> None:
    topic_id = uuid.UUID("f8b3c2a1-0000-4000-8000-00000000fbff")
    text = codecs.topic_id_to_str(topic_id)
    assert len(text) == 22 and "=" not in text
    assert text == "-LPCoQAAQACAAAAAAAD7_w"  # '-' and '_' from the URL-safe alphabet
    assert codecs.topic_id_from_str(text) == topic_id
    with pytest.raises(ValueError):
        codecs.topic_id_from_str("AAAA")


def test_broker_registration_v5_shape() -> None:
    info = BrokerInfo(id=1, host="127.0.0.1", port=9092, rack=None)
    data = codecs.encode_broker(info, now_ms=1700000000000)
    assert data == (
        b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://127.0.0.1:9092"],"rack":null,"jmx_port":-1,'
        b'"host":"127.0.0.1","timestamp":"1700000000000","port":9092,"version":5,'
        b'"features":{}}'
    )
    back = codecs.decode_broker(1, data, epoch=42)
    assert back == BrokerInfo(1, "127.0.0.1", 9092, None, 42, ["PLAINTEXT://127.0.0.1:9092"])


def test_broker_with_rack_and_named_listeners() -> None:
    info = BrokerInfo(2, "h", 1, "r1", endpoints=["INTERNAL://[::1]:9093", "SSL://h:9094"])
    doc = json.loads(codecs.encode_broker(info, now_ms=5))
    assert doc["rack"] == "r1"
    assert doc["listener_security_protocol_map"] == {"INTERNAL": "PLAINTEXT", "SSL": "SSL"}
    assert codecs.parse_endpoint("INTERNAL://[::1]:9093") == ("INTERNAL", "::1", 9093)


def test_decode_broker_written_by_kafka_without_plaintext() -> None:
    data = b'{"endpoints":["SSL://b3:9095"],"host":null,"port":-1,"version":5,"jmx_port":-1}'
    info = codecs.decode_broker(3, data)
    assert (info.host, info.port, info.rack) == ("b3", 9095, None)


def test_topic_assignment_v3_shape() -> None:
    topic_id = uuid.UUID(int=1)
    assignment = TopicAssignment("t", topic_id, {1: [2, 3], 0: [1, 2]})
    data = codecs.encode_topic_assignment(assignment)
    assert data == (
        b'{"partitions":{"0":[1,2],"1":[2,3]},"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ",'
        b'"adding_replicas":{},"removing_replicas":{},"version":3}'
    )
    assert codecs.decode_topic_assignment("t", data, zk_version=4) == TopicAssignment(
        "t", topic_id, {0: [1, 2], 1: [2, 3]}, zk_version=4
    )


def test_topic_assignment_v1_has_no_id() -> None:
    decoded = codecs.decode_topic_assignment("t", b'{"version":1,"partitions":{"0":[1]}}')
    assert decoded.topic_id is None and decoded.partitions == {0: [1]}


def test_partition_state_shape() -> None:
    state = LeaderIsr(leader=1, leader_epoch=0, isr=[1, 2], controller_epoch=1)
    data = codecs.encode_leader_isr(state)
    assert data == b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}'
    assert codecs.decode_leader_isr(data, zk_version=7) == LeaderIsr(1, 0, [1, 2], 1, 7)
    recovering = LeaderIsr(2, 3, [2], 4, leader_recovery_state=1)
    doc = json.loads(codecs.encode_leader_isr(recovering))
    assert doc["version"] == 2 and doc["leader_recovery_state"] == 1
    assert codecs.decode_leader_isr(codecs.encode_leader_isr(recovering)) == recovering


def test_controller_shapes() -> None:
    data = codecs.encode_controller(3, now_ms=12)
    assert data == b'{"version":1,"brokerid":3,"timestamp":"12"}'
    assert codecs.decode_controller(data) == 3
    assert codecs.decode_controller(b"5") == 5
    assert codecs.encode_controller_epoch(7) == b"7"
    assert codecs.decode_controller_epoch(b"7") == 7


def test_config_and_change_notification() -> None:
    data = codecs.encode_config({"retention.ms": "1000"})
    assert data == b'{"version":1,"config":{"retention.ms":"1000"}}'
    assert codecs.decode_config(data) == {"retention.ms": "1000"}
    assert codecs.decode_config(b"") == {}
    change = codecs.encode_config_change("topics/t")
    assert change == b'{"version":2,"entity_path":"topics/t"}'
    assert codecs.decode_config_change(change) == "topics/t"
    v1 = b'{"version":1,"entity_type":"topics","entity_name":"x"}'
    assert codecs.decode_config_change(v1) == "topics/x"


def test_reassignment_and_preferred_election() -> None:
    reassignment = {TopicPartition("t", 1): [3, 1], TopicPartition("t", 0): [1, 2]}
    data = codecs.encode_reassignment(reassignment)
    assert data == (
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]},'
        b'{"topic":"t","partition":1,"replicas":[3,1]}]}'
    )
    assert codecs.decode_reassignment(data) == reassignment
    election = {TopicPartition("a", 2), TopicPartition("a", 0)}
    data = codecs.encode_preferred_election(election)
    assert data == (
        b'{"version":1,"partitions":[{"topic":"a","partition":0},{"topic":"a","partition":2}]}'
    )
    assert codecs.decode_preferred_election(data) == election


def test_cluster_id_and_producer_id_block() -> None:
    assert codecs.encode_cluster_id("abc") == b'{"version":"1","id":"abc"}'
    assert codecs.decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"
    block = ProducerIdBlock(broker=1, block_start=1000, block_end=1999)
    data = codecs.encode_producer_id_block(block)
    assert data == b'{"version":1,"broker":1,"block_start":"1000","block_end":"1999"}'
    assert codecs.decode_producer_id_block(data) == block


def test_paths() -> None:
    assert paths.broker(1) == "/brokers/ids/1"
    assert paths.topic("t") == "/brokers/topics/t"
    assert paths.partition_state("t", 3) == "/brokers/topics/t/partitions/3/state"
    assert paths.topic_config("t") == "/config/topics/t"
    assert paths.broker_config(2) == "/config/brokers/2"
    assert paths.delete_topic("t") == "/admin/delete_topics/t"
    assert paths.CONFIG_CHANGE_PREFIX == "/config/changes/config_change_"
    assert paths.BROKER_IDS in paths.PERSISTENT_PATHS
    assert paths.CONTROLLER not in paths.PERSISTENT_PATHS
