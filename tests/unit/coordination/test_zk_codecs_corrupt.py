"""Corrupt znode contents: every decoder raises ZnodeDataError naming the znode's path."""

import pytest

from weir.coordination import codecs, paths
from weir.coordination.errors import ZnodeDataError
from weir.protocol.errors import ErrorCode, KafkaError

STATE = "/brokers/topics/t/partitions/0/state"

CASES = [
    # (decoder call, data, path named in the error)
    (lambda d: codecs.decode_broker(1, d), b"\xff\xfe{", "/brokers/ids/1"),
    (lambda d: codecs.decode_broker(1, d), b"not json", "/brokers/ids/1"),
    (lambda d: codecs.decode_broker(1, d), b"[1, 2]", "/brokers/ids/1"),
    (lambda d: codecs.decode_broker(1, d), b"{}", "/brokers/ids/1"),
    (lambda d: codecs.decode_broker(1, d), b'{"host": 5, "port": 9092}', "/brokers/ids/1"),
    (lambda d: codecs.decode_broker(1, d), b'{"host": "h", "port": "x"}', "/brokers/ids/1"),
    (lambda d: codecs.decode_broker(1, d), b'{"endpoints": "PLAINTEXT://h:1"}', "/brokers/ids/1"),
    (lambda d: codecs.decode_broker(1, d), b'{"endpoints": ["nonsense"]}', "/brokers/ids/1"),
    (lambda d: codecs.decode_topic_assignment("t", d), b"", "/brokers/topics/t"),
    (lambda d: codecs.decode_topic_assignment("t", d), b"{}", "/brokers/topics/t"),
    (
        lambda d: codecs.decode_topic_assignment("t", d),
        b'{"partitions": {"0": "12"}}',
        "/brokers/topics/t",
    ),
    (
        lambda d: codecs.decode_topic_assignment("t", d),
        b'{"partitions": {"x": [1]}}',
        "/brokers/topics/t",
    ),
    (
        lambda d: codecs.decode_topic_assignment("t", d),
        b'{"partitions": {"0": [1]}, "topic_id": "!!"}',
        "/brokers/topics/t",
    ),
    (
        lambda d: codecs.decode_topic_assignment("t", d),
        b'{"partitions": {"0": [true]}}',
        "/brokers/topics/t",
    ),
    (lambda d: codecs.decode_leader_isr(d, path=STATE), b'{"leader": 1}', STATE),
    (
        lambda d: codecs.decode_leader_isr(d, path=STATE),
        b'{"leader": 1, "leader_epoch": 0, "isr": "12", "controller_epoch": 1}',
        STATE,
    ),
    (
        lambda d: codecs.decode_leader_isr(d, path=STATE),
        b'{"leader": 1.5, "leader_epoch": 0, "isr": [1], "controller_epoch": 1}',
        STATE,
    ),
    (lambda d: codecs.decode_leader_isr(d, path=STATE), b"null", STATE),
    (codecs.decode_controller, b"nope", "/controller"),
    (codecs.decode_controller, b"null", "/controller"),
    (codecs.decode_controller, b'{"brokerid": "x"}', "/controller"),
    (codecs.decode_controller_epoch, b"abc", "/controller_epoch"),
    (codecs.decode_controller_epoch, b"\xff", "/controller_epoch"),
    (lambda d: codecs.decode_config(d, path="/config/topics/t"), b"{", "/config/topics/t"),
    (
        lambda d: codecs.decode_config(d, path="/config/topics/t"),
        b'{"config": [1]}',
        "/config/topics/t",
    ),
    (
        lambda d: codecs.decode_config(d, path="/config/topics/t"),
        b'{"config": {"retention.ms": {"a": 1}}}',
        "/config/topics/t",
    ),
    (lambda d: codecs.decode_config_change(d, path="/config/changes/c1"), b"{}", "/config/changes/c1"),
    (codecs.decode_reassignment, b'{"partitions": 5}', "/admin/reassign_partitions"),
    (codecs.decode_reassignment, b'{"partitions": [{"topic": 1}]}', "/admin/reassign_partitions"),
    (
        codecs.decode_preferred_election,
        b'{"partitions": [{"topic": "t"}]}',
        "/admin/preferred_replica_election",
    ),
    (codecs.decode_cluster_id, b'{"version": "1"}', "/cluster/id"),
    (codecs.decode_cluster_id, b'{"id": 5}', "/cluster/id"),
    (codecs.decode_producer_id_block, b'{"broker": 1}', "/latest_producer_id_block"),
    (
        codecs.decode_producer_id_block,
        b'{"broker": 1, "block_start": "0", "block_end": "abc"}',
        "/latest_producer_id_block",
    ),
]


@pytest.mark.parametrize(("decode", "data", "path"), CASES)
def test_corrupt_znode_raises_one_error_naming_the_path(decode, data, path) -> None:
    with pytest.raises(ZnodeDataError) as err:
        decode(data)
    assert err.value.path == path
    assert path in str(err.value)
    assert isinstance(err.value, KafkaError) and err.value.code == ErrorCode.unknown_server_error


def test_numbers_kafka_writes_as_strings_still_decode() -> None:
    block = codecs.decode_producer_id_block(
        b'{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}'
    )
    assert (block.broker, block.block_start, block.block_end) == (2, 1000, 1999)
    assert codecs.decode_config(b'{"version":1,"config":{"retention.ms":1000}}') == {
        "retention.ms": "1000"
    }
    assert codecs.decode_controller(b"3") == 3  # the pre-0.8 bare integer


def test_default_paths_are_kafkas() -> None:
    with pytest.raises(ZnodeDataError) as err:
        codecs.decode_leader_isr(b"{}")
    assert err.value.path == "partition state znode"
    assert paths.REASSIGN_PARTITIONS == "/admin/reassign_partitions"
