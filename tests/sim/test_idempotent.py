"""Idempotent producers in the simulation (weir.sim.idempotent): batches resent unchanged
across leader changes, crashes, lost answers and power loss must be acknowledged with the
offsets they were first written at, and written once (Kafka's ProducerStateEntry keeps a
producer's last batches, rebuilt on followers as they replicate)."""

from __future__ import annotations

import pytest

from weir.sim import run_seed
from weir.sim.cluster import data_config
from weir.storage.log import Log
from weir.storage.log_results import AppendResult

SEEDS = range(8)


def _config():
    return data_config(idempotent_producers=True)


@pytest.mark.parametrize("seed", SEEDS)
def test_retried_batches_keep_their_offsets_and_are_written_once(seed: int) -> None:
    result = run_seed(seed, _config())
    assert result.ok, "\n".join(result.violations + ["faults:"] + result.faults)
    stats = result.data_stats
    assert stats["idempotent_acked"] > 0 and stats["idempotent_retries"] > 0


def test_seeds_resend_batches_a_broker_already_wrote() -> None:
    """The runs do exercise the path: some retries reach a leader holding the batch."""
    duplicates = 0
    original = Log.append_as_leader

    def counting(self, *args, **kwargs):
        nonlocal duplicates
        result = original(self, *args, **kwargs)
        duplicates += result.duplicate
        return result

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Log, "append_as_leader", counting)
        for seed in SEEDS:
            run_seed(seed, _config())
    assert duplicates > 0


def _violations(marker: str, seeds: range = SEEDS) -> list[str]:
    for seed in seeds:
        found = [v for v in run_seed(seed, _config()).violations if marker in v]
        if found:
            return found
    return []


def test_catches_a_duplicate_answered_without_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plant a leader answering a retried batch it already wrote without its offsets (what
    librdkafka reports as an acknowledgement with no offset)."""
    original = Log.append_as_leader

    def offsetless(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        if result.duplicate:
            return AppendResult(-1, -1, -1, result.log_start_offset, duplicate=True)
        return result

    monkeypatch.setattr(Log, "append_as_leader", offsetless)
    assert _violations("acknowledged without its offsets")


def test_catches_a_new_leader_that_forgot_the_producers_batches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Plant followers that do not rebuild producer state as they replicate: a new leader
    takes a resent batch it already holds for a new one (the producer is unknown to it)."""
    original = Log.append_as_follower

    def forgetful(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        self.producer_state.clear()
        return result

    monkeypatch.setattr(Log, "append_as_follower", forgetful)
    assert _violations("written twice")
