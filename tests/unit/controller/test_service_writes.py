"""The shell sends a large leader/ISR update as several multis in flight at once."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from weir.common import TopicPartition
from weir.controller.effects import ZkReadPartitionStates, ZkUpdatePartitionStates
from weir.controller.service import WRITE_CHUNK, ControllerService
from weir.coordination.codecs import LeaderIsr
from weir.coordination.errors import ControllerMovedError


class ChunkRecordingZk:
    """Answers update_partition_states like the client; records each call's size."""

    def __init__(self, fail_on_chunk_with: TopicPartition | None = None) -> None:
        self.calls: list[int] = []
        self.lock = threading.Lock()
        self.fail_on = fail_on_chunk_with

    def update_partition_states(self, states: dict, epoch_zk_version: int) -> dict:
        with self.lock:
            self.calls.append(len(states))
        if self.fail_on in states:
            raise ControllerMovedError("fenced")
        return {tp: LeaderIsr(s.leader, s.leader_epoch, list(s.isr), s.controller_epoch,
                              zk_version=s.zk_version + 1) for tp, s in states.items()}

    def get_partition_states(self, partitions: Any) -> dict:
        return {}


def _states(n: int) -> dict[TopicPartition, LeaderIsr]:
    return {TopicPartition("t", p): LeaderIsr(1, 3, [1, 2], 1, zk_version=p) for p in range(n)}


def test_large_update_is_split_and_merged() -> None:
    zk = ChunkRecordingZk()
    service = ControllerService(1, zk)
    states = _states(2 * WRITE_CHUNK + 500)
    result = asyncio.run(service._run_zk(ZkUpdatePartitionStates(states, 7)))
    assert sorted(zk.calls) == [500, WRITE_CHUNK, WRITE_CHUNK]
    assert set(result) == set(states)
    assert all(result[tp].zk_version == states[tp].zk_version + 1 for tp in states)


def test_small_update_is_one_call() -> None:
    zk = ChunkRecordingZk()
    service = ControllerService(1, zk)
    result = asyncio.run(service._run_zk(ZkUpdatePartitionStates(_states(WRITE_CHUNK), 7)))
    assert zk.calls == [WRITE_CHUNK] and len(result) == WRITE_CHUNK
    assert asyncio.run(service._run_zk(ZkReadPartitionStates(frozenset()))) == {}


def test_a_fenced_chunk_fails_the_whole_update() -> None:
    zk = ChunkRecordingZk(fail_on_chunk_with=TopicPartition("t", WRITE_CHUNK + 1))
    service = ControllerService(1, zk)
    with pytest.raises(ControllerMovedError):
        asyncio.run(service._run_zk(ZkUpdatePartitionStates(_states(3 * WRITE_CHUNK), 7)))
    assert len(zk.calls) == 3  # every chunk finished before the error was raised
