"""The hand-written Produce request decoder against kio's, on every version it reads, and on
truncated, corrupted and unusual bodies (where it must give way to kio, never crash)."""

from __future__ import annotations

import datetime
import random

import pytest

from weir.protocol import codec, produce_request
from weir.server.handlers import REGISTRY


def _body(version: int, transactional_id: str | None = "tx-é",
          records: list[bytes | None] | None = None) -> bytes:
    request_cls, _ = REGISTRY[0].schemas(version)
    records = [b"\x00" * 61 + b"batch-1", None, b""] if records is None else records
    request = codec.build(request_cls, {
        "transactional_id": transactional_id, "acks": -1,
        "timeout": datetime.timedelta(milliseconds=30_000),
        "topic_data": [
            {"name": "alpha", "partition_data": [{"index": i, "records": r}
                                                 for i, r in enumerate(records)]},
            {"name": "béta", "partition_data": [{"index": 7, "records": b"x" * 300}]},
        ],
    })
    return codec.encode_body(request)


def _same(fast, kio) -> None:
    assert fast.transactional_id == kio.transactional_id
    assert fast.acks == kio.acks
    assert fast.timeout == kio.timeout
    assert fast.timeout_ms == int(kio.timeout.total_seconds() * 1000)
    assert [(t.name, [(p.index, p.records) for p in t.partition_data])
            for t in fast.topic_data] == \
        [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in kio.topic_data]


@pytest.mark.parametrize("version", range(3, 12))
@pytest.mark.parametrize("transactional_id", [None, "", "tx-é"])
def test_decodes_what_kio_decodes(version, transactional_id):
    request_cls, _ = REGISTRY[0].schemas(version)
    body = b"prefix" + _body(version, transactional_id)
    fast = produce_request.decode(body, 6, version)
    assert fast is not None
    _same(fast, codec.decode_body(request_cls, body, 6))


@pytest.mark.parametrize("version", range(3, 12))
def test_a_memoryview_frame_decodes_as_bytes_do(version):
    """A large request frame comes from the socket server as a read-only memoryview: the
    same request, with names as str and each partition's records as bytes of their own."""
    request_cls, _ = REGISTRY[0].schemas(version)
    body = b"prefix" + _body(version, "tx-é")
    fast = produce_request.decode(memoryview(body).toreadonly(), 6, version)
    assert fast is not None
    _same(fast, codec.decode_body(request_cls, body, 6))
    assert all(type(p.records) is bytes for t in fast.topic_data for p in t.partition_data
               if p.records is not None)
    assert isinstance(fast.topic_data[1].name, str)


@pytest.mark.parametrize("version", range(3, 12))
def test_large_records_and_empty_topic_list(version):
    request_cls, _ = REGISTRY[0].schemas(version)
    body = _body(version, None, [bytes(range(256)) * 200])
    _same(produce_request.decode(body, 0, version), codec.decode_body(request_cls, body))
    empty = codec.encode_body(codec.build(request_cls, {
        "acks": 1, "timeout": datetime.timedelta(0), "topic_data": []}))
    fast = produce_request.decode(empty, 0, version)
    assert fast is not None and fast.topic_data == () and fast.acks == 1


@pytest.mark.parametrize("version", [0, 1, 2, 12])
def test_versions_it_does_not_read_go_to_kio(version):
    assert produce_request.decode(b"\x00" * 64, 0, version) is None


@pytest.mark.parametrize("version", range(3, 12))
def test_every_truncation_gives_way_to_kio(version):
    body = _body(version)
    for cut in range(len(body)):
        assert produce_request.decode(body[:cut], 0, version) is None


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_corrupted_bodies_never_crash_and_agree_with_kio(version):
    """Whatever the fast decoder accepts, kio accepts with the same content."""
    request_cls, _ = REGISTRY[0].schemas(version)
    body = _body(version)
    rng = random.Random(version)
    for _ in range(3000):
        bad = bytearray(body)
        for _ in range(rng.randint(1, 3)):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        bad = bytes(bad)
        fast = produce_request.decode(bad, 0, version)
        if fast is None:
            continue
        _same(fast, codec.decode_body(request_cls, bad))


def test_unusual_shapes_go_to_kio():
    body = _body(9)
    # A tagged field on the request (its last byte is the empty tagged-field section).
    assert produce_request.decode(body[:-1] + b"\x01\x00\x00", 0, 9) is None
    # Not UTF-8 in a topic name (v3: int16 length strings).
    classic = _body(3, None)
    at = classic.index(b"alpha")
    assert produce_request.decode(classic[:at] + b"\xff" + classic[at + 1:], 0, 3) is None
    # A null topic array (v3: count -1).
    assert produce_request.decode(b"\xff\xff" + b"\x00\x01" + b"\x00" * 4 + b"\xff" * 4,
                                  0, 3) is None
