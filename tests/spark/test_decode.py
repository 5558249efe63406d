"""The bulk record-batch decoder (no broker, no Spark): codecs, headers, nulls, ranges, errors."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from tests.spark.records import CODECS, encode_batch
from weir.protocol.errors import KafkaError
from weir.spark import decode as dec
from weir.spark import kernel
from weir.spark.fetch import _next_offset
from weir.spark.schema import arrow_schema

BASE_TS = 1_700_000_000_000

RECORDS = [
    (b"k0", b"v0", [("h", b"1"), ("nothing", None)]),
    (None, b"v1", []),
    (b"k2", None, [("utf8-\u00e9", b"")]),
    (None, None, []),
    (b"", b"", [("a", b"x" * 300)]),  # 300 bytes: two-byte varint lengths
]


def _rows(buf: bytes, lo: int = 0, hi: int = 1 << 62, headers: bool = True) -> list[dict]:
    out = dec.decode(buf, "t", 7, lo, hi, include_headers=headers)
    return [] if out.batch is None else out.batch.to_pylist()


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_every_codec_with_headers_and_nulls(codec):
    buf = encode_batch(100, RECORDS, codec=codec)
    rows = _rows(buf)
    assert [r["offset"] for r in rows] == list(range(100, 105))
    assert [(r["key"], r["value"]) for r in rows] == [(k, v) for k, v, _ in RECORDS]
    assert rows[0]["headers"] == [{"key": "h", "value": b"1"},
                                  {"key": "nothing", "value": None}]
    assert rows[1]["headers"] is None  # no headers: null, as Spark's Kafka source
    assert rows[2]["headers"] == [{"key": "utf8-\u00e9", "value": b""}]
    assert rows[4]["headers"] == [{"key": "a", "value": b"x" * 300}]
    assert {r["topic"] for r in rows} == {"t"} and {r["partition"] for r in rows} == {7}
    assert rows[3]["timestamp"] == dt.datetime.fromtimestamp((BASE_TS + 3) / 1000, dt.UTC)
    assert {r["timestampType"] for r in rows} == {0}


def test_schema_is_the_kafka_schema_with_and_without_headers():
    buf = encode_batch(0, RECORDS)
    for headers in (False, True):
        batch = dec.decode(buf, "t", 0, 0, 10, include_headers=headers).batch
        assert batch.schema == arrow_schema(headers)


def test_range_filter_gaps_and_next_offset():
    # offsets 10, 12, 14 (a compacted batch), then 20..22
    buf = (encode_batch(10, RECORDS[:3], offset_step=2)
           + encode_batch(20, RECORDS[:3]))
    assert [r["offset"] for r in _rows(buf)] == [10, 12, 14, 20, 21, 22]
    assert [r["offset"] for r in _rows(buf, 12, 21)] == [12, 14, 20]
    assert _rows(buf, 15, 20) == []
    out = dec.decode(buf, "t", 0, 0, 100)
    assert out.next_offset == 23 == _next_offset(buf) and out.batches == 2


def test_partial_trailing_batch_is_left_for_the_next_fetch():
    whole = encode_batch(0, RECORDS)
    cut = whole + encode_batch(5, RECORDS)[:70]
    out = dec.decode(cut, "t", 0, 0, 100)
    assert out.batch.num_rows == 5 and out.next_offset == 5 and out.bytes_used == len(whole)
    assert _next_offset(cut) == 5 and _next_offset(whole[:60]) == -1


def test_control_batches_are_skipped_and_log_append_time_applies():
    buf = (encode_batch(0, RECORDS[:2], log_append_time=BASE_TS + 999)
           + encode_batch(2, [(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00", [])], control=True)
           + encode_batch(3, RECORDS[:1]))
    rows = _rows(buf)
    assert [r["offset"] for r in rows] == [0, 1, 3]
    assert [r["timestampType"] for r in rows] == [1, 1, 0]
    stamp = dt.datetime.fromtimestamp((BASE_TS + 999) / 1000, dt.UTC)
    assert rows[0]["timestamp"] == rows[1]["timestamp"] == stamp


def test_many_batches_compiled_equals_python_kernel(monkeypatch):
    values = [(b"%d" % (i % 7), b"v" * (i % 200), [("n", b"%d" % i)] if i % 3 else [])
              for i in range(600)]
    buf = b"".join(encode_batch(i * 100, values[i * 100:(i + 1) * 100],
                                codec=sorted(CODECS)[i % 5]) for i in range(6))
    if dec.COMPILED:
        compiled_kernel = kernel.compiled().decode_kernel
        monkeypatch.setattr(dec, "_kernel_for", lambda _records: compiled_kernel)
    compiled = dec.decode(buf, "t", 0, 50, 550, include_headers=True).batch
    assert compiled.num_rows == 500
    assert compiled.column("value").to_pylist() == [v for _, v, _ in values[50:550]]
    # the same kernel as plain Python gives the same columns
    monkeypatch.setattr(dec, "_kernel_for", lambda _records: kernel.decode_kernel)
    assert dec.decode(buf, "t", 0, 50, 550, include_headers=True).batch.equals(compiled)


def test_crc_mismatch_is_corrupt():
    buf = bytearray(encode_batch(0, RECORDS))
    buf[-1] ^= 0xFF
    with pytest.raises(KafkaError, match="CRC32C"):
        dec.decode(bytes(buf), "t", 0, 0, 10)
    assert dec.decode(bytes(buf), "t", 0, 0, 10, check_crc=False).batch is not None


@pytest.mark.parametrize("where", [61, 62, 66, 70])
def test_malformed_records_raise_corrupt_message(where):
    buf = bytearray(encode_batch(0, [(b"key", b"value" * 20, [("h", b"v")])]))
    buf[where] = 0x7F  # a length or delta that runs past the record
    with pytest.raises(KafkaError) as info:
        dec.decode(bytes(buf), "t", 0, 0, 10, include_headers=True, check_crc=False)
    assert info.value.code.name == "corrupt_message"


def test_record_count_larger_than_the_bytes_is_corrupt():
    buf = bytearray(encode_batch(0, RECORDS[:1]))
    buf[57:61] = (1 << 20).to_bytes(4, "big")  # recordsCount
    with pytest.raises(KafkaError):
        dec.decode(bytes(buf), "t", 0, 0, 1 << 30, check_crc=False)


def test_decompression_is_bounded():
    buf = encode_batch(0, [(None, b"\x00" * 100_000, [])], codec="zstd")
    with pytest.raises(KafkaError, match="more than"):
        dec.decode(buf, "t", 0, 0, 10, max_bytes=10_000)


def test_decoder_is_fast_for_100_byte_values():
    """Throughput of the decoder alone (the bench records the figure; this guards 10x)."""
    import time

    recs = [(b"%d" % (i % 1000), b"x" * 90 + b"%010d" % i, []) for i in range(1000)]
    buf = b"".join(encode_batch(i * 1000, recs) for i in range(20))
    dec.decode(buf, "t", 0, 0, 1 << 62)  # compile or load the cached kernel
    best = 0.0
    for _ in range(5):
        cpu = time.process_time()
        n = dec.decode(buf, "t", 0, 0, 1 << 62).batch.num_rows
        best = max(best, n / max(time.process_time() - cpu, 1e-6))
    if dec.COMPILED:
        assert best > 200_000, f"{best:,.0f} records/s"
    assert np.isfinite(best)


SMALL_READ = """
import sys
from weir.records.builder import build_batch
from weir.spark import decode
batch = build_batch([b"v%d" % i for i in range(50)])
assert decode.decode(batch, "t", 0, 0, 50).batch.num_rows == 50
print("numba" in sys.modules, "pandas" in sys.modules, decode._compiled_kernel is not None)
"""

PRECOMPILED = """
from weir.spark import decode, kernel
decode.precompile()
stats = kernel.compiled().decode_kernel.stats
print(f"hits={sum(stats.cache_hits.values())}", f"misses={sum(stats.cache_misses.values())}")
print("read-only=" + str(sorted(not sig[0].mutable
                                for sig in kernel.compiled().decode_kernel.signatures)))
