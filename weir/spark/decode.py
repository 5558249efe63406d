"""Bulk decoding of Kafka record batches (magic v2) into Arrow record batches.

The bytes of a Fetch response (whole record batches, back to back, as stored in the log)
are decoded without creating one Python object per record:

* Python walks the **batch headers** (61 bytes each; one batch holds many records), checks
  each batch's CRC32C, skips control batches (transaction markers) and decompresses
  gzip / snappy / lz4 / zstd batches with :mod:`weir.records.records`' bounded
  decompression (a decompression bomb is rejected, not allocated).
* One kernel (:mod:`weir.spark.kernel`, compiled with numba) walks the **records** of all
  batches: varints, offset and timestamp deltas, keys, values and headers, copying key and
  value bytes into contiguous buffers and filling Arrow offset and validity arrays.  A
  process decodes its first few thousand records with the same kernel as plain Python, so a
  small read never waits for numba's import and the compiled code to load.
* The columns are assembled with ``pyarrow.Array.from_buffers`` (no copy).

Without numba the kernel always runs as plain Python (correct, about 100 times slower).
Malformed bytes raise :class:`~weir.protocol.errors.KafkaError` (CORRUPT_MESSAGE), never an
out-of-bounds read: the kernel checks every length against its batch's end.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import (
    CONTROL_BIT,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
)
from weir.records.records import MAX_DECOMPRESSED_BYTES, _decompress
from weir.spark import kernel

log = logging.getLogger(__name__)

# Whether reads of more than a few thousand records use the compiled kernel.
COMPILED = kernel.numba_available()
# Records a process decodes with the plain Python kernel (a few ms per hundred records)
# before it loads the compiled one (about a second: numba's import and the cached code).
PYTHON_KERNEL_RECORDS = 5_000

_python_records = 0
_compiled_kernel: Any = None

_HEAD = struct.Struct(">qiibIhiqqqhii")
_MAGIC_OFFSET = 16


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, message)


@dataclass
class Decoded:
    """Columns of the records kept from one buffer, and where reading goes on."""

    batch: Any  # pyarrow.RecordBatch (the Kafka schema), or None when no record was kept
    next_offset: int  # the offset after the last whole batch seen (the next fetch offset)
    batches: int  # whole batches walked
    bytes_used: int  # bytes of whole batches walked


@dataclass
class _Bodies:
    buf: Any
    starts: list[int]
    ends: list[int]
    counts: list[int]
    base_offsets: list[int]
    base_ts: list[int]
    ts_override: list[int]
    ts_type: list[int]


def _walk(buf: bytes | memoryview, check_crc: bool, max_bytes: int) -> tuple[_Bodies, int, int,
                                                                            int]:
    """Batch headers of ``buf``: bodies to decode, next offset, batches and bytes walked."""
    import crc32c

    view = memoryview(buf)
    pos = 0
    next_offset = -1
    walked = 0
    parts: list[Any] = []
    in_place: list[tuple[int, int]] = []  # where each body is in ``buf``
    b = _Bodies(buf, [], [], [], [], [], [], [])
    compressed = False
    size_total = len(view)
    body_pos = 0
    while pos + HEADER_SIZE <= size_total:
        (base_offset, batch_length, _epoch, magic, crc, attributes, last_delta, base_ts,
         max_ts, _pid, _pepoch, _seq, count) = _HEAD.unpack_from(view, pos)
        size = batch_length + LOG_OVERHEAD
        if magic != 2:
            raise _corrupt(f"batch at offset {base_offset} has magic {magic}; only v2 is read")
        if size < HEADER_SIZE:
            raise _corrupt(f"batch at offset {base_offset} has length {batch_length}")
        if pos + size > size_total:
            break  # a trailing partial batch (the fetch's byte limit cut it)
        if check_crc and crc32c.crc32c(view[pos + CRC_OFFSET + 4:pos + size]) != crc:
            raise _corrupt(f"batch at offset {base_offset} fails its CRC32C check")
        walked += 1
        next_offset = base_offset + last_delta + 1
        if not attributes & CONTROL_BIT and count > 0:
            codec = attributes & 0x07
            raw = view[pos + HEADER_SIZE:pos + size]
            if codec:
                compressed = True
                raw = _decompress(codec, bytes(raw), max_bytes)
            parts.append(raw)
            in_place.append((pos + HEADER_SIZE, pos + size))
            b.starts.append(body_pos)
            body_pos += len(raw)
            b.ends.append(body_pos)
            b.counts.append(count)
            b.base_offsets.append(base_offset)
            b.base_ts.append(base_ts)
            log_append = bool(attributes & TIMESTAMP_TYPE_BIT)
            b.ts_override.append(max_ts if log_append else -1)
            b.ts_type.append(1 if log_append else 0)
        pos += size
    if compressed:
        b.buf = b"".join(parts)
    else:  # the kernel reads the bodies where they are: no copy of the fetched bytes
        b.buf = view[:pos]
        b.starts = [start for start, _ in in_place]
        b.ends = [end for _, end in in_place]
    return b, next_offset, walked, pos


def decode(buf: bytes | memoryview, topic: str, partition: int, lo: int, hi: int, *,
           include_headers: bool = False, check_crc: bool = True,
           max_bytes: int = MAX_DECOMPRESSED_BYTES) -> Decoded:
    """Decode the whole v2 batches of ``buf`` into one Arrow batch of records in [lo, hi).

    A trailing partial batch is ignored (``next_offset`` then points at it).
    """
    bodies, next_offset, walked, used = _walk(buf, check_crc, max_bytes)
    table = _columns(bodies, topic, partition, lo, hi, include_headers)
    return Decoded(table, next_offset, walked, used)


def _kernel_for(records: int) -> Any:
    """The plain kernel while this process has decoded few records, then the compiled one."""
    global _python_records, _compiled_kernel
    if _compiled_kernel is None and COMPILED and (
            _python_records + records > PYTHON_KERNEL_RECORDS):
        _compiled_kernel = kernel.compiled().decode_kernel
    if _compiled_kernel is not None:
        return _compiled_kernel
    _python_records += records
    return kernel.decode_kernel


def precompile() -> list[str]:
    """Compile the kernel (or load it from numba's cache) for the types reads pass it.

    The record bytes come as a read-only array (a fetched ``bytes`` buffer) or a writable
    one (a ``bytearray``); numba compiles one signature for each."""
    global _compiled_kernel
    from weir.records.builder import build_batch

    _compiled_kernel = kernel.compiled().decode_kernel
    batch = build_batch([b"value"], keys=[b"key"])
    for buf in (batch, bytearray(batch)):
        for headers in (False, True):
            decode(buf, "t", 0, 0, 1, include_headers=headers)
    return [str(sig) for sig in _compiled_kernel.signatures]


def _columns(b: _Bodies, topic: str, partition: int, lo: int, hi: int,
             include_headers: bool) -> Any:
    import pyarrow as pa

    from weir.spark.schema import arrow_schema

    if not b.counts:
        return None
    body = np.frombuffer(b.buf, dtype=np.uint8)
    cap = min(sum(b.counts), len(body) // 7 + 1)  # a record takes 7 bytes or more
    size = len(body)
    hcap = (size // 2 + 1) if include_headers else 1
    out = {
        "offsets": np.empty(cap, np.int64), "stamps": np.empty(cap, np.int64),
        "batch_of": np.empty(cap, np.int32),
        "key_off": np.empty(cap + 1, np.int32), "key_valid": np.empty(cap, np.bool_),
        "key_data": np.empty(size, np.uint8),
        "val_off": np.empty(cap + 1, np.int32), "val_valid": np.empty(cap, np.bool_),
        "val_data": np.empty(size, np.uint8),
        "hdr_off": np.zeros(cap + 1 if include_headers else 1, np.int32),
        "hk_off": np.empty(hcap + 1, np.int32), "hk_data": np.empty(size if include_headers
                                                                     else 1, np.uint8),
        "hv_off": np.empty(hcap + 1, np.int32), "hv_valid": np.empty(hcap, np.bool_),
        "hv_data": np.empty(size if include_headers else 1, np.uint8),
    }
    i64 = np.int64
    err, n, kd, vd, nh, hkd, hvd = _kernel_for(cap)(
        body, np.asarray(b.starts, i64), np.asarray(b.ends, i64), np.asarray(b.counts, i64),
        np.asarray(b.base_offsets, i64), np.asarray(b.base_ts, i64),
        np.asarray(b.ts_override, i64), lo, hi, include_headers, *out.values())
    if err:
        raise _corrupt(f"{topic}-{partition}: {kernel.ERRORS[err]} (record {n} of the fetch)")
    if n == 0:
        return None
    schema = arrow_schema(include_headers)
    arrays = [
        _binary(pa, n, out["key_off"], out["key_valid"], out["key_data"][:kd]),
        _binary(pa, n, out["val_off"], out["val_valid"], out["val_data"][:vd]),
        pa.repeat(_string_scalar(pa, topic), n),
        _fixed(pa, pa.int32(), np.full(n, partition, np.int32)),
        _fixed(pa, pa.int64(), out["offsets"][:n]),
        _fixed(pa, schema.field("timestamp").type, out["stamps"][:n] * 1000),
        _fixed(pa, pa.int32(), np.asarray(b.ts_type, np.int32)[out["batch_of"][:n]]),
    ]
    if include_headers:
        arrays.append(_headers(pa, schema.field("headers").type, n, nh, out, hkd, hvd))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _fixed(pa: Any, kind: Any, values: np.ndarray) -> Any:
    """A column without nulls over ``values``' memory.  ``pa.array`` and ``pa.scalar`` would
    do too, but their first call imports pandas: up to a second of a fresh Spark worker's
    first task."""
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])


def _string_scalar(pa: Any, text: str) -> Any:
    """``pa.scalar(text)`` without its conversion from Python objects (which imports pandas)."""
    data = text.encode()
    one = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(
        np.array([0, len(data)], np.int32)), pa.py_buffer(data)])
    return one[0]


def _validity(pa: Any, valid: np.ndarray) -> tuple[Any, int]:
    nulls = int(valid.size - np.count_nonzero(valid))
    if not nulls:
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), nulls


def _binary(pa: Any, n: int, offsets: np.ndarray, valid: np.ndarray, data: np.ndarray,
            kind: Any = None) -> Any:
    bitmap, nulls = _validity(pa, valid[:n])
    return pa.Array.from_buffers(kind or pa.binary(), n,
                                 [bitmap, pa.py_buffer(offsets[:n + 1]), pa.py_buffer(data)],
                                 null_count=nulls)


def _headers(pa: Any, kind: Any, n: int, nh: int, out: dict, hkd: int, hvd: int) -> Any:
    """``array<struct<key string, value binary>>``, null for a record without headers."""
    keys = _binary(pa, nh, out["hk_off"], np.ones(nh, np.bool_), out["hk_data"][:hkd],
                   pa.string())
    try:
        keys.validate(full=True)  # header keys are Kafka Strings: UTF-8
    except pa.ArrowInvalid as exc:
        raise _corrupt(f"a header key is not UTF-8: {exc}") from exc
    values = _binary(pa, nh, out["hv_off"], out["hv_valid"], out["hv_data"][:hvd])
    struct_type = kind.value_type
    entries = pa.StructArray.from_arrays([keys, values], fields=list(struct_type))
    list_off = out["hdr_off"][:n + 1]
    has = np.diff(list_off) > 0
    bitmap, nulls = _validity(pa, has)
    return pa.Array.from_buffers(kind, n, [bitmap, pa.py_buffer(list_off)],
                                 null_count=nulls, children=[entries])
