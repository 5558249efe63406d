"""The follower's one-pass Fetch v12 and v13 (topics by id) response readers: the values kio
reads, or None (kio decodes) for anything not of the common shape."""

from __future__ import annotations

import copy
import datetime
import os
import uuid

import pytest
from kio.index import load_response_schema

from weir.protocol import codec
from weir.protocol.errors import ErrorCode
from weir.replication import follower_fetch_response

DECODERS = {12: follower_fetch_response.decode, 13: follower_fetch_response.decode_v13}


def _as_version(version: int, data: dict) -> dict:
    """``data`` (topics by name) as the response of ``version`` (v13: by id)."""
    data = copy.deepcopy(data)
    if version >= 13:
        for topic in data.get("responses", ()):
            topic["topic_id"] = uuid.uuid5(uuid.NAMESPACE_OID, topic.pop("topic"))
    return data


def _body(data: dict, version: int = 12) -> bytes:
    return codec.encode_body(codec.build(load_response_schema(1, version),
                                         _as_version(version, data)))


def _part(index: int, **extra) -> dict:
    return {"partition_index": index, "error_code": ErrorCode.none, "high_watermark": 100 + index,
            "last_stable_offset": 90 + index, "log_start_offset": index, **extra}


COMMON = [
    {"session_id": 7, "responses": [{"topic": "t", "partitions": [
        _part(0, records=os.urandom(300_000))]}]},
    {"session_id": 0, "error_code": ErrorCode.none, "throttle_time": datetime.timedelta(milliseconds=5), "responses": [
        {"topic": "a", "partitions": [_part(0, records=b""), _part(3, records=None)]},
        {"topic": "é-topic", "partitions": [_part(1, error_code=ErrorCode.not_leader_or_follower, records=None),
                                            _part(2, records=b"xyz")]}]},
    {"session_id": 12, "responses": []},
    {"error_code": ErrorCode.fetch_session_id_not_found, "session_id": 0, "responses": []},
]


@pytest.mark.parametrize("version", [12, 13])
@pytest.mark.parametrize("data", COMMON)
def test_common_shapes_read_as_kio_reads_them(data: dict, version: int) -> None:
    body = _body(data, version)
    frame = memoryview(bytearray(b"\x00" * 5 + body)).toreadonly()
    fast = DECODERS[version](frame, 5)
    slow = codec.decode_body(load_response_schema(1, version), body, 0)
    assert fast is not None
    assert (fast.error_code, fast.session_id, fast.throttle_time_ms) == (
        int(slow.error_code), int(slow.session_id),
        round(slow.throttle_time.total_seconds() * 1000))
    assert len(fast.responses) == len(slow.responses)
    for ft, st in zip(fast.responses, slow.responses, strict=True):
        if version >= 13:
            assert ft.topic is None and ft.topic_id == st.topic_id
        else:
            assert ft.topic == st.topic and ft.topic_id is None
        for fp, sp in zip(ft.partitions, st.partitions, strict=True):
            assert fp.partition_index == int(sp.partition_index)
            assert fp.error_code == int(sp.error_code)
            assert fp.high_watermark == int(sp.high_watermark)
            assert fp.last_stable_offset == int(sp.last_stable_offset)
            assert fp.log_start_offset == int(sp.log_start_offset)
            assert fp.diverging_epoch is None
            if sp.records is None:
                assert fp.records is None
            else:
                assert isinstance(fp.records, memoryview) and fp.records.readonly
                assert bytes(fp.records) == bytes(sp.records)


UNUSUAL = [
    {"responses": [{"topic": "t", "partitions": [
        _part(0, diverging_epoch={"epoch": 3, "end_offset": 40}, records=None)]}]},
    {"responses": [{"topic": "t", "partitions": [
        _part(0, aborted_transactions=[{"producer_id": 1, "first_offset": 2}],
              records=b"r")]}]},
    {"responses": [{"topic": "t", "partitions": [
        _part(0, current_leader={"leader_id": 2, "leader_epoch": 5}, records=None)]}]},
]


@pytest.mark.parametrize("version", [12, 13])
@pytest.mark.parametrize("data", UNUSUAL)
def test_tagged_fields_and_aborted_transactions_go_to_kio(data: dict, version: int) -> None:
    assert DECODERS[version](_body(data, version), 0) is None


@pytest.mark.parametrize("version", [12, 13])
def test_truncated_frames_go_to_kio(version: int) -> None:
    body = _body(COMMON[1], version)
    for cut in range(len(body)):
        fast = DECODERS[version](body[:cut], 0)
        assert fast is None, cut
