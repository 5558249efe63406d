"""Codec round trips for every API version the broker serves, and request-header framing."""

from __future__ import annotations

import struct

import pytest

from weir.protocol import codec
from weir.server.handlers import REGISTRY, api_versions

SERVED = [(h.api_key, v) for h in REGISTRY.values()
          for v in range(h.min_version, h.max_version + 1)]


@pytest.mark.parametrize(("api_key", "version"), SERVED)
def test_request_and_response_round_trip(api_key, version):
    request_cls, response_cls = REGISTRY[api_key].schemas(version)
    for cls in (request_cls, response_cls):
        entity = codec.build(cls, {})
        encoded = codec.encode_body(entity)
        assert codec.decode_body(cls, encoded) == entity


@pytest.mark.parametrize("version", range(4, 13))
def test_fetch_response_with_records_round_trip(version):
    _, response_cls = REGISTRY[1].schemas(version)
    response = codec.build(response_cls, {
        "session_id": 0,
        "responses": [{"topic": "t", "partitions": [
            {"partition_index": 3, "high_watermark": 10, "last_stable_offset": 10,
             "log_start_offset": 0, "records": b"\x01" * 100, "aborted_transactions": None},
        ]}],
    })
    decoded = codec.decode_body(response_cls, codec.encode_body(response))
    part = decoded.responses[0].partitions[0]
    assert (part.partition_index, part.high_watermark, part.records) == (3, 10, b"\x01" * 100)


def test_build_drops_fields_a_version_lacks_and_fills_zero_values():
    _, v0 = REGISTRY[3].schemas(0)
    _, v12 = REGISTRY[3].schemas(12)
    data = {"brokers": [{"node_id": 1, "host": "h", "port": 9, "rack": "r"}],
            "cluster_id": "c", "controller_id": 1, "topics": []}
    old = codec.build(v0, data)
    new = codec.build(v12, data)
    assert not hasattr(old, "cluster_id")
    assert new.cluster_id == "c" and new.brokers[0].rack == "r"


@pytest.mark.parametrize("flexible", [False, True])
def test_request_header_round_trip(flexible):
    raw = codec.encode_request_header(3, 12, 77, "client-é", flexible) + b"BODY"
    header = codec.parse_request_header(raw, flexible)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        3, 12, 77, "client-é")
    assert raw[header.size:] == b"BODY"


def test_request_header_null_client_id_and_tagged_fields():
    raw = struct.pack(">hhih", 1, 12, 5, -1) + bytes([1, 7, 2, 0xAA, 0xBB]) + b"X"
    header = codec.parse_request_header(raw, flexible=True)
    assert header.client_id is None
    assert raw[header.size:] == b"X"


@pytest.mark.parametrize("raw", [b"", b"\x00\x03", struct.pack(">hhih", 3, 1, 1, 50) + b"ab",
                                 struct.pack(">hhih", 3, 9, 1, 0) + b"\x05\x01"])
def test_truncated_headers_are_malformed(raw):
    with pytest.raises(codec.MalformedRequest):
        codec.parse_request_header(raw, flexible=True)


def test_undecodable_body_is_malformed():
    request_cls, _ = REGISTRY[0].schemas(9)
    with pytest.raises(codec.MalformedRequest):
        codec.decode_body(request_cls, b"\x05\xff")


def test_api_versions_is_generated_from_the_registry():
    _, response_cls = REGISTRY[18].schemas(3)
    response = api_versions.build_response(response_cls)
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert advertised == {h.api_key: (h.min_version, h.max_version) for h in REGISTRY.values()}
    # the APIs the issue requires are all there
    assert {0, 1, 2, 3, 18, 19, 20, 22, 23, 32, 37} <= set(advertised)


def test_response_frames_use_header_v0_for_api_versions():
    _, api_versions_cls = REGISTRY[18].schemas(3)
    assert not codec.response_header_flexible(18, api_versions_cls)
    _, metadata_cls = REGISTRY[3].schemas(12)
    assert codec.response_header_flexible(3, metadata_cls)
    frame = codec.encode_response_frame(9, b"abc", flexible_header=True)
    assert frame == struct.pack(">ii", 8, 9) + b"\x00abc"


