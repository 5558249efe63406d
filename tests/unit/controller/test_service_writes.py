"""The shell hands a leader/ISR update to the store in one call on one worker thread,
whatever its size (the client pipelines its multis itself: weir.coordination.fenced)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from weir.common import TopicPartition
from weir.controller.effects import ZkReadPartitionStates, ZkUpdatePartitionStates
from weir.controller.service import ControllerService
from weir.coordination.codecs import LeaderIsr
from weir.coordination.errors import ControllerMovedError


class ChunkRecordingZk:
    """Answers update_partition_states like the client; records each call's size."""

    def __init__(self, fail_on_chunk_with: TopicPartition | None = None) -> None:
        self.calls: list[int] = []
        self.threads: set[int] = set()
        self.lock = threading.Lock()
        self.fail_on = fail_on_chunk_with

    def update_partition_states(self, states: dict, epoch_zk_version: int) -> dict:
        with self.lock:
            self.calls.append(len(states))
            self.threads.add(threading.get_ident())
        if self.fail_on in states:
            raise ControllerMovedError("fenced")
        return {tp: LeaderIsr(s.leader, s.leader_epoch, list(s.isr), s.controller_epoch,
                              zk_version=s.zk_version + 1) for tp, s in states.items()}

    def get_partition_states(self, partitions: Any) -> dict:
        return {}


def _states(n: int) -> dict[TopicPartition, LeaderIsr]:
    return {TopicPartition("t", p): LeaderIsr(1, 3, [1, 2], 1, zk_version=p) for p in range(n)}


def test_large_update_is_one_call_on_one_worker_thread() -> None:
    """Split over concurrent worker threads (as it was), a 6,667-partition update's request
    building took the interpreter lock from the event loop: loop lag 65-370 ms against
    13-52 ms for one thread (weir.controller.executor.run)."""
    zk = ChunkRecordingZk()
    service = ControllerService(1, zk)
    states = _states(6667)
    result = asyncio.run(service._run_zk(ZkUpdatePartitionStates(states, 7)))
    assert zk.calls == [6667] and len(zk.threads) == 1
    assert threading.get_ident() not in zk.threads  # off the event loop
    assert set(result) == set(states)
    assert all(result[tp].zk_version == states[tp].zk_version + 1 for tp in states)
    assert asyncio.run(service._run_zk(ZkReadPartitionStates(frozenset()))) == {}


def test_a_fenced_update_fails_with_controller_moved() -> None:
    zk = ChunkRecordingZk(fail_on_chunk_with=TopicPartition("t", 1001))
    service = ControllerService(1, zk)
    with pytest.raises(ControllerMovedError):
        asyncio.run(service._run_zk(ZkUpdatePartitionStates(_states(3000), 7)))
    assert zk.calls == [3000]


class GatedZk(ChunkRecordingZk):
    """Holds every write until told; records the order the writes reached it."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.entered: list[int] = []
        self.all_entered = threading.Event()

    def update_partition_states(self, states: dict, epoch_zk_version: int) -> dict:
        with self.lock:
            self.entered.append(min(tp.partition for tp in states))
            if len(self.entered) == 3:
                self.all_entered.set()
        assert self.release.wait(10)
        return super().update_partition_states(states, epoch_zk_version)


def test_pipelined_writes_are_in_flight_together_and_answer_their_own_operations() -> None:
    """A state update's ``pipelined`` writes start with it, each on its own thread: all
    are in ZooKeeper's hands before the first answer; the core's next operations (the same
    states) get their results without a second write."""
    zk = GatedZk()
    service = ControllerService(1, zk)
    batches = [{TopicPartition("t", p): LeaderIsr(1, 3, [1, 2], 1, zk_version=p)
                for p in range(start, start + 3)} for start in (0, 3, 6)]

    async def scenario() -> list[dict]:
        first = asyncio.ensure_future(service._run_zk(
            ZkUpdatePartitionStates(batches[0], 7, (batches[1], batches[2]))))
        # every write reaches the store before any is answered
        assert await asyncio.to_thread(zk.all_entered.wait, 10)
        assert not first.done()
        zk.release.set()
        results = [await first]
        for i, states in enumerate(batches[1:], 1):
            results.append(await service._run_zk(
                ZkUpdatePartitionStates(states, 7, tuple(batches[i + 1:]))))
        return results

    results = asyncio.run(scenario())
    assert sorted(zk.entered) == [0, 3, 6] and sorted(zk.calls) == [3, 3, 3]
    assert [set(r) for r in results] == [set(b) for b in batches]
    assert not service._ahead


class TwoHalvesZk(ChunkRecordingZk):
    """Sends in one call and waits in another, as the ZooKeeper client's store."""

    def __init__(self, fail_on: TopicPartition | None = None) -> None:
        super().__init__(fail_on)
        self.log: list[tuple[str, int, int]] = []  # (half, first partition, thread)

    def start_partition_state_updates(self, states: dict, epoch_zk_version: int) -> Any:
        first = min(tp.partition for tp in states)
        self.log.append(("sent", first, threading.get_ident()))

        def wait() -> dict:
            self.log.append(("waited", first, threading.get_ident()))
            return self.update_partition_states(states, epoch_zk_version)
        return wait


def test_pipelined_writes_go_from_one_thread_all_sent_before_the_first_wait() -> None:
    zk = TwoHalvesZk(fail_on=TopicPartition("t", 6))
    service = ControllerService(1, zk)
    batches = [{TopicPartition("t", p): LeaderIsr(1, 3, [1, 2], 1, zk_version=p)
                for p in range(start, start + 3)} for start in (0, 3, 6)]

    async def scenario() -> list[Any]:
        out: list[Any] = []
        for i, states in enumerate(batches):
            try:
                out.append(await service._run_zk(
                    ZkUpdatePartitionStates(states, 7, tuple(batches[i + 1:]))))
            except ControllerMovedError as exc:
                out.append(exc)
        return out

    results = asyncio.run(scenario())
    assert [(half, first) for half, first, _ in zk.log] == [
        ("sent", 0), ("sent", 3), ("sent", 6), ("waited", 0), ("waited", 3), ("waited", 6)]
    assert len({thread for _, _, thread in zk.log}) == 1
    assert threading.get_ident() not in {thread for _, _, thread in zk.log}
    assert [set(r) for r in results[:2]] == [set(b) for b in batches[:2]]
    assert isinstance(results[2], ControllerMovedError)  # each write's error is its own
    assert not service._ahead
