"""Producer state snapshots: ``<offset>.snapshot`` files in the partition dir (KIP-98).

Kafka's ``ProducerStateManager`` snapshot format (``ProducerSnapshot`` version 1)::

    version i16 (1) | crc u32 (CRC32C of everything after it) |
    count i32 | count × (producerId i64 | epoch i16 | lastSequence i32 | lastOffset i64 |
                         offsetDelta i32 | timestamp i64 | coordinatorEpoch i32 |
                         currentTxnFirstOffset i64)

A snapshot named ``N`` holds the state after every batch below offset ``N`` (the log end
when it was taken).  Only the producer's last batch is kept (Kafka's format), so after a
reload the duplicate window is one batch until new batches arrive.  The log takes one when
it rolls a segment (at the new segment's base offset) and on clean shutdown (at the log
end), loads the newest one at or below its log end when it opens or truncates, and replays
only the batches after it.  A snapshot that fails its CRC or does not parse is deleted and
the next older one is tried (Kafka's ``CorruptSnapshotException`` handling).
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable
from pathlib import Path

import crc32c

from weir.storage.producer_state import BatchMetadata, ProducerEntry

__all__ = [
    "SNAPSHOT_SUFFIX",
    "CorruptSnapshotError",
    "decode_snapshot",
    "delete_snapshots",
    "encode_snapshot",
    "list_snapshots",
    "load_latest",
    "read_snapshot",
    "snapshot_offsets",
    "snapshot_path",
    "write_snapshot",
]

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
VERSION = 1
_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_START = _HEAD.size  # the CRC covers the bytes after version and crc


class CorruptSnapshotError(ValueError):
    """A snapshot file that cannot be trusted."""


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def encode_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    rows = []
    for e in entries:
        last = e.batches[-1] if e.batches else None
        rows.append(_ENTRY.pack(
            e.producer_id, e.epoch,
            last.last_seq if last else -1,
            last.last_offset if last else -1,
            (last.last_offset - last.first_offset) if last else 0,
            e.last_timestamp, e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
        ))
    body = _COUNT.pack(len(rows)) + b"".join(rows)
    return _HEAD.pack(VERSION, crc32c.crc32c(body)) + body


def decode_snapshot(data: bytes) -> list[ProducerEntry]:
    if len(data) < _HEAD.size + _COUNT.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is too short")
    version, crc = _HEAD.unpack_from(data)
    if version != VERSION:
        raise CorruptSnapshotError(f"snapshot contained an unknown file version {version}")
    if crc32c.crc32c(data[_CRC_START:]) != crc:
        raise CorruptSnapshotError("snapshot is corrupt (CRC is no longer valid)")
    (count,) = _COUNT.unpack_from(data, _HEAD.size)
    pos = _HEAD.size + _COUNT.size
    if count < 0 or len(data) - pos != count * _ENTRY.size:
        raise CorruptSnapshotError(f"snapshot claims {count} entries in {len(data)} bytes")
    out = []
    for _ in range(count):
        pid, epoch, last_seq, last_offset, delta, ts, coord, txn_first = \
            _ENTRY.unpack_from(data, pos)
        pos += _ENTRY.size
        entry = ProducerEntry(pid, epoch, coordinator_epoch=coord, last_timestamp=ts,
                              current_txn_first_offset=txn_first if txn_first >= 0 else None)
        if last_offset >= 0:
            first_seq = (last_seq - delta) % 2**31 if last_seq >= 0 else -1
            entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset - delta,
                                               last_offset))
        out.append(entry)
    return out


def write_snapshot(directory: Path, offset: int, entries: Iterable[ProducerEntry], *,
                   sync: bool) -> Path:
    """Write ``<offset>.snapshot`` atomically (temp file, rename); fsync if ``sync``."""
    path = snapshot_path(directory, offset)
    tmp = path.with_name(path.name + ".tmp")
    data = encode_snapshot(entries)
    with open(tmp, "wb") as f:
        f.write(data)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def read_snapshot(path: Path) -> list[ProducerEntry]:
    return decode_snapshot(path.read_bytes())


def list_snapshots(directory: Path) -> list[int]:
    """The offsets of the snapshot files in ``directory``, ascending."""
    return snapshot_offsets(os.listdir(directory))


def snapshot_offsets(names: Iterable[str]) -> list[int]:
    """The offsets of the snapshot files among the file ``names`` of a directory, ascending."""
    out = []
    for name in names:
        if name.endswith(SNAPSHOT_SUFFIX):
            stem = name[: -len(SNAPSHOT_SUFFIX)]
            if len(stem) == 20 and stem.isdigit():
                out.append(int(stem))
    return sorted(out)


def delete_snapshots(directory: Path, *, below: int | None = None,
                     above: int | None = None) -> None:
    """Delete the snapshots with offset < ``below`` and/or > ``above``."""
    for offset in list_snapshots(directory):
        if (below is not None and offset < below) or (above is not None and offset > above):
            snapshot_path(directory, offset).unlink(missing_ok=True)


def load_latest(directory: Path, at_most: int, at_least: int,
                offsets: list[int] | None = None) -> tuple[int, list[ProducerEntry]] | None:
    """The newest readable snapshot with ``at_least ≤ offset ≤ at_most``; corrupt ones
    (and those out of range above ``at_most``) are deleted on the way.  ``offsets``: the
    snapshots of the directory if the caller has listed it already."""
    for offset in reversed(list_snapshots(directory) if offsets is None else offsets):
        path = snapshot_path(directory, offset)
        if offset > at_most:
            path.unlink(missing_ok=True)
            continue
        if offset < at_least:
            return None
        try:
            return offset, read_snapshot(path)
        except (OSError, CorruptSnapshotError) as exc:
            if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError):
                raise
            log.warning("producer snapshot %s is unusable (%s); deleting it", path, exc)
            path.unlink(missing_ok=True)
    return None
