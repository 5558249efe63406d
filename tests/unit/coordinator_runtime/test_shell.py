"""The coordinator shell shared by the group and transaction coordinators: leadership
following (load on election, unload on resignation, reload on a new epoch or not), loading
over a real Log, lookups while loading, FindCoordinator, the tick loop and stop."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest

from weir.common import TopicPartition
from weir.coordinator_runtime import (
    CoordinatorPartition,
    CoordinatorShell,
    Loading,
    ReplicaManagerLog,
    read_batches,
)
from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.builder import build_batch
from weir.records.records import iter_records
from weir.replication.replica_manager import ProduceResult
from weir.server.metadata_cache import BrokerMeta, MetadataCache, PartitionMeta
from weir.storage.config import LogConfig
from weir.storage.log import Log
from weir.storage.producer_state import AppendOrigin

TOPIC = "__internal"
TP0 = TopicPartition(TOPIC, 0)


class FakeClock:
    def __init__(self) -> None:
        self.ms = 1_000_000
        self.mono = 0.0

    def now_ms(self) -> int:
        return self.ms

    def monotonic(self) -> float:
        return self.mono


class KeysShell(CoordinatorShell[CoordinatorPartition, list[bytes]]):
    """A coordinator whose state is the keys of its partition's records."""

    topic = TOPIC

    def __init__(self, log, *, reload_on_new_epoch: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.reload_on_new_epoch = reload_on_new_epoch
        self.log = log
        self.installed: dict[int, list[bytes]] = {}
        self.unloaded: list[int] = []
        self.ticks: list[int] = []
        self.periodic: list[int] = []
        self.gate: asyncio.Event | None = None
        self.scanning = asyncio.Event()  # set when a scan has started

    def _new_partition(self, index, epoch):
        return CoordinatorPartition(index, epoch)

    async def _scan(self, tp):
        self.scanning.set()
        if self.gate is not None:
            await self.gate.wait()
        keys = []
        async for batch in read_batches(self.log.log(tp), chunk_bytes=64):
            keys += [r.key for r in iter_records(batch)]
        return keys

    def _install(self, part, state, elapsed_ms):
        self.installed[part.index] = state

    def _on_unloaded(self, part):
        self.unloaded.append(part.index)

    def _periodic_jobs(self):
        return 0.001, self.ticks.append, [(10.0, self._slow)]

    async def _slow(self, now):
        self.periodic.append(now)


class FakeReplicaManager:
    def __init__(self, plog: Log) -> None:
        self.log = plog
        self.appends: list[tuple[int, int, AppendOrigin]] = []

    def partition(self, tp):
        if tp != TP0:
            raise KafkaError(ErrorCode.unknown_topic_or_partition)
        return SimpleNamespace(log=self.log)

    async def append(self, acks, timeout_ms, entries, origin=AppendOrigin.CLIENT):
        self.appends.append((acks, timeout_ms, origin))
        out = {}
        for tp, batch in entries.items():
            info = self.log.append_as_leader(batch, 0, int(time.time() * 1000), origin)
            out[tp] = ProduceResult(base_offset=info.first_offset)
        return out


def _setup(tmp_path, **kwargs):
    plog = Log.open(tmp_path / f"{TOPIC}-0", LogConfig(), clean_shutdown=True,
                    now_ms=int(time.time() * 1000))
    rm = FakeReplicaManager(plog)
    meta = MetadataCache()
    meta.brokers = {1: BrokerMeta(1, "h", 9092)}
    meta.topics = {TOPIC: {0: PartitionMeta(leader=1, leader_epoch=0, isr=(1,),
                                             replicas=(1,))}}
    clock = FakeClock()
    shell = KeysShell(ReplicaManagerLog(rm), broker_id=1, metadata=meta, default_partitions=3,
                      clock=clock, create_topic=kwargs.pop("create_topic", None), **kwargs)
    return shell, rm, meta, clock


async def _until(predicate, what: str) -> None:
    for _ in range(500):
        if predicate():
            return
        await asyncio.sleep(0.002)
    raise AssertionError(what)


def run(coro) -> None:
    asyncio.run(asyncio.wait_for(coro, 20))


def test_appends_as_coordinator_and_loads_every_batch_in_chunks(tmp_path):
    async def scenario():
        shell, rm, _meta, _clock = _setup(tmp_path)
        for i in range(20):  # many batches, read back in 64-byte chunks
            error, base = await shell.log.append(
                TP0, build_batch([b"v"], keys=[b"k%d" % i], timestamp_ms=0), 1234)
            assert (error, base) == (ErrorCode.none, i)
        assert rm.appends[0] == (-1, 1234, AppendOrigin.COORDINATOR)
        shell.on_leadership(TP0, True, 3)
        with pytest.raises(KafkaError) as loading:
            shell.loaded_partition(0, "key 'x'")
        assert loading.value.code == ErrorCode.coordinator_load_in_progress
        assert shell.loading()
        await _until(lambda: 0 in shell.installed, "did not load")
        assert shell.installed[0] == [b"k%d" % i for i in range(20)]
        part = shell.loaded_partition(0, "key 'x'")
        assert part.status == Loading.LOADED and part.epoch == 3
        assert shell.loaded_partitions() == [part] and not shell.loading()
        with pytest.raises(KafkaError) as other:
            shell.loaded_partition(1, "key 'y'")
        assert other.value.code == ErrorCode.not_coordinator
        assert "broker 1 is not the coordinator of key 'y'" in other.value.message
        await shell.stop()
        assert shell.unloaded == [0] and not shell.partitions

    run(scenario())


def test_other_topics_are_ignored_and_resignation_unloads(tmp_path):
    async def scenario():
        shell, _rm, _meta, _clock = _setup(tmp_path)
        shell.on_leadership(TopicPartition("orders", 0), True, 1)
        assert not shell.partitions
        shell.on_leadership(TP0, True, 1)
        await _until(lambda: 0 in shell.installed, "did not load")
        shell.on_leadership(TP0, False, 2)
        assert shell.unloaded == [0] and not shell.partitions
        shell.on_leadership(TP0, False, 2)  # resigning twice is harmless
        assert shell.unloaded == [0]
        await shell.stop()

    run(scenario())


@pytest.mark.parametrize("reload_on_new_epoch", [False, True])
def test_a_new_leader_epoch_reloads_only_when_asked(tmp_path, reload_on_new_epoch):
    async def scenario():
        shell, _rm, _meta, _clock = _setup(tmp_path, reload_on_new_epoch=reload_on_new_epoch)
        shell.on_leadership(TP0, True, 1)
        await _until(lambda: 0 in shell.installed, "did not load")
        first = shell.partitions[0]
        shell.on_leadership(TP0, True, 1)  # the same epoch again: nothing to do
        assert shell.partitions[0] is first
        shell.on_leadership(TP0, True, 2)
        assert shell.partitions[0].epoch == 2
        assert (shell.partitions[0] is not first) == reload_on_new_epoch
        assert shell.owns(first) != reload_on_new_epoch
        await shell.stop()

    run(scenario())


def test_leadership_lost_while_loading_discards_the_load(tmp_path):
    async def scenario():
        shell, _rm, _meta, _clock = _setup(tmp_path)
        shell.gate = asyncio.Event()
        shell.on_leadership(TP0, True, 1)
        async with asyncio.timeout(10):
            await shell.scanning.wait()  # the load is under way, held at the gate
        shell.on_leadership(TP0, False, 2)
        shell.gate.set()
        await _until(lambda: not shell._tasks, "the load did not finish")
        assert not shell.installed and not shell.partitions
        await shell.stop()

    run(scenario())


def test_a_failed_load_leaves_the_partition_unowned(tmp_path):
    async def scenario():
        shell, _rm, _meta, _clock = _setup(tmp_path)
        shell.on_leadership(TopicPartition(TOPIC, 1), True, 1)  # not hosted: the scan fails
        await _until(lambda: not shell.partitions, "failed load kept the partition")
        assert not shell.installed
        await shell.stop()

    run(scenario())


def test_find_coordinator_creates_the_topic_once_and_names_the_leader(tmp_path):
    created = []

    async def create():
        created.append(1)
        await asyncio.sleep(0.01)

    async def scenario():
        shell, _rm, meta, _clock = _setup(tmp_path, create_topic=create)
        assert shell.num_partitions() == 1
        assert await shell.coordinator_for(lambda n: 0) == (ErrorCode.none, 1)
        meta.topics[TOPIC][0] = PartitionMeta(leader=7, leader_epoch=0, isr=(7,),
                                              replicas=(7,))
        assert await shell.coordinator_for(lambda n: 0) == (
            ErrorCode.coordinator_not_available, -1)  # leader not alive
        meta.topics = {}
        assert shell.num_partitions() == 3  # the configured default
        answers = await asyncio.gather(*(shell.coordinator_for(lambda n: 0) for _ in range(3)))
        assert answers == [(ErrorCode.coordinator_not_available, -1)] * 3
        assert created == [1]  # concurrent lookups share one creation
        await shell.stop()

    run(scenario())


def test_find_coordinator_survives_a_failing_creation(tmp_path):
    async def failing():
        raise ConnectionError("ZooKeeper unreachable")

    async def scenario():
        shell, _rm, meta, _clock = _setup(tmp_path, create_topic=failing)
        meta.topics = {}
        assert await shell.coordinator_for(lambda n: 0) == (
            ErrorCode.coordinator_not_available, -1)
        without, _rm2, meta2, _c = _setup(tmp_path / "b")
        meta2.topics = {}
        assert await without.coordinator_for(lambda n: 0) == (
            ErrorCode.coordinator_not_available, -1)
        await shell.stop()
        await without.stop()

    run(scenario())


def test_tick_loop_runs_jobs_and_stop_cancels_everything(tmp_path):
    async def scenario():
        shell, _rm, _meta, clock = _setup(tmp_path)
        shell.start()
        await _until(lambda: len(shell.ticks) >= 3, "no ticks")
        assert set(shell.ticks) == {clock.ms} and not shell.periodic
        clock.mono += 10.0  # the slow job's interval has passed
        clock.ms += 5
        await _until(lambda: shell.periodic, "periodic job did not run")
        assert shell.periodic == [clock.ms]
        hung = shell._spawn(asyncio.sleep(3600))
        await shell.stop()
        assert hung.cancelled() and shell._loop_task.done() and not shell._tasks
        ticks = len(shell.ticks)
        await asyncio.sleep(0.01)
        assert len(shell.ticks) == ticks

    run(scenario())


def test_a_failing_job_does_not_stop_the_loop(tmp_path):
    async def scenario():
        shell, _rm, _meta, _clock = _setup(tmp_path)
        calls = []

        def flaky(now):
            calls.append(now)
            raise RuntimeError("boom")

        shell._periodic_jobs = lambda: (0.001, flaky, [])
        shell.start()
        await _until(lambda: len(calls) >= 3, "the loop stopped after a failure")
        await shell.stop()

    run(scenario())


def test_abandon_cancels_every_task_at_once_and_unloads_nothing(tmp_path):
    """A killed process (the simulation's crash): every task is cancelled in the same step,
    nothing is unloaded or answered."""
    async def scenario():
        shell, _rm, _meta, _clock = _setup(tmp_path)
        shell.gate = asyncio.Event()
        shell.start()
        shell.on_leadership(TP0, True, 1)
        async with asyncio.timeout(10):
            await shell.scanning.wait()  # a load is under way, held at the gate
        hung = shell._spawn(asyncio.sleep(3600))
        tasks = shell.abandon()
        assert hung in tasks and shell._loop_task in tasks and len(tasks) == 3
        assert all(t.cancelling() for t in tasks)
        await asyncio.gather(*tasks, return_exceptions=True)
        assert all(t.cancelled() for t in tasks)
        assert not shell.unloaded and 0 in shell.partitions  # nothing ran on the way out

    run(scenario())
