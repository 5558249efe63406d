"""Each named invariant catches a bug planted in the controller (or its ZooKeeper).

Every test monkeypatches one rule, runs seeds of the simulation (the production
ControllerService on the virtual-time loop) and asserts that the violations name that
invariant; the last test shows the same seeds are clean without the bug.
"""

from __future__ import annotations

import dataclasses

import pytest

from weir.controller import election
from weir.controller.partition_state_machine import PartitionStateMachine
from weir.controller.reassignment import ReassignmentManager
from weir.coordination import codecs, paths
from weir.coordination.codecs import LeaderIsr
from weir.coordination.zk import ZkClient
from weir.sim import SimConfig, run_seed
from weir.sim import invariants as inv

SEEDS = range(12)


def _caught(invariant: type[inv.Invariant], config: SimConfig | None = None) -> list[str]:
    """The first seed's violations of ``invariant`` (fails if no seed shows one)."""
    for seed in SEEDS:
        found = [v for v in run_seed(seed, config).violations if f"{invariant.name}:" in v]
        if found:
            return found
    pytest.fail(f"no seed of {list(SEEDS)} caught the planted bug ({invariant.name})")


def test_leader_outside_its_isr_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    clean = election.offline_leader

    def leader_dropped_from_isr(*args):  # type: ignore[no-untyped-def]
        result = clean(*args)
        if result is None or len(result.isr) < 2:
            return result
        return dataclasses.replace(result, isr=tuple(r for r in result.isr
                                                     if r != result.leader))
    monkeypatch.setattr(election, "offline_leader", leader_dropped_from_isr)
    assert _caught(inv.LeaderInIsr)


def test_isr_member_outside_the_replicas_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    clean = election.offline_leader

    def stranger_in_isr(*args):  # type: ignore[no-untyped-def]
        result = clean(*args)
        return None if result is None else dataclasses.replace(result,
                                                               isr=(*result.isr, 99))
    monkeypatch.setattr(election, "offline_leader", stranger_in_isr)
    assert _caught(inv.IsrSubsetOfReplicas)


def test_new_leader_without_new_epoch_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def same_epoch(self, current: LeaderIsr, result):  # type: ignore[no-untyped-def]
        return LeaderIsr(leader=result.leader, leader_epoch=current.leader_epoch,
                         isr=list(result.isr), controller_epoch=self._ctx.controller_epoch,
                         zk_version=current.zk_version)
    monkeypatch.setattr(PartitionStateMachine, "_elected_state", same_epoch)
    assert _caught(inv.AtMostOneLeaderPerEpoch)


def test_leader_epoch_going_back_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def older_epoch(self, current: LeaderIsr, result):  # type: ignore[no-untyped-def]
        return LeaderIsr(leader=result.leader, leader_epoch=max(current.leader_epoch - 1, 0),
                         isr=list(result.isr), controller_epoch=self._ctx.controller_epoch,
                         zk_version=current.zk_version)
    monkeypatch.setattr(PartitionStateMachine, "_elected_state", older_epoch)
    assert _caught(inv.LeaderEpochMonotonic)


def test_unclean_election_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    clean = election.offline_leader
    monkeypatch.setattr(election, "offline_leader",
                        lambda assignment, isr, live, _unclean: clean(assignment, isr, live,
                                                                      True))
    assert _caught(inv.CleanLeaderElection)


def _elect(client: ZkClient, broker_id: int, epoch: int | None) -> tuple[int, int] | None:
    """A planted election: the ephemeral ``/controller`` and, unless ``epoch`` is None,
    ``/controller_epoch`` set to ``epoch`` in one multi (None: only checked, not bumped)."""
    found, version = client._read_or_init_controller_epoch()
    txn = client.kazoo.transaction()
    txn.create(paths.CONTROLLER, codecs.encode_controller(broker_id, 0), ephemeral=True)
    if epoch is None:
        txn.check(paths.CONTROLLER_EPOCH, version)
    else:
        txn.set_data(paths.CONTROLLER_EPOCH, codecs.encode_controller_epoch(epoch), version)
    created, written = txn.commit()
    if isinstance(created, Exception) or isinstance(written, Exception):
        return None
    return (found, version) if epoch is None else (epoch, int(written.version))


def test_two_controllers_in_one_epoch_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ZkClient.try_become_controller

    def no_epoch_bump(self, broker_id):  # type: ignore[no-untyped-def]
        found = self.get_controller_epoch()
        if found is None or found[1] == 0:  # the first election is right
            return real(self, broker_id)
        return _elect(self, broker_id, None)  # it "forgets" to bump /controller_epoch
    monkeypatch.setattr(ZkClient, "try_become_controller", no_epoch_bump)
    assert _caught(inv.OneControllerPerEpoch)


def test_controller_epoch_going_back_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    elections = []

    def epoch_wraps(self, broker_id):  # type: ignore[no-untyped-def]
        won = _elect(self, broker_id, 2 if len(elections) % 2 == 0 else 1)  # 2, 1, 2, 1, ...
        if won is not None:
            elections.append(broker_id)
        return won
    monkeypatch.setattr(ZkClient, "try_become_controller", epoch_wraps)
    assert _caught(inv.ControllerEpochMonotonic)


def test_reassignment_that_never_completes_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ReassignmentManager, "_caught_up",
                        lambda self, tp, assignment: not assignment.is_being_reassigned)
    assert _caught(inv.ReassignmentsResolve)


def test_the_same_seeds_are_clean_without_a_planted_bug() -> None:
    for seed in SEEDS:
        result = run_seed(seed)
        assert result.ok, "\n".join(result.violations)


def test_the_invariant_set_is_named_and_fresh() -> None:
    first, second = inv.controller_invariants(), inv.controller_invariants()
    assert len({i.name for i in first}) == len(first)
    assert all(a is not b for a, b in zip(first, second, strict=True))


def test_an_answer_overtaken_by_a_superseding_request_promises_nothing() -> None:
    """An AlterPartitionReassignments answer arriving after /admin/reassign_partitions was
    rewritten for the same partition: which one the controller applied last is unknown."""
    from weir.common import TopicPartition

    check = inv.ReassignmentsResolve()
    tp = TopicPartition("t", 0)
    sent = check.version(tp)
    check.supersede(tp)  # the znode, written while the request was in flight
    check.acknowledge(tp, (1, 2, 3), sent)
    assert tp not in check.acknowledged
    check.acknowledge(tp, (1, 2, 3), check.version(tp))  # sent after it: a promise
    assert check.acknowledged[tp] == (1, 2, 3)