"""


def test_a_small_read_decodes_without_loading_numba():
    """A count of a few records in a fresh worker must not wait for numba or pandas."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", SMALL_READ], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert out == ["False", "False", "False"]


@pytest.mark.skipif(not dec.COMPILED, reason="numba is not installed")
def test_the_compiled_kernel_takes_over_after_the_plain_budget(monkeypatch):
    monkeypatch.setattr(dec, "_python_records", 0)
    monkeypatch.setattr(dec, "_compiled_kernel", None)
    monkeypatch.setattr(dec, "PYTHON_KERNEL_RECORDS", 150)
    buf = encode_batch(0, [(b"k", b"v%d" % i, []) for i in range(100)])
    assert dec._kernel_for(100) is kernel.decode_kernel
    assert dec.decode(buf, "t", 0, 0, 100).batch.num_rows == 100
    assert dec._kernel_for(100) is kernel.compiled().decode_kernel  # 200 > 150
    assert dec.decode(buf, "t", 0, 0, 100).batch.num_rows == 100
    assert dec._kernel_for(1) is kernel.compiled().decode_kernel


@pytest.mark.skipif(not dec.COMPILED, reason="numba is not installed")
def test_precompile_covers_read_only_and_writable_record_bytes():
    """``python -m weir.spark.kernel`` (run by ``make deps``) leaves both in the cache."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "weir.spark.kernel"], check=True, timeout=300,
                   capture_output=True)
    out = subprocess.run([sys.executable, "-c", PRECOMPILED], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert out == ["hits=2", "misses=0", "read-only=[False,", "True]"]