@pytest.mark.parametrize("version", range(12))
def test_hand_encoded_produce_response_matches_kio(version):
    from weir.protocol import produce_response

    _, response_cls = REGISTRY[0].schemas(version)
    topics = [("alpha", [(0, 0, 42, -1, 7, None), (3, 6, -1, -1, -1, "not the leader")]),
              ("beta-é", [(1, 0, 0, 1_700_000_000_000, 0, None)])]
    leaders = {("alpha", 3): (2, 7)}
    endpoints = [(2, "h2", 9093, None)]
    record_errors = {("alpha", 3): [(0, "no key"), (4, None)]}  # KIP-467
    decoded = codec.decode_body(response_cls,
                                produce_response.encode(version, topics, leaders, endpoints,
                                                        record_errors))
    assert [t.name for t in decoded.responses] == ["alpha", "beta-é"]
    if version >= 8:
        errs = decoded.responses[0].partition_responses[1].record_errors
        assert [(e.batch_index, e.batch_index_error_message) for e in errs] == \
            [(0, "no key"), (4, None)]
        assert list(decoded.responses[0].partition_responses[0].record_errors) == []
    if version >= 10:  # KIP-951 leader hints
        hint = decoded.responses[0].partition_responses[1].current_leader
        assert (hint.leader_id, hint.leader_epoch) == (2, 7)
        assert decoded.responses[0].partition_responses[0].current_leader.leader_id == -1
        assert [(n.node_id, n.host, n.port, n.rack) for n in decoded.node_endpoints] == \
            endpoints
    p0, p1 = decoded.responses[0].partition_responses
    assert (p0.index, int(p0.error_code), p0.base_offset) == (0, 0, 42)
    assert (p1.index, int(p1.error_code), p1.base_offset) == (3, 6, -1)
    if version >= 5:
        assert p0.log_start_offset == 7
    if version >= 8:
        assert p1.error_message == "not the leader" and p0.error_message is None
    if version >= 2:
        stamped = decoded.responses[1].partition_responses[0].log_append_time
        assert stamped is not None and int(stamped.timestamp() * 1000) == 1_700_000_000_000
        assert p0.log_append_time is None


@pytest.mark.parametrize("version", range(18))
def test_hand_encoded_fetch_response_matches_kio(version, tmp_path):
    import uuid

    from weir.protocol import fetch_response as fr

    segment = tmp_path / "0.log"
    segment.write_bytes(b"H" * 10 + b"R" * 300 + b"T" * 10)
    topics = [
        ("alpha", [
            fr.PartitionData(0, 0, 40, 40, 3, -1, fr.FileRegion(str(segment), 10, 300)),
            fr.PartitionData(1, 74, 9, 9, 0, -1, b"", diverging_epoch=(4, 17),
                             current_leader=(2, 5)),
        ]),
        ("béta", [fr.PartitionData(2, 0, 1, 1, 0, 3, b"inline-records",
                                   aborted_transactions=[(7, 100), (9, 120)])]),
    ]
    ids = {"alpha": uuid.uuid4(), "béta": uuid.uuid4()}
    if version >= 13:  # KIP-516: topics by id
        topics = [(ids[name], parts) for name, parts in topics]
    endpoints = [(2, "127.0.0.1", 9093, None), (3, "h3", 9094, "r1")]
    chunks = fr.encode(version, topics, error_code=0, session_id=77, node_endpoints=endpoints)
    body = b"".join(c if isinstance(c, bytes) else
                    segment.read_bytes()[c.position:c.position + c.size] for c in chunks)
    assert any(isinstance(c, fr.FileRegion) for c in chunks)
    _, response_cls = REGISTRY[1].schemas(version)
    decoded = codec.decode_body(response_cls, body)
    a0, a1 = decoded.responses[0].partitions
    b0 = decoded.responses[1].partitions[0]
    if version >= 13:
        assert decoded.responses[1].topic_id == ids["béta"]
    else:
        assert decoded.responses[1].topic == "béta"
    if version >= 7:
        assert decoded.session_id == 77
    if version >= 16:
        assert [(n.node_id, n.host, n.port, n.rack) for n in decoded.node_endpoints] == endpoints
    assert (a0.partition_index, a0.high_watermark, a0.records) == (0, 40, b"R" * 300)
    assert int(a1.error_code) == 74 and a1.records == b""
    assert b0.records == b"inline-records"
    if version >= 5:
        assert a0.log_start_offset == 3
    if version >= 11:
        assert b0.preferred_read_replica == 3
    if version >= 4:  # KIP-98: null for read_uncommitted, else the aborted transactions
        assert a0.aborted_transactions is None
        assert [(t.producer_id, t.first_offset) for t in b0.aborted_transactions] == [
            (7, 100), (9, 120)]
    if version >= 12:
        assert (a1.diverging_epoch.epoch, a1.diverging_epoch.end_offset) == (4, 17)
        assert (a1.current_leader.leader_id, a1.current_leader.leader_epoch) == (2, 5)
        assert a0.diverging_epoch.epoch == -1


@pytest.mark.parametrize("version", range(12))
@pytest.mark.parametrize(("error", "message", "record_errors"), [
    (0, None, None), (6, "not the leader", None), (87, "bad record", [(0, "no key"), (3, None)]),
])
def test_one_partition_produce_response_is_the_general_encoding(version, error, message,
                                                                record_errors):
    from weir.protocol import produce_response

    for topic in ("alpha", "béta-" + "x" * 200):
        general = produce_response.encode(
            version, [(topic, [(5, error, 42, 1_700_000_000_000, 7, message)])],
            record_errors={(topic, 5): record_errors} if record_errors else None)
        assert produce_response.encode_one(version, topic, 5, error, 42, 1_700_000_000_000, 7,
                                           message, record_errors) == general
