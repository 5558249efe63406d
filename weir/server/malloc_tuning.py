"""The C allocator's settings for a broker process: freed request buffers stay in the heap.

A broker's large buffers come from the C allocator (CPython hands objects above 512 bytes to
``malloc``): a produce request's frame and its records, a follower's fetch response.  glibc
gives memory back to the kernel eagerly: an allocation above ``M_MMAP_THRESHOLD`` gets its
own ``mmap`` (unmapped when freed), and once more than ``M_TRIM_THRESHOLD`` is free at the
top of the heap, the top is released with ``brk``.  Both thresholds adapt upward to the
largest block freed so far, which keeps one buffer at a time in the heap, but not several:
a leader holding five 256 KiB produce requests while they wait for replication frees them
out of order, the free top of the heap passes twice the largest block, it is released, and
the next requests fault every page of it in again, zero-filled by the kernel.  Measured on
a 3-broker cluster (``bench/replication.py``'s pipelined producer, 200 MB per run): the
RF 3 leader took 36,000-55,000 page faults per run (about one per 4 KiB produced) and
0.32-0.33 s of system CPU; with these settings, 18-174 faults and 0.23-0.27 s.

:func:`keep_freed_memory` fixes both thresholds (which also stops their adapting): a
block up to 32 MiB (glibc's largest allowed) comes from the heap, and up to 64 MiB of free
heap top is kept for the next requests.  The JVM under Kafka does the same in its way: its
heap is reserved once and never handed back per request.  Frames larger than 32 MiB (up to
``socket.request.max.bytes``) still get their own mapping, returned when freed.
"""

from __future__ import annotations

import ctypes

# glibc's <malloc.h> parameter numbers for mallopt()
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

TRIM_THRESHOLD_BYTES = 64 << 20
MMAP_THRESHOLD_BYTES = 32 << 20  # glibc refuses more than HEAP_MAX_SIZE / 2 (32 MiB on 64-bit)


def keep_freed_memory() -> bool:
    """Fix glibc's trim and mmap thresholds (above); False where the C library has no
    ``mallopt`` (not glibc) or refused a value, and nothing changed then."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
                and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
