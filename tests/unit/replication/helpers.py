"""A ReplicaManager over real logs in a temporary directory, for the replication tests."""

from __future__ import annotations

import asyncio

from weir.common import TopicPartition
from weir.replication.partition import LeaderState
from weir.replication.replica_manager import PartitionStateUpdate, ReplicaManager
from weir.storage.log import LogConfig
from weir.storage.log_manager import LogManager

TP = TopicPartition("t", 0)


def make_rm(tmp_path, min_isr: int = 1, **kwargs) -> ReplicaManager:
    """``kwargs``: ReplicaManager's keyword arguments (``clock``...)."""
    lm = LogManager([tmp_path], LogConfig.from_dict({}))
    lm.startup(0)
    return ReplicaManager(1, lm, lambda _t: LogConfig.from_dict({}), lambda _t: min_isr,
                          **kwargs)


def lead(rm, replicas=(1,), isr=(1,), epoch=0, leader=1, tp=TP):
    state = LeaderState(leader=leader, leader_epoch=epoch, isr=list(isr),
                        replicas=list(replicas), partition_epoch=0, controller_epoch=1)
    return rm.apply_leader_and_isr(1, {tp: PartitionStateUpdate(state, None, False)}, False)


def run(coro):
    return asyncio.run(coro)
