"""The simulation reads a replica's log through ``SimReplicas.records``, which decodes only
what was appended since its last look unless the log was rewritten.  A follower that
truncates (KIP-101/KIP-279) and re-fetches past its old log end between two looks has
rewritten its log: the invariants must see the new records, not the decoded old ones."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

from weir.common import TopicPartition
from weir.records.builder import build_batch
from weir.sim.replica import SimReplicas
from weir.storage.log import Log, LogConfig

TP = TopicPartition("t0", 0)


def replicas_over(log: Log) -> SimReplicas:
    """A SimReplicas whose broker has only ``log`` (the parts records() looks at)."""
    replicas = SimReplicas.__new__(SimReplicas)
    versions = itertools.count()
    replicas.plane = SimpleNamespace(next_version=lambda: next(versions), stats=Counter())
    replicas.log_manager = SimpleNamespace(all_logs=lambda: {TP: log})
    replicas._decoded = {}
    replicas._generation = {}
    return replicas


def test_records_after_a_truncation_and_refetch_past_the_old_end(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t0-0", LogConfig.from_dict({}), clean_shutdown=True, now_ms=0)
    try:
        replicas = replicas_over(log)
        log.append_as_leader(build_batch([b"a0", b"a1"]), 0, 0)
        log.append_as_leader(build_batch([b"old2", b"old3"]), 0, 0)
        assert replicas.records(TP) == {0: b"a0", 1: b"a1", 2: b"old2", 3: b"old3"}
        # Not looked at meanwhile: truncated to the new leader's epoch end, then the new
        # leader's records replicated beyond the old log end.
        log.truncate_to(2)
        log.append_as_leader(build_batch([b"new2", b"new3"]), 1, 0)
        log.append_as_leader(build_batch([b"new4"]), 1, 0)
        assert replicas.records(TP) == {0: b"a0", 1: b"a1", 2: b"new2", 3: b"new3",
                                        4: b"new4"}
        assert replicas.plane.stats["truncations"] == 1
    finally:
        log.close()
