"""Reassignment validation and the admin znode's failed entries.

Kafka's KafkaController.validateReplicas: only the *adding* replicas (the target minus
the current replicas) must be live brokers (``liveBrokerIds``: registered and not
shutting down); a current replica on a dead broker may stay in the target.
processZkPartitionReassignment: an entry of /admin/reassign_partitions that cannot be
started is logged (warn) and removed from the znode (maybeRemoveFromZkReassignment).
"""

from __future__ import annotations

import logging
from typing import Any

from tests.unit.controller.test_reassignment import T0, T1, ReassigningZk, alter, setup
from weir.controller.effects import ZkUpdateTopicAssignments
from weir.controller.events import ControlledShutdown, ZkReassignmentChange
from weir.protocol.errors import ErrorCode

from .helpers import brokers, change_brokers, drive, logs

E = ErrorCode


def test_a_dead_current_replica_may_stay_in_the_target() -> None:
    """validateReplicas checks addingReplicas ⊆ liveBrokerIds, not the whole target."""
    core, zk = setup()
    change_brokers(core, zk, brokers(1, 2, 4))  # broker 3 dies; it stays a replica
    result, _ = alter(core, zk, {T0: (2, 3, 4)})
    assert result[T0] == (E.none, None)
    assert core.ctx.reassignments[T0].adding == (4,)


def test_a_dead_adding_replica_is_refused() -> None:
    core, zk = setup(live=(1, 2, 3))
    result, _ = alter(core, zk, {T0: (2, 3, 4)})
    assert result[T0][0] is E.invalid_replica_assignment
    assert "[4]" in result[T0][1]


def test_an_adding_replica_shutting_down_is_refused() -> None:
    """liveBrokerIds leaves out the brokers in controlled shutdown."""
    core, zk = setup()
    drive(core, zk, ControlledShutdown(4, core.ctx.broker_epoch(4), reply_to="c"))
    result, _ = alter(core, zk, {T0: (2, 3, 4)})
    assert result[T0][0] is E.invalid_replica_assignment


class FailingTopicWrites(ReassigningZk):
    """The topic znode write fails (e.g. the topic was deleted meanwhile)."""

    def execute(self, op: Any) -> Any:
        if isinstance(op, ZkUpdateTopicAssignments):
            self.ops.append(op)
            return {topic: KeyError(topic) for topic in op.changes}
        return super().execute(op)


def test_admin_entry_that_cannot_start_is_logged_and_removed() -> None:
    core, zk = setup()
    failing = FailingTopicWrites()
    failing.__dict__.update(zk.__dict__)
    failing.znode = {T0: (2, 3, 4)}
    effects = drive(core, failing, ZkReassignmentChange(dict(failing.znode)))
    assert failing.znode is None
    assert T0 not in core.ctx.reassignments and not core.ctx.zk_reassignments
    warnings = logs(effects, logging.WARNING)
    assert any(str(T0) in w.message for w in warnings), warnings


def test_admin_entry_with_a_dead_adding_replica_is_logged_and_removed() -> None:
    core, zk = setup(live=(1, 2, 3))
    zk.znode = {T0: (2, 3, 4), T1: (2, 3, 1)}
    effects = drive(core, zk, ZkReassignmentChange(dict(zk.znode)))
    assert zk.znode is None  # T1 needs nothing, T0 cannot start
    assert any("not alive" in w.message for w in logs(effects, logging.WARNING))
