"""Replica byte-equality below the high watermark, read from the brokers' segment files.

Kafka's replication promise: below the high watermark (HW) every in-sync replica holds the
same records.  Weir's followers copy the leader's record batches verbatim, partition leader
epoch included (the leader stamps it once), so the committed prefix of every replica must be
byte-identical.  The HW used is the lowest one checkpointed by the replicas
(``replication-offset-checkpoint``), read from log dirs of stopped (or quiescent) brokers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from weir.records.batch import iter_headers
from weir.storage.checkpoints import read_offset_checkpoint


def replica_batches(log_dir: Path, topic: str, partition: int) -> tuple[int, list[bytes]]:
    """(checkpointed high watermark, raw batches in offset order) of one replica."""
    pdir = Path(log_dir) / f"{topic}-{partition}"
    hws = read_offset_checkpoint(Path(log_dir) / "replication-offset-checkpoint")
    hw = next((v for tp, v in hws.items() if tuple(tp) == (topic, partition)), 0)
    batches = []
    for seg in sorted(pdir.glob("*.log")):
        data = seg.read_bytes()
        for h in iter_headers(data):
            batches.append(data[h.position:h.position + h.size])
    return hw, batches


def base_offset(raw: bytes) -> int:
    return int.from_bytes(raw[0:8], "big", signed=True)


def below(batches: Iterable[bytes], hw: int) -> list[bytes]:
    """The batches that start below ``hw``, in order."""
    kept = []
    for raw in batches:
        if base_offset(raw) >= hw:
            break
        kept.append(raw)
    return kept


def replica_report(log_dirs: Mapping[object, Path], topic: str, partition: int
                   ) -> dict[str, Any] | None:
    """What the checker needs about one partition's replicas, or None if none is found.

    ``{"partition", "hw", "replicas": {name: {"hw", "batches", "digest"}}, "first_diff"}``:
    digests of the batches below the lowest checkpointed HW, and the base offset of the
    first batch where some replica differs from the others (None when all agree).
    """
    found = {name: replica_batches(d, topic, partition) for name, d in log_dirs.items()
             if (Path(d) / f"{topic}-{partition}").exists()}
    if not found:
        return None
    hw = min(h for h, _ in found.values())
    committed = {name: below(batches, hw) for name, (_, batches) in found.items()}
    replicas = {}
    for name, kept in committed.items():
        digest = hashlib.sha256(b"".join(kept)).hexdigest()[:16]
        replicas[str(name)] = {"hw": found[name][0], "batches": len(kept), "digest": digest}
    first_diff = None
    lists = list(committed.values())
    for i in range(max(len(x) for x in lists)):
        column = {x[i] if i < len(x) else None for x in lists}
        if len(column) > 1:
            first_diff = min(base_offset(x[i]) for x in lists if i < len(x))
            break
    return {"partition": partition, "hw": hw, "replicas": replicas, "first_diff": first_diff}


def assert_replicas_agree_below_hw(log_dirs: list[Path], topic: str, partitions: int) -> None:
    """AssertionError when the replicas of some partition differ below the HW."""
    for p in range(partitions):
        report = replica_report({i: d for i, d in enumerate(log_dirs)}, topic, p)
        if report is None:
            continue
        assert report["first_diff"] is None, (
            f"replicas of {topic}-{p} differ below the high watermark {report['hw']}"
            f" (first differing batch at offset {report['first_diff']})")
