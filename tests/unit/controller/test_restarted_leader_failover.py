"""A leader that restarted while there was no controller (its registration is newer than its
partition's state) is not re-sent the same leader epoch by the next controller: it may have
lost an unflushed tail, and writing again at that epoch would diverge from the followers."""

from __future__ import annotations

import dataclasses

from tests.unit.controller.helpers import (
    broker,
    drive,
    leader_and_isr,
    new_core,
    partition_states,
    started,
)
from weir.common import TopicPartition

TP = TopicPartition("t", 0)


def _failover(leader_epoch_at_registration: int) -> tuple[int, int, dict]:
    """Fail over with broker 1 (the leader) registered at the given zxid; the state znode
    was last written at zxid 500. Returns (old epoch, new epoch, LeaderAndIsr per broker)."""
    _, zk = started(live=(1, 2, 3), topics={"t": {0: [1, 2, 3]}})
    old = zk.states[TP]
    assert old.leader == 1
    zk.states[TP] = dataclasses.replace(old, mzxid=500)
    live = {1: broker(1, epoch=leader_epoch_at_registration), 2: broker(2, epoch=10),
            3: broker(3, epoch=11)}
    core = new_core()
    effects = drive(core, zk, zk.startup_event(live, epoch=2))
    return old.leader_epoch, zk.states[TP].leader_epoch, leader_and_isr(effects)


def test_a_leader_registered_after_its_state_gets_a_new_epoch():
    old_epoch, new_epoch, lai = _failover(leader_epoch_at_registration=900)
    assert new_epoch > old_epoch
    sent = {b: partition_states(r)[TP] for b, r in lai.items()}
    assert all(s.leader_epoch == new_epoch for s in sent.values())


def test_a_leader_registered_before_its_state_keeps_its_epoch():
    old_epoch, new_epoch, _ = _failover(leader_epoch_at_registration=100)
    assert new_epoch == old_epoch
