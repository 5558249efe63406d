"""Fuzz cases for the decoders that are not kio schemas: record batches and their records,
and the ``__consumer_offsets`` keys and values of the group coordinator.

Each decoder has one error contract: record-batch validation and record decoding raise
``KafkaError`` (CORRUPT_MESSAGE), the group codec raises ``CorruptGroupRecord``. Any other
exception is a finding.
"""

from __future__ import annotations

import gzip
import random
import struct

import crc32c

from weir.common import TopicPartition
from weir.groups import codec as group_codec
from weir.protocol.errors import KafkaError
from weir.records.batch import HEADER_SIZE, validate_produce
from weir.records.builder import build_batch
from weir.records.records import iter_records


def _mutate(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    choice = rng.random()
    if choice < 0.3 and out:
        return bytes(out[:rng.randrange(len(out))])
    if choice < 0.5:
        return rng.randbytes(rng.randint(0, 120))
    for _ in range(rng.randint(1, 4)):
        if out:
            out[rng.randrange(len(out))] = rng.choice((0, 0xFF, 0x7F, 0x80, rng.getrandbits(8)))
    return bytes(out)


def _compressors():
    import lz4.frame
    import snappy
    import zstandard

    return {1: gzip.compress, 2: snappy.compress, 3: lz4.frame.compress,
            4: zstandard.ZstdCompressor().compress}


def compressed(batch: bytes, codec: int) -> bytes:
    """``batch`` (uncompressed, from ``build_batch``) with its records compressed by
    ``codec``, the attributes, length and CRC32C set to match."""
    out = bytearray(batch[:HEADER_SIZE]) + _compressors()[codec](batch[HEADER_SIZE:])
    struct.pack_into(">h", out, 21, codec)  # attributes
    struct.pack_into(">i", out, 8, len(out) - 12)  # batchLength
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def record_batch_case(rng: random.Random) -> bytes:
    values = [rng.randbytes(rng.randint(0, 40)) for _ in range(rng.randint(1, 4))]
    batch = build_batch(values, keys=[rng.randbytes(3) for _ in values])
    codec = rng.randint(0, 4)
    if codec:
        batch = compressed(batch, codec)
    if rng.random() < 0.2:
        return batch  # valid: the decoders must accept it
    if rng.random() < 0.5 and len(batch) > HEADER_SIZE:
        # Corrupt only the records, then fix the CRC: what a hostile client sends.
        body = _mutate(rng, batch[HEADER_SIZE:])
        out = bytearray(batch[:HEADER_SIZE]) + body
        struct.pack_into(">i", out, 8, len(out) - 12)
        struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
        return bytes(out)
    return _mutate(rng, batch)


def group_record_case(rng: random.Random) -> tuple[str, bytes]:
    pick = rng.randrange(3)
    if pick == 0:
        good = group_codec.encode_offset_key("g", TopicPartition("t", rng.randint(0, 9)))
        return "key", _mutate(rng, good)
    if pick == 1:
        good = group_codec.encode_offset_value(group_codec.OffsetAndMetadata(rng.randint(0, 99)))
        return "offset", _mutate(rng, good)
    member = group_codec.MemberRecord("m", None, "c", "/h", 300, 10, b"\0\1", b"\0\2")
    good = group_codec.encode_group_value(group_codec.GroupRecord(
        "consumer", 1, "range", "m", 0, [member] * rng.randint(0, 3)))
    return "group", _mutate(rng, good)


_GROUP_DECODERS = {"key": group_codec.decode_key, "offset": group_codec.decode_offset_value,
                   "group": group_codec.decode_group_value}


def codec_case_outcome(rng: random.Random) -> str:
    """Run one record-batch case and one group-codec case; name the outcome."""
    batch = record_batch_case(rng)
    try:
        validate_produce(batch, 1 << 20)
        list(iter_records(batch))
    except KafkaError:
        pass
    except Exception as exc:  # noqa: BLE001 - a fuzzer reports whatever escapes
        return f"FINDING record batch {batch.hex()}: {exc!r}"
    kind, raw = group_record_case(rng)
    try:
        _GROUP_DECODERS[kind](raw)
    except group_codec.CorruptGroupRecord:
        pass
    except Exception as exc:  # noqa: BLE001 - a fuzzer reports whatever escapes
        return f"FINDING group {kind} {raw.hex()}: {exc!r}"
    return "ok"
