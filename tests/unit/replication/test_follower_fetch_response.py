"""The follower's one-pass Fetch v12 response reader: the values kio reads, or None (kio
decodes) for anything not of the common shape."""

from __future__ import annotations

import datetime
import os

import pytest
from kio.index import load_response_schema

from weir.protocol import codec
from weir.protocol.errors import ErrorCode
from weir.replication import follower_fetch_response

RESPONSE = load_response_schema(1, 12)


def _body(data: dict) -> bytes:
    return codec.encode_body(codec.build(RESPONSE, data))


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


@pytest.mark.parametrize("data", COMMON)
def test_common_shapes_read_as_kio_reads_them(data: dict) -> None:
    body = _body(data)
    frame = memoryview(bytearray(b"\x00" * 5 + body)).toreadonly()
    fast = follower_fetch_response.decode(frame, 5)
    slow = codec.decode_body(RESPONSE, body, 0)
    assert fast is not None
    assert (fast.error_code, fast.session_id, fast.throttle_time_ms) == (
        int(slow.error_code), int(slow.session_id),
        round(slow.throttle_time.total_seconds() * 1000))
    assert len(fast.responses) == len(slow.responses)
    for ft, st in zip(fast.responses, slow.responses, strict=True):
        assert ft.topic == st.topic
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


@pytest.mark.parametrize("data", UNUSUAL)
def test_tagged_fields_and_aborted_transactions_go_to_kio(data: dict) -> None:
    assert follower_fetch_response.decode(_body(data), 0) is None


def test_truncated_frames_go_to_kio() -> None:
    body = _body(COMMON[1])
    for cut in range(len(body)):
        fast = follower_fetch_response.decode(body[:cut], 0)
        assert fast is None, cut
