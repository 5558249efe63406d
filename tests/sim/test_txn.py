"""Transactions under simulation (``--txn``): the production transaction coordinator, producer
ids, marker sender and transaction verification on every simulated broker, transactional
producers, and the transactions' invariants, each catching a planted bug."""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from typing import Any

import pytest

from weir.protocol.errors import ErrorCode
from weir.records.builder import build_batch
from weir.records.control import build_marker
from weir.server.handlers import write_txn_markers
from weir.sim import SimResult, run_seed
from weir.sim.txn import txn_config
from weir.sim.txn_invariants import read_committed
from weir.storage.config import LogConfig
from weir.storage.log import Log
from weir.storage.producer_state import AppendOrigin
from weir.transactions.markers import MarkerSender
from weir.transactions.state import TransactionMetadata

# Seeds whose runs together commit, abort, move coordinators under the producers, fence
# instances and pause one transaction past its timeout (seed 11 has the pause).
SEEDS = (0, 2, 11)


@functools.cache
def _run(seed: int) -> SimResult:
    """One run per seed for the tests of this module (a seed is about 3 s of CPU)."""
    return run_seed(seed, txn_config())


def _violations(seeds: range, marker: str) -> list[str]:
    """The violations naming ``marker`` of the first of ``seeds`` that has any."""
    for seed in seeds:
        found = [v for v in run_seed(seed, txn_config()).violations if marker in v]
        if found:
            return found
    return []


@pytest.mark.parametrize("seed", SEEDS)
def test_seed_holds_transaction_invariants(seed: int) -> None:
    result = _run(seed)
    assert result.ok, "\n".join(result.violations + ["faults:"] + result.faults)
    assert result.data_stats["txn_inits"] > 0


def test_txn_runs_commit_abort_time_out_and_fence() -> None:
    stats: Counter[str] = Counter()
    for seed in SEEDS:
        stats.update(_run(seed).data_stats)
    assert stats["txn_committed"] > 0 and stats["txn_aborted"] > 0
    assert stats["txn_produce_acked"] > 0
    # Coordinators moved under the producers, and producers were fenced (by a newer
    # epoch, or by the coordinator aborting a transaction that outlived its timeout).
    assert stats["txn_init_not_coordinator"] + stats["txn_end_not_coordinator"] > 0
    assert stats["txn_fenced_instances"] > 0 and stats["txn_pauses"] > 0


def test_txn_seed_replays_in_another_process() -> None:
    """``python -m weir.sim --txn`` prints the same faults and figures whatever the hash
    seed (the coordinator sends a round's markers in partition order, not a set's)."""
    import os
    import subprocess
    import sys

    outputs = set()
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        done = subprocess.run([sys.executable, "-m", "weir.sim", "--seed", "1", "--txn",
                               "--faults", "--stats"], env=env, capture_output=True, text=True,
                              timeout=300, check=True)
        outputs.add(done.stdout)
    assert len(outputs) == 1
    out = outputs.pop()
    assert "seed 1: ok" in out and "txn_inits" in out and "new instance of" in out
    assert f"({_run(1).steps} steps" in out  # the same run as from the API


# -- the consumer's view ---------------------------------------------------------------------


def test_read_committed_reads_below_the_lso_without_aborted_records(tmp_path: Any) -> None:
    """Below the LSO: plain records, committed transactions, and an aborted transaction's
    records dropped even where its ABORT marker lies past the LSO; nothing at or past it."""
    plog = Log.open(tmp_path / "t-0", LogConfig(), clean_shutdown=True, now_ms=0)

    def txn(pid: int, *values: bytes) -> None:
        plog.append_as_leader(build_batch(list(values), producer_id=pid, producer_epoch=0,
                                          base_sequence=0, transactional=True), 0, 0)

    def end(pid: int, committed: bool) -> None:
        plog.append_as_leader(build_marker(pid, 0, committed, 0, 0), 0, 0,
                              AppendOrigin.COORDINATOR)
    txn(1, b"a1", b"a2")  # 0-1, committed at 4
    plog.append_as_leader(build_batch([b"plain"]), 0, 0)  # 2
    txn(2, b"b1")  # 3, aborted at 6, past the LSO
    end(1, True)  # 4
    txn(3, b"c1")  # 5, still open: the LSO
    end(2, False)  # 6
    plog.update_high_watermark(plog.log_end_offset)
    assert plog.last_stable_offset == 5
    assert read_committed(plog) == [(0, b"a1"), (1, b"a2"), (2, b"plain")]
    plog.close()


