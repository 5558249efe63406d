"""The few broker settings the controller core needs, as plain values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from weir.config.keys import default_value

if TYPE_CHECKING:
    from weir.config import BrokerConfig

__all__ = ["ControllerSettings"]


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    """Plain settings of the core (no config parsing here); built from a broker config by
    :meth:`from_config`, the field defaults are the key table's (Kafka's defaults).

    ``broker_id``: this broker (the controller id in requests);
    ``unclean_leader_election_enable``: the broker default of
    ``unclean.leader.election.enable`` (a topic override wins);
    ``max_zk_update_attempts``: conditional leader/ISR writes retried after a re-read (not a
    Kafka key);
    ``auto_leader_rebalance_enable``, ``leader_imbalance_per_broker_percentage``,
    ``leader_imbalance_check_interval_seconds``: Kafka's automatic preferred-leader
    rebalancing (the shell ticks, the core decides);
    ``controller_socket_timeout_ms``: the shell's wait for a broker's answer;
    ``controlled_shutdown_batch``: a controlled shutdown writes its leader elections in
    batches of at most this many partitions (one fenced ZooKeeper multi each,
    ``weir.coordination.fenced.CHUNK``, all in flight at once) and sends each batch's
    LeaderAndIsr/UpdateMetadata as soon as it is written (not a Kafka key; see
    ``IsrManager.controlled_shutdown``).
    """

    broker_id: int
    unclean_leader_election_enable: bool = default_value("unclean.leader.election.enable")
    max_zk_update_attempts: int = 5
    auto_leader_rebalance_enable: bool = default_value("auto.leader.rebalance.enable")
    leader_imbalance_per_broker_percentage: int = default_value(
        "leader.imbalance.per.broker.percentage")
    leader_imbalance_check_interval_seconds: int = default_value(
        "leader.imbalance.check.interval.seconds")
    controller_socket_timeout_ms: int = default_value("controller.socket.timeout.ms")
    controlled_shutdown_batch: int = 1000

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ControllerSettings:
        return cls(
            broker_id=config.broker_id,
            unclean_leader_election_enable=config.unclean_leader_election_enable,
            auto_leader_rebalance_enable=config.auto_leader_rebalance_enable,
            leader_imbalance_per_broker_percentage=config.leader_imbalance_per_broker_percentage,
            leader_imbalance_check_interval_seconds=(
                config.leader_imbalance_check_interval_seconds),
            controller_socket_timeout_ms=config.controller_socket_timeout_ms,
        )
