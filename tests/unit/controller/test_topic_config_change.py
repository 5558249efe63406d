"""``unclean.leader.election.enable`` changed after the topic was created.

Kafka: TopicConfigHandler.processConfigChanges tells the active controller
(KafkaController.enableTopicUncleanLeaderElection → TopicUncleanLeaderElectionEnable,
which runs triggerOnlinePartitionStateChange for the topic), and the offline election
reads the topic's config when it elects (PartitionStateMachine
collectUncleanLeaderElectionState).  A change must not wait for the next failover.
"""

from __future__ import annotations

from tests.unit.controller.helpers import brokers, change_brokers, drive, started
from weir.common import TopicPartition
from weir.controller.core import ControllerCore
from weir.controller.events import (
    AlterPartition,
    IsrChange,
    TopicConfigChange,
    UncleanLeaderElectionEnable,
)
from weir.controller.settings import ControllerSettings
from weir.controller.states import PartitionState

T0 = TopicPartition("t", 0)
UNCLEAN = "unclean.leader.election.enable"


def _shrink_isr_to_leader(core, zk) -> None:
    """Broker 1 (leader) drops 2 from the ISR through AlterPartition."""
    state = zk.states[T0]
    drive(core, zk, AlterPartition(1, core.ctx.broker_epoch(1), {
        core.ctx.topic_ids["t"]: {0: IsrChange(state.leader_epoch, state.zk_version, (1,))}}))
    assert zk.states[T0].isr == [1]


def test_enabled_later_applies_to_the_next_election() -> None:
    """The offline election uses the topic's config as changed, not as at creation."""
    core, zk = started(live=(1, 2), topics={"t": {0: [1, 2]}})
    _shrink_isr_to_leader(core, zk)
    drive(core, zk, TopicConfigChange({"t": {UNCLEAN: "true"}}))
    change_brokers(core, zk, brokers(2))
    assert zk.states[T0].leader == 2
    assert core.ctx.partition_state(T0) is PartitionState.ONLINE


def test_enabling_elects_offline_partitions_at_once() -> None:
    """TopicUncleanLeaderElectionEnable: the topic's Offline partitions are elected."""
    core, zk = started(live=(1, 2), topics={"t": {0: [1, 2]}})
    _shrink_isr_to_leader(core, zk)
    change_brokers(core, zk, brokers(2))
    assert core.ctx.partition_state(T0) is PartitionState.OFFLINE
    drive(core, zk, TopicConfigChange({"t": {UNCLEAN: "true"}}))
    assert zk.states[T0].leader == 2
    assert core.ctx.partition_state(T0) is PartitionState.ONLINE


def test_disabled_later_stops_unclean_elections() -> None:
    core, zk = started(live=(1, 2), topics={"t": {0: [1, 2]}})
    zk.configs["t"] = {UNCLEAN: "true"}
    drive(core, zk, TopicConfigChange({"t": {UNCLEAN: "true"}}))
    _shrink_isr_to_leader(core, zk)
    drive(core, zk, TopicConfigChange({"t": {}}))
    change_brokers(core, zk, brokers(2))
    assert core.ctx.partition_state(T0) is PartitionState.OFFLINE
    assert zk.states[T0].leader != 2


def test_broker_default_enabled_elects_offline_partitions() -> None:
    """A dynamic broker default (DynamicLogConfig → KafkaController
    .enableDefaultUncleanLeaderElection): Offline partitions of topics without an override
    are elected at once; a topic whose override says false stays offline."""
    core, zk = started(live=(1, 2), topics={"t": {0: [1, 2]}, "u": {0: [1, 2]}})
    zk.configs["u"] = {UNCLEAN: "false"}
    drive(core, zk, TopicConfigChange({"u": {UNCLEAN: "false"}}))
    U0 = TopicPartition("u", 0)
    for tp in (T0, U0):
        state = zk.states[tp]
        drive(core, zk, AlterPartition(1, core.ctx.broker_epoch(1), {
            core.ctx.topic_ids[tp.topic]: {0: IsrChange(state.leader_epoch, state.zk_version,
                                                        (1,))}}))
    change_brokers(core, zk, brokers(2))
    assert core.ctx.partition_state(T0) is PartitionState.OFFLINE
    drive(core, zk, UncleanLeaderElectionEnable(True))
    assert zk.states[T0].leader == 2
    assert core.ctx.partition_state(T0) is PartitionState.ONLINE
    assert core.ctx.partition_state(U0) is PartitionState.OFFLINE


def test_broker_default_kept_while_inactive_and_disabled_later() -> None:
    """The event is taken while the core is inactive (a later failover uses it), and
    setting the default back to false stops unclean elections."""
    idle = ControllerCore(ControllerSettings(broker_id=1))
    assert idle.handle(UncleanLeaderElectionEnable(True), 0) == []
    assert idle.settings.unclean_leader_election_enable
    assert idle.partitions._settings.unclean_leader_election_enable
    core, zk = started(live=(1, 2), topics={"t": {0: [1, 2]}})
    drive(core, zk, UncleanLeaderElectionEnable(True))
    drive(core, zk, UncleanLeaderElectionEnable(False))
    _shrink_isr_to_leader(core, zk)
    change_brokers(core, zk, brokers(2))
    assert core.ctx.partition_state(T0) is PartitionState.OFFLINE
