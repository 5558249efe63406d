"""Record decoding of bytes a hostile client produced: one error type (CORRUPT_MESSAGE),
decompression bounded. Kafka's LogValidator is the reference for rejecting such batches."""

from __future__ import annotations

import random

import pytest

from fuzz.codecs import codec_case_outcome, compressed
from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.builder import build_batch
from weir.records.records import iter_records

CODECS = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


@pytest.mark.parametrize("codec", CODECS)
def test_compressed_batches_decode(codec):
    batch = compressed(build_batch([b"a" * 10, b"b"], keys=[b"k", None]), codec)
    assert [(r.key, r.value) for r in iter_records(batch)] == [(b"k", b"a" * 10), (None, b"b")]


@pytest.mark.parametrize("codec", CODECS)
def test_decompression_bomb_is_rejected_at_the_bound(codec):
    bomb = compressed(build_batch([b"\0" * (1 << 20)] * 4), codec)
    assert len(bomb) < (4 << 20) // 16  # small on the wire
    with pytest.raises(KafkaError, match=f"{CODECS[codec]} .*more than 1048576") as err:
        list(iter_records(bomb, max_bytes=1 << 20))
    assert err.value.code == ErrorCode.corrupt_message


def test_record_length_past_the_batch_is_corrupt():
    batch = bytearray(build_batch([b"value"]))
    batch[61] = 0x7E  # the first record's length varint: 63 bytes, far more than present
    with pytest.raises(KafkaError, match="record of 63 bytes"):
        list(iter_records(bytes(batch)))


def test_garbage_compressed_payload_is_corrupt():
    batch = bytearray(compressed(build_batch([b"x" * 50]), 1))
    batch[70:80] = b"\xff" * 10
    with pytest.raises(KafkaError, match="gzip data does not decompress"):
        list(iter_records(bytes(batch)))


def test_fuzzed_batches_and_group_records_keep_their_error_contracts():
    rng = random.Random(5)
    outcomes = [codec_case_outcome(rng) for _ in range(3000)]
    assert [o for o in outcomes if o != "ok"] == []