# -- planted bugs ----------------------------------------------------------------------------


def test_lso_passing_open_transactions_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plant a partition whose last stable offset is its high watermark, open transactions
    or not: read_committed exposes records of undecided transactions."""
    monkeypatch.setattr(Log, "last_stable_offset", property(lambda log: log.high_watermark))
    found = _violations(range(3), "read_committed exposes only decided transactions: ")
    assert found and "of an undecided transaction" in found[0]


def test_a_skipped_commit_marker_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plant a marker sender that reports COMMIT markers written without sending them: the
    committed transactions stay open on their partitions (the LSO never passes them)."""
    real = MarkerSender.send

    async def skip_commits(self: MarkerSender, broker_id: int, producer_id: int,
                           producer_epoch: int, commit: bool, coordinator_epoch: int,
                           tps: list[Any]) -> Any:
        if commit:
            return dict.fromkeys(tps, ErrorCode.none)
        return await real(self, broker_id, producer_id, producer_epoch, commit,
                          coordinator_epoch, tps)
    monkeypatch.setattr(MarkerSender, "send", skip_commits)
    # (seed 4 is the first whose run commits a transaction and so shows it)
    found = _violations(range(4, 5), "transactions: ")
    assert any("no hung transactions: " in v and "below the high watermark" in v
               for v in found), found
    assert any("transactions atomic: committed transaction" in v for v in found), found


def test_an_abort_written_as_a_commit_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plant a WriteTxnMarkers handler that writes every marker as a COMMIT: the records of
    aborted transactions become visible to read_committed."""
    real = write_txn_markers.build_marker

    def always_commit(producer_id: int, producer_epoch: int, committed: bool,
                      coordinator_epoch: int, timestamp_ms: int) -> bytes:
        return real(producer_id, producer_epoch, True, coordinator_epoch, timestamp_ms)
    monkeypatch.setattr(write_txn_markers, "build_marker", always_commit)
    found = _violations(range(3), "transactions: ")
    assert any("of an aborted transaction" in v or "of an undecided transaction" in v
               for v in found), found


def test_a_new_instance_not_fencing_the_old_one_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Plant a coordinator whose InitProducerId hands a new instance the epoch it already
    had (no bump): the older instance is not fenced; sharing the producer id and epoch, its
    writes and markers mix with the new instance's transactions (one's COMMIT exposes the
    other's records before that one decided, or a fenced write becomes visible)."""
    real = TransactionMetadata.prepare_increment_producer_epoch

    def no_bump(self: TransactionMetadata, timeout_ms: int, expected_epoch: int | None,
                now: int) -> Any:
        transit = real(self, timeout_ms, expected_epoch, now)
        if expected_epoch is None and self.producer_epoch >= 0:
            return dataclasses.replace(transit, producer_epoch=self.producer_epoch)
        return transit
    monkeypatch.setattr(TransactionMetadata, "prepare_increment_producer_epoch", no_bump)
    # (seed 6: a zombie carries on after a new instance started and its records show
    # below the LSO; seeds 0-11 but 3 and 6 show nothing under this plant)
    found = _violations(range(6, 7), "transactions: ")
    assert any("fenced" in v or "of an undecided transaction" in v for v in found), found


def test_a_transaction_behind_an_epoch_lost_to_power_failure_is_not_reported_hung() -> None:
    """Seed 3: a timed-out transaction's epoch bump (PrepareAbort at epoch 1) is written,
    its ABORT markers carry epoch 1, then every ISR member of its ``__transaction_state``
    partition loses the record to power failure (no fsync).  The next coordinator loads the
    earlier PrepareAbort at epoch 0 and its markers are refused (INVALID_PRODUCER_EPOCH): the
    transaction waits for an operator, as in Kafka.  The check excuses exactly that (a lost
    record of a later epoch of the same producer id) and counts it."""
    result = _run(3)
    assert result.ok, "\n".join(result.violations)
    assert result.data_stats["txn_ids_behind_a_forgotten_epoch"] >= 1
