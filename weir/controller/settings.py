"""The few broker settings the controller core needs, as plain values."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ControllerSettings"]


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    """Plain settings of the core (no config parsing here).

    ``broker_id``: this broker (the controller id in requests);
    ``unclean_leader_election_enable``: the broker default of
    ``unclean.leader.election.enable`` (a topic override wins);
    ``max_zk_update_attempts``: conditional leader/ISR writes retried after a re-read;
    ``auto_leader_rebalance_enable``, ``leader_imbalance_per_broker_percentage``,
    ``leader_imbalance_check_interval_seconds``: Kafka's automatic preferred-leader
    rebalancing (the shell ticks, the core decides).
    """

    broker_id: int
    unclean_leader_election_enable: bool = False
    max_zk_update_attempts: int = 5
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_seconds: int = 300
