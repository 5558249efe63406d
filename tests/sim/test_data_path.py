"""The data-path simulation (real Partition cores, truncation and Log files) over seeds."""

from __future__ import annotations

import pytest

from weir.replication import truncation
from weir.replication.truncation import Truncation
from weir.sim import run_seed
from weir.sim.__main__ import main
from weir.sim.cluster import data_config

# Seed 7 finds a real bug: a follower whose leader-epoch cache ends with an epoch that has
# no records (it led that epoch without appending) loops forever on the leader's diverging
# epoch: the fetcher skips truncate_to when the decision is >= LEO, and Log.truncate_to
# returns early without truncating the epoch cache (Kafka truncates it to the LEO anyway).
KNOWN_BUG_SEEDS: set[int] = set()
SEEDS = range(12)


@pytest.mark.parametrize("seed", [
    pytest.param(s, marks=pytest.mark.xfail(strict=True, reason="epoch cache not truncated "
                                            "at LEO (weir.storage.log / fetcher)"))
    if s in KNOWN_BUG_SEEDS else s for s in SEEDS])
def test_seed_holds_data_invariants(seed: int) -> None:
    result = run_seed(seed, data_config())
    assert result.ok, "\n".join(result.violations + ["faults:"] + result.faults)
    assert result.data_stats["acked"] > 0 and result.data_stats["fetch_rounds"] > 0


def test_data_runs_inject_power_loss_and_truncate() -> None:
    stats: dict[str, int] = {}
    for seed in range(3):
        for key, value in run_seed(seed, data_config()).data_stats.items():
            stats[key] = stats.get(key, 0) + value
    assert stats["records_lost_to_power_failure"] > 0
    assert stats["truncations"] > 0 and stats["isr_proposals"] > 0


def test_data_seeds_replay_exactly() -> None:
    first, second = run_seed(3, data_config()), run_seed(3, data_config())
    assert (first.faults, first.steps, first.violations, first.data_stats) == (
        second.faults, second.steps, second.violations, second.data_stats)


def test_invariants_catch_high_watermark_truncation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plant the pre-KIP-101 rule (truncate to the HW): committed data is lost/diverges."""
    monkeypatch.setattr(truncation, "after_leader_epoch_answer",
                        lambda _epoch, _end, _cache, leo, hw: Truncation(min(hw, leo), True))
    # The leader's HW also waits for caught-up followers outside the ISR (Kafka's
    # Partition.maybeIncrementLeaderHW), which keeps these trajectories from diverging under
    # HW truncation: plant the older ISR-only HW rule too, so that divergence shows.
    from weir.replication.partition import Partition
    monkeypatch.setattr(Partition, "waits_for_replica_to_join_isr", lambda *_args: False)
    # Which seeds expose it depends on the whole trajectory: look through the first few
    # dozen (with the real rule every one of them passes, see the test above and the CLI).
    lost = diverged = False
    for seed in range(40):
        violations = run_seed(seed, data_config()).violations
        lost = lost or any("acknowledged offset" in v and "is not in the log" in v
                           for v in violations)
        diverged = diverged or any("disagrees with leader" in v for v in violations)
        if lost and diverged:
            break
    assert lost and diverged, (lost, diverged)


def test_invariants_catch_a_high_watermark_past_the_isr(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plant a leader that advances its HW to its own LEO (ignoring followers)."""
    from weir.replication.partition import Partition

    def eager(self: Partition) -> bool:
        if not self.is_leader or self.log is None:
            return False
        if self.log.log_end_offset > self.log.high_watermark:
            self.log.update_high_watermark(self.log.log_end_offset)
            return True
        return False
    monkeypatch.setattr(Partition, "maybe_increment_high_watermark", eager)
    violations = [v for seed in range(3) for v in run_seed(seed, data_config()).violations]
    assert any("is not in the log of leader" in v for v in violations), violations


def test_cli_data_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seed", "1", "--data", "--stats"]) == 0
    out = capsys.readouterr().out
    assert "seed 1: ok" in out and "acked" in out
