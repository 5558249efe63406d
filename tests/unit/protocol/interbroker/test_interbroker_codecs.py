"""Round trips and byte-level checks of the inter-broker codecs through kio's serial."""

import io
import struct
import uuid

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32, i64

from weir.protocol.interbroker import (
    INTERBROKER_SCHEMAS,
    AlterPartitionRequest,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from weir.protocol.interbroker.controlled_shutdown.v3.response import RemainingPartition
from weir.protocol.interbroker.leader_and_isr.v7 import request as lai_req
from weir.protocol.interbroker.leader_and_isr.v7 import response as lai_resp
from weir.protocol.interbroker.stop_replica.v4 import request as sr_req
from weir.protocol.interbroker.stop_replica.v4 import response as sr_resp
from weir.protocol.interbroker.update_metadata.v8 import request as um_req

TOPIC_A = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
TOPIC_B = uuid.uuid4()


def encode(obj) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(obj))(buf, obj)
    return buf.getvalue()


def decode(cls, data: bytes):
    value, size = entity_reader(cls)(data, 0)
    assert size == len(data)
    return value


def roundtrip(obj):
    data = encode(obj)
    back = decode(type(obj), data)
    assert back == obj
    return data


def leader_and_isr_request() -> LeaderAndIsrRequest:
    def state(
        p: int, leader: int, isr: tuple[int, ...], **kw
    ) -> lai_req.LeaderAndIsrPartitionState:
        return lai_req.LeaderAndIsrPartitionState(
            partition_index=i32(p),
            controller_epoch=i32(3),
            leader=i32(leader),
            leader_epoch=i32(5 + p),
            isr=tuple(i32(b) for b in isr),
            partition_epoch=i32(11),
            replicas=(i32(1), i32(2), i32(3)),
            **kw,
        )

    return LeaderAndIsrRequest(
        controller_id=i32(1),
        controller_epoch=i32(3),
        broker_epoch=i64(4294967337),
        type_=i8(2),
        topic_states=(
            lai_req.LeaderAndIsrTopicState(
                topic_name="orders",
                topic_id=TOPIC_A,
                partition_states=(
                    state(0, 1, (1, 2, 3)),
                    state(1, 2, (2, 3), is_new=True),
                    state(
                        2,
                        3,
                        (3,),
                        adding_replicas=(i32(4),),
                        removing_replicas=(i32(1),),
                        leader_recovery_state=i8(1),
                    ),
                ),
            ),
            lai_req.LeaderAndIsrTopicState(
                topic_name="events", topic_id=TOPIC_B, partition_states=(state(0, 2, (2,)),)
            ),
        ),
        live_leaders=(
            lai_req.LeaderAndIsrLiveLeader(broker_id=i32(1), host_name="127.0.0.1", port=i32(9092)),
            lai_req.LeaderAndIsrLiveLeader(broker_id=i32(2), host_name="b2.local", port=i32(9093)),
        ),
    )


def update_metadata_request(type_: int = 0) -> UpdateMetadataRequest:
    endpoint = um_req.UpdateMetadataEndpoint(
        port=i32(9092), host="127.0.0.1", listener="PLAINTEXT", security_protocol=i16(0)
    )
    return UpdateMetadataRequest(
        controller_id=i32(2),
        type_=i8(type_),
        controller_epoch=i32(7),
        broker_epoch=i64(99),
        topic_states=(
            um_req.UpdateMetadataTopicState(
                topic_name="orders",
                topic_id=TOPIC_A,
                partition_states=tuple(
                    um_req.UpdateMetadataPartitionState(
                        partition_index=i32(p),
                        controller_epoch=i32(7),
                        leader=i32(-1 if p == 2 else 1),
                        leader_epoch=i32(p),
                        isr=(i32(1), i32(2)),
                        zk_version=i32(4),
                        replicas=(i32(1), i32(2), i32(3)),
                        offline_replicas=(i32(3),) if p == 2 else (),
                    )
                    for p in range(3)
                ),
            ),
        ),
        live_brokers=(
            um_req.UpdateMetadataBroker(id=i32(1), endpoints=(endpoint,), rack=None),
            um_req.UpdateMetadataBroker(id=i32(2), endpoints=(endpoint,), rack="rack-b"),
        ),
    )


