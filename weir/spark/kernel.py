"""The record kernel of :mod:`weir.spark.decode`: one pass over the records of v2 batches.

This module is plain Python.  :func:`compiled` loads a second copy of the same file under
the name ``weir.spark.kernel_numba``, where the decorator is numba's ``njit``: the compiled
kernel.  The plain copy decodes small reads (a count of a few hundred records must not pay
for importing numba and loading the compiled kernel, about a second in a fresh Python
worker); the compiled copy decodes everything once a process has decoded more than a few
thousand records.  Both run the same source, so they give the same columns.

Compiled code is cached next to this file (numba ``cache=True``, ``__pycache__``) or, where
that is read-only, in numba's per-user cache directory.  ``python -m weir.spark.kernel``
compiles it ahead of time (``make deps`` runs it): without the cache, the first large read
of every fresh installation would spend seconds compiling.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

import numpy as np

COMPILED_NAME = "weir.spark.kernel_numba"
NUMBA = __name__ == COMPILED_NAME  # this copy is the compiled one

if NUMBA:
    from numba import njit as _jit
else:
    def _jit(*_args: Any, **_kwargs: Any) -> Any:
        return lambda fn: fn

# Error codes of the kernel (0 = fine): what was wrong, for the exception's message.
ERRORS = {
    1: "a varint runs past the end of its batch",
    2: "a record length runs past the end of its batch",
    3: "a key runs past the end of its record",
    4: "a value runs past the end of its record",
    5: "a header runs past the end of its record",
    6: "a batch holds more records than its bytes can",
}


@_jit(cache=True, inline="always")
def varint(buf, pos, end):
    """Zig-zag varint at ``pos`` before ``end``: (value, next position), position -1 if bad."""
    raw = 0
    shift = 0
    while True:
        if pos >= end or shift > 63:
            return 0, -1
        b = np.int64(buf[pos])
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return ((raw >> 1) & 0x7FFFFFFFFFFFFFFF) ^ -(raw & 1), pos
        shift += 7


@_jit(cache=True, nogil=True)
def decode_kernel(body, starts, ends, counts, base_offsets, base_ts, ts_override,
                   lo, hi, want_headers, offsets, stamps, batch_of,
                   key_off, key_valid, key_data, val_off, val_valid, val_data,
                   hdr_off, hk_off, hk_data, hv_off, hv_valid, hv_data):
    """Decode the records of every batch body ``[starts[i], ends[i])`` of ``body``.

    Records with offsets outside ``[lo, hi)`` are dropped.  Fills the output arrays (sized
    by the caller from the record counts and the body size) and returns (error code, rows,
    key bytes, value bytes, headers, header key bytes, header value bytes).
    """
    n = 0
    kd = 0
    vd = 0
    nh = 0
    hkd = 0
    hvd = 0
    key_off[0] = 0
    val_off[0] = 0
    hdr_off[0] = 0
    hk_off[0] = 0
    hv_off[0] = 0
    for b in range(starts.shape[0]):
        pos = starts[b]
        end = ends[b]
        for _ in range(counts[b]):
            length, pos = varint(body, pos, end)
            if pos < 0:
                return 1, n, kd, vd, nh, hkd, hvd
            rec_end = pos + length
            if length < 1 or rec_end > end:
                return 2, n, kd, vd, nh, hkd, hvd
            pos += 1  # attributes (unused in v2)
            ts_delta, pos = varint(body, pos, rec_end)
            if pos < 0:
                return 1, n, kd, vd, nh, hkd, hvd
            off_delta, pos = varint(body, pos, rec_end)
            if pos < 0:
                return 1, n, kd, vd, nh, hkd, hvd
            offset = base_offsets[b] + off_delta
            keep = lo <= offset < hi
            klen, pos = varint(body, pos, rec_end)
            if pos < 0:
                return 1, n, kd, vd, nh, hkd, hvd
            if klen < -1 or klen > rec_end - pos:
                return 3, n, kd, vd, nh, hkd, hvd
            kpos = pos
            if klen > 0:
                pos += klen
            vlen, pos = varint(body, pos, rec_end)
            if pos < 0:
                return 1, n, kd, vd, nh, hkd, hvd
            if vlen < -1 or vlen > rec_end - pos:
                return 4, n, kd, vd, nh, hkd, hvd
            vpos = pos
            if vlen > 0:
                pos += vlen
            if keep:
                if n >= offsets.shape[0]:
                    return 6, n, kd, vd, nh, hkd, hvd
                offsets[n] = offset
                stamps[n] = ts_override[b] if ts_override[b] >= 0 else base_ts[b] + ts_delta
                batch_of[n] = b
                key_valid[n] = klen >= 0
                if klen > 0:
                    key_data[kd:kd + klen] = body[kpos:kpos + klen]
                    kd += klen
                key_off[n + 1] = kd
                val_valid[n] = vlen >= 0
                if vlen > 0:
                    val_data[vd:vd + vlen] = body[vpos:vpos + vlen]
                    vd += vlen
                val_off[n + 1] = vd
            if keep and want_headers:
                count, pos = varint(body, pos, rec_end)
                if pos < 0 or count < 0 or count > rec_end - pos:
                    return 5, n, kd, vd, nh, hkd, hvd
                for _h in range(count):
                    hk, pos = varint(body, pos, rec_end)
                    if pos < 0 or hk < 0 or hk > rec_end - pos:
                        return 5, n, kd, vd, nh, hkd, hvd
                    for i in range(hk):
                        hk_data[hkd + i] = body[pos + i]
                    hkd += hk
                    pos += hk
                    hv, pos = varint(body, pos, rec_end)
                    if pos < 0 or hv < -1 or hv > rec_end - pos:
                        return 5, n, kd, vd, nh, hkd, hvd
                    hv_valid[nh] = hv >= 0
                    for i in range(max(hv, 0)):
                        hv_data[hvd + i] = body[pos + i]
                    hvd += max(hv, 0)
                    pos += max(hv, 0)
                    nh += 1
                    hk_off[nh] = hkd
                    hv_off[nh] = hvd
                hdr_off[n + 1] = nh
            if keep:
                n += 1
            pos = rec_end
    return 0, n, kd, vd, nh, hkd, hvd


def numba_available() -> bool:
    """Whether numba can be imported (it is a dependency of the ``spark`` extra)."""
    return importlib.util.find_spec("numba") is not None


def compiled() -> Any:
    """The compiled copy of this module (imports numba; loads or compiles the kernel)."""
    module = sys.modules.get(COMPILED_NAME)
    if module is None:
        spec = importlib.util.spec_from_file_location(COMPILED_NAME, __file__)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[COMPILED_NAME] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[COMPILED_NAME]
            raise
    return module


if __name__ == "__main__":
    if not numba_available():
        print("numba is not installed: reads decode records with the plain Python kernel")
        sys.exit(0)
    from weir.spark.decode import precompile

    signatures = precompile()
    print(f"weir.spark: record kernel compiled for {len(signatures)} argument types"
          " (numba cache)")
