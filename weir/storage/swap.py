"""Crash-safe replacement of segments by the log cleaner's output, and its recovery.

Kafka's ``UnifiedLog.replaceSegments`` protocol with its file names:

1. the cleaner writes each group of old segments into one new segment whose three files
   are named ``<base>.log.cleaned``, ``.index.cleaned``, ``.timeindex.cleaned`` (``base``
   = the group's first base offset) and fsyncs them;
2. each is renamed ``.cleaned`` → ``.swap`` and the directory fsynced: from here the new
   segment is the truth;
3. the old segments' files are deleted (Kafka renames them ``.deleted`` first and deletes
   them later; Weir deletes at once, the same as its retention);
4. ``.swap`` → the final names (indexes first, the ``.log`` last), directory fsynced.

Where each step runs (Kafka's ``replaceSegments`` holds the log lock for all of it): the
log swaps the segments in its segment list and closes the old segments' descriptors on the
event loop (``Log.swap_in_cleaned``, after its truncation check), then steps 2-4 run on the
log cleaner's storage thread, so no rename, unlink or directory fsync stalls the loop.
Reads and appends go on meanwhile (they use the new segments' open descriptors, valid across
renames, and the active segment, which a cleaning never touches); any log operation that
deletes, renames, truncates or flushes segment files first waits for that thread's work
(``Log._await_file_work``).  A crash at any point leaves a state the load below turns into
either the old segments or the finished swap.

Loading a partition (``complete_interrupted_swaps``, as Kafka's ``LogLoader``): ``.cleaned``
files are deleted (the old segments are intact); every ``<base>.log.swap`` is validated
(recovered), the segment files with a base offset from the smallest swap base to the
largest swap next offset are deleted (the old segments they were built from) and the swaps
renamed.  An old segment past that range (its records all cleaned away) survives: its
records are older values of keys written again later, so the log stays valid, only less
compacted until the next cleaning (the same as Kafka).  Index ``.swap`` files without their
``.log.swap`` are deleted (the ``.log`` was renamed last; its indexes are rebuilt).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from weir.storage.checkpoints import fsync_dir
from weir.storage.segment import LogSegment, segment_file_name

__all__ = [
    "CLEANED_SUFFIX",
    "SWAP_SUFFIX",
    "complete_interrupted_swaps",
    "replace_files",
]

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_KINDS = (".log", ".index", ".timeindex", ".txnindex")


def _base_of(name: str) -> int | None:
    stem = name.split(".", 1)[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def replace_files(directory: Path, cleaned: list[LogSegment], old: list[LogSegment], *,
                  crash_at: Callable[[str], None] | None = None) -> None:
    """Steps 2-4 above for segments ``cleaned`` (flushed, suffix ``.cleaned``) replacing
    ``old`` (already out of the log's segment list, their descriptors closed).  Touches only
    these segments' files, so it may run on another thread than the log's.

    ``crash_at(step)`` is a test hook called at each point a crash can interrupt."""
    hook = crash_at or (lambda _step: None)
    for seg in cleaned:
        seg.change_suffix(SWAP_SUFFIX)
        hook("renamed-to-swap")
    fsync_dir(directory)
    hook("swap-durable")
    for seg in old:
        seg.delete()
        hook("old-deleted")
    for seg in cleaned:
        seg.change_suffix("")
        hook("swap-renamed")
    fsync_dir(directory)


def complete_interrupted_swaps(directory: Path, *, index_interval_bytes: int,
                               max_index_bytes: int, now_ms: int) -> None:
    """Finish or roll back what a crash during ``replace_files`` left (see above)."""
    swaps: list[int] = []
    for path in sorted(directory.iterdir()):
        name = path.name
        if name.endswith(CLEANED_SUFFIX):
            log.info("deleting %s, left by an interrupted log cleaning", path)
            path.unlink(missing_ok=True)
        elif name.endswith(".log" + SWAP_SUFFIX) and _base_of(name) is not None:
            swaps.append(_base_of(name) or 0)
    opened = [LogSegment.open(directory, base, index_interval_bytes=index_interval_bytes,
                              max_index_bytes=max_index_bytes, now_ms=now_ms, recover=True,
                              suffix=SWAP_SUFFIX)[0] for base in swaps]
    if opened:
        low = min(seg.base_offset for seg in opened)
        high = max(max(seg.next_offset, seg.base_offset + 1) for seg in opened)
        for path in list(directory.iterdir()):
            other = _base_of(path.name)
            if other is not None and low <= other < high and path.name.endswith(_KINDS):
                log.info("deleting %s, replaced by a cleaned segment", path)
                path.unlink(missing_ok=True)
    for seg in opened:
        base = seg.base_offset
        seg.flush()
        seg.change_suffix("")
        seg.close()
        log.warning("completed the interrupted swap of cleaned segment %s",
                    directory / segment_file_name(base, ".log"))
    for path in list(directory.iterdir()):
        if path.name.endswith(SWAP_SUFFIX):  # an index whose .log was already renamed
            path.unlink(missing_ok=True)
    if swaps:
        fsync_dir(directory)