ALL_MESSAGES = [
    leader_and_isr_request(),
    LeaderAndIsrResponse(
        error_code=ErrorCode.none,
        topics=(
            lai_resp.LeaderAndIsrTopicError(
                topic_id=TOPIC_A,
                partition_errors=(
                    lai_resp.LeaderAndIsrPartitionError(
                        partition_index=i32(0), error_code=ErrorCode.none
                    ),
                    lai_resp.LeaderAndIsrPartitionError(
                        partition_index=i32(1), error_code=ErrorCode.kafka_storage_error
                    ),
                ),
            ),
        ),
    ),
    StopReplicaRequest(
        controller_id=i32(1),
        controller_epoch=i32(2),
        broker_epoch=i64(77),
        topic_states=(
            sr_req.StopReplicaTopicState(
                topic_name="orders",
                partition_states=(
                    sr_req.StopReplicaPartitionState(
                        partition_index=i32(0), leader_epoch=i32(-2), delete_partition=True
                    ),
                    sr_req.StopReplicaPartitionState(
                        partition_index=i32(1), delete_partition=False
                    ),
                ),
            ),
        ),
    ),
    StopReplicaResponse(
        error_code=ErrorCode.none,
        partition_errors=(
            sr_resp.StopReplicaPartitionError(
                topic_name="orders", partition_index=i32(0), error_code=ErrorCode.none
            ),
            sr_resp.StopReplicaPartitionError(
                topic_name="orders",
                partition_index=i32(1),
                error_code=ErrorCode.kafka_storage_error,
            ),
        ),
    ),
    update_metadata_request(type_=0),
    update_metadata_request(type_=2),
    UpdateMetadataResponse(error_code=ErrorCode.stale_controller_epoch),
    ControlledShutdownRequest(broker_id=i32(3), broker_epoch=i64(1234)),
    ControlledShutdownResponse(
        error_code=ErrorCode.none,
        remaining_partitions=(
            RemainingPartition(topic_name="orders", partition_index=i32(0)),
            RemainingPartition(topic_name="events", partition_index=i32(4)),
        ),
    ),
]


@pytest.mark.parametrize("message", ALL_MESSAGES, ids=lambda m: type(m).__name__)
def test_round_trip(message) -> None:
    roundtrip(message)


def test_registry_covers_every_class() -> None:
    for api_key, versions in INTERBROKER_SCHEMAS.items():
        for version, (req, resp) in versions.items():
            assert req.__api_key__ == resp.__api_key__ == api_key
            assert req.__version__ == resp.__version__ == version
            assert req.__flexible__ and resp.__flexible__
    assert {type(m) for m in ALL_MESSAGES} <= {
        cls
        for versions in INTERBROKER_SCHEMAS.values()
        for pair in versions.values()
        for cls in pair
    }


def test_controlled_shutdown_request_bytes() -> None:
    data = encode(ControlledShutdownRequest(broker_id=i32(3), broker_epoch=i64(1234)))
    # int32 broker id, int64 broker epoch, then an empty tagged-field section.
    assert data == struct.pack(">iq", 3, 1234) + b"\x00"


def test_update_metadata_response_bytes() -> None:
    assert encode(UpdateMetadataResponse(error_code=ErrorCode.none)) == b"\x00\x00\x00"


def test_controlled_shutdown_response_bytes() -> None:
    message = ControlledShutdownResponse(
        error_code=ErrorCode.none,
        remaining_partitions=(RemainingPartition(topic_name="ab", partition_index=i32(1)),),
    )
    # error 0; compact array of 1 (varint 2); compact string "ab" (varint 3);
    # partition 1; entry tags 0; message tags 0.
    expected = b"\x00\x00" + b"\x02" + b"\x03ab" + struct.pack(">i", 1) + b"\x00" + b"\x00"
    assert encode(message) == expected


def test_update_metadata_tagged_type_field() -> None:
    untagged = encode(update_metadata_request(type_=0))
    tagged = encode(update_metadata_request(type_=2))
    # With type 0 the top-level tagged section is empty: the message ends with count 0.
    assert untagged.endswith(b"\x00")
    # With type 2 it holds one field: count 1, tag 0, size 1, int8 value 2.
    assert tagged == untagged[:-1] + b"\x01\x00\x01\x02"
    assert decode(UpdateMetadataRequest, tagged).type_ == 2


def test_update_metadata_null_rack_is_compact_null() -> None:
    broker = um_req.UpdateMetadataBroker(id=i32(1), endpoints=(), rack=None)
    assert encode(broker) == struct.pack(">i", 1) + b"\x01" + b"\x00" + b"\x00"
    broker = um_req.UpdateMetadataBroker(id=i32(1), endpoints=(), rack="r1")
    assert encode(broker) == struct.pack(">i", 1) + b"\x01" + b"\x03r1" + b"\x00"


def test_leader_and_isr_request_header_fields() -> None:
    data = encode(leader_and_isr_request())
    controller_id, is_kraft, controller_epoch, broker_epoch, type_ = struct.unpack_from(
        ">i?iqb", data
    )
    assert (controller_id, is_kraft, controller_epoch, broker_epoch, type_) == (
        1,
        False,
        3,
        4294967337,
        2,
    )
    # Next: compact array of 2 topics, then compact string "orders" and the topic id.
    offset = struct.calcsize(">i?iqb")
    assert data[offset] == 3
    assert data[offset + 1 : offset + 8] == b"\x07orders"
    assert data[offset + 8 : offset + 24] == TOPIC_A.bytes
    assert data.endswith(b"\x00")


def test_alter_partition_from_kio_round_trips() -> None:
    from kio.schema.alter_partition.v3 import request as ap

    message = AlterPartitionRequest(
        broker_id=i32(2),
        broker_epoch=i64(10),
        topics=(
            ap.TopicData(
                topic_id=TOPIC_A,
                partitions=(
                    ap.PartitionData(
                        partition_index=i32(0),
                        leader_epoch=i32(3),
                        new_isr_with_epochs=(
                            ap.BrokerState(broker_id=i32(2), broker_epoch=i64(10)),
                        ),
                        partition_epoch=i32(8),
                    ),
                ),
            ),
        ),
    )
    roundtrip(message)
