"""The transaction coordinator shell over a real Log and a stand-in replica manager and
marker sender: InitProducerId/AddPartitions/EndTxn flows, markers and their retries,
fencing, timeouts, and a new coordinator finishing what the old one prepared (no sockets)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from weir.common import TopicPartition
from weir.coordinator_runtime import ReplicaManagerLog
from weir.protocol.errors import ErrorCode
from weir.replication.replica_manager import ProduceResult
from weir.server.metadata_cache import MetadataCache, PartitionMeta
from weir.storage.config import LogConfig
from weir.storage.log import Log
from weir.storage.producer_state import AppendOrigin
from weir.transactions.codec import TRANSACTION_STATE_TOPIC, partition_for
from weir.transactions.coordinator import (
    Loading,
    TransactionCoordinator,
    TransactionCoordinatorSettings,
)
from weir.transactions.state import TxnState

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


class FakeReplicaManager:
    def __init__(self, plog: Log) -> None:
        self.log = plog
        self.fail_with: ErrorCode | None = None

    def partition(self, tp):
        return SimpleNamespace(log=self.log)

    async def append(self, acks, timeout_ms, entries, origin=AppendOrigin.CLIENT):
        assert acks == -1 and origin == AppendOrigin.COORDINATOR
        await asyncio.sleep(0)
        out = {}
        for tp, batch in entries.items():
            assert tp.topic == TRANSACTION_STATE_TOPIC
            if self.fail_with is not None:
                out[tp] = ProduceResult(error=self.fail_with)
                continue
            info = self.log.append_as_leader(batch, 0, int(time.time() * 1000), origin)
            out[tp] = ProduceResult(base_offset=info.first_offset)
        return out


class FakeSender:
    """Answers markers from a table of per-partition errors (default NONE)."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, int, int, bool, int, list[TopicPartition]]] = []
        self.errors: dict[TopicPartition, list[ErrorCode]] = {}

    def leader_of(self, tp):
        return -2 if tp.topic == "gone" else 1

    async def send(self, broker_id, pid, epoch, commit, coordinator_epoch, tps):
        await asyncio.sleep(0)
        self.sent.append((broker_id, pid, epoch, commit, coordinator_epoch, sorted(tps)))
        return {tp: (self.errors[tp].pop(0) if self.errors.get(tp) else ErrorCode.none)
                for tp in tps}

    async def close(self):
        pass


class Ids:
    def __init__(self) -> None:
        self.next = 1000

    async def next_id(self) -> int:
        self.next += 1
        return self.next


def make_broker(tmp_path) -> SimpleNamespace:
    plog = Log.open(tmp_path / f"{TRANSACTION_STATE_TOPIC}-0", LogConfig(), clean_shutdown=True,
                    now_ms=int(time.time() * 1000))
    meta = MetadataCache()
    part = PartitionMeta(leader=1, leader_epoch=0, isr=(1,), replicas=(1,))
    meta.topics = {TRANSACTION_STATE_TOPIC: {0: part}, "a": {0: part, 1: part}}
    config = SimpleNamespace(
        broker_id=1, transaction_state_log_num_partitions=1, transaction_max_timeout_ms=900000,
        request_timeout_ms=5000, transaction_abort_timed_out_transaction_cleanup_interval_ms=10,
        transaction_remove_expired_transaction_cleanup_interval_ms=3600000,
        transactional_id_expiration_ms=604800000)
    return SimpleNamespace(broker_id=1, config=config, metadata=meta, producer_ids=Ids(),
                           replica_manager=FakeReplicaManager(plog))


TP = TopicPartition(TRANSACTION_STATE_TOPIC, 0)


def make_coordinator(broker: SimpleNamespace, sender) -> TransactionCoordinator:
    """The coordinator over the stand-in broker's parts (as the broker wires it)."""
    return TransactionCoordinator(
        TransactionCoordinatorSettings.from_config(broker.config), broker.metadata,
        ReplicaManagerLog(broker.replica_manager), broker.producer_ids, sender)


async def _coordinator(broker, epoch: int) -> tuple[TransactionCoordinator, FakeSender]:
    sender = FakeSender()
    coord = make_coordinator(broker, sender)
    coord.on_leadership(TP, True, epoch)
    for _ in range(200):
        if coord.partitions[0].status == Loading.LOADED:
            return coord, sender
        await asyncio.sleep(0.005)
    raise AssertionError("did not load")


async def _settled(coord: TransactionCoordinator, txn_id: str, state: TxnState) -> None:
    for _ in range(400):
        meta = coord.partitions[0].txns[txn_id]
        if meta.state == state and not meta.pending:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"{txn_id} is {meta.state.name} (pending {meta.pending_state})")


def run(coro) -> None:
    asyncio.run(asyncio.wait_for(coro, 20))


def test_commit_and_abort_send_markers_then_complete(tmp_path):
    async def scenario():
        broker = make_broker(tmp_path)
        coord, sender = await _coordinator(broker, 5)
        init = await coord.init_producer_id("tx", 60000)
        assert (init.error, init.producer_id, init.producer_epoch) == (ErrorCode.none, 1001, 0)
        assert await coord.add_partitions("tx", 1001, 0, {A0, A1}) == ErrorCode.none
        assert await coord.end_txn("tx", 1001, 0, True) == ErrorCode.none
        await _settled(coord, "tx", TxnState.COMPLETE_COMMIT)
        assert sender.sent == [(1, 1001, 0, True, 5, [A0, A1])]
        # Retrying the commit is harmless; aborting it is not allowed.
        assert await coord.end_txn("tx", 1001, 0, True) == ErrorCode.none
        assert await coord.end_txn("tx", 1001, 0, False) == ErrorCode.invalid_txn_state
        assert await coord.add_partitions("tx", 1001, 0, {A1}) == ErrorCode.none
        assert await coord.end_txn("tx", 1001, 0, False) == ErrorCode.none
        await _settled(coord, "tx", TxnState.COMPLETE_ABORT)
        assert sender.sent[-1] == (1, 1001, 0, False, 5, [A1])
        described = coord.describe("tx")
        assert (described["error_code"], described["transaction_state"]) == (
            ErrorCode.none, "CompleteAbort")
        assert coord.describe("nope")["error_code"] == ErrorCode.transactional_id_not_found
        assert coord.list_transactions(set(), {"CompleteAbort", "Bogus"}) == (
            ErrorCode.none, {"Bogus"}, [("tx", 1001, "CompleteAbort")])
    run(scenario())


def test_markers_are_retried_and_requests_wait_meanwhile(tmp_path):
    async def scenario():
        broker = make_broker(tmp_path)
        coord, sender = await _coordinator(broker, 0)
        await coord.init_producer_id("tx", 60000)
        await coord.add_partitions("tx", 1001, 0, {A0, A1, TopicPartition("gone", 0)})
        sender.errors[A1] = [ErrorCode.not_leader_or_follower, ErrorCode.request_timed_out]
        assert await coord.end_txn("tx", 1001, 0, True) == ErrorCode.none
        assert await coord.add_partitions("tx", 1001, 0, {A0}) == ErrorCode.concurrent_transactions
        await _settled(coord, "tx", TxnState.COMPLETE_COMMIT)
        assert [s[-1] for s in sender.sent] == [[A0, A1], [A1], [A1]]  # "gone" is skipped
    run(scenario())


def test_new_producer_fences_the_old_and_aborts_its_transaction(tmp_path):
    async def scenario():
        broker = make_broker(tmp_path)
        coord, sender = await _coordinator(broker, 0)
        await coord.init_producer_id("tx", 60000)
        await coord.add_partitions("tx", 1001, 0, {A0})
        # A second producer: its first InitProducerId aborts the open transaction.
        again = await coord.init_producer_id("tx", 60000)
        assert again.error == ErrorCode.concurrent_transactions
        await _settled(coord, "tx", TxnState.COMPLETE_ABORT)
        assert sender.sent == [(1, 1001, 1, False, 0, [A0])]  # marker at the fencing epoch
        again = await coord.init_producer_id("tx", 60000)
        assert (again.error, again.producer_id, again.producer_epoch) == (ErrorCode.none, 1001, 2)
        # The zombie (epoch 0) is fenced.
        assert await coord.add_partitions("tx", 1001, 0, {A0}) == ErrorCode.producer_fenced
        assert await coord.end_txn("tx", 1001, 0, True) == ErrorCode.producer_fenced
        assert await coord.end_txn("tx", 999, 2, True) == ErrorCode.invalid_producer_id_mapping
    run(scenario())


def test_kip360_reinit_with_the_current_epoch(tmp_path):
    async def scenario():
        broker = make_broker(tmp_path)
        coord, _ = await _coordinator(broker, 0)
        await coord.init_producer_id("tx", 60000)
        bumped = await coord.init_producer_id("tx", 60000, 1001, 0)
        assert (bumped.error, bumped.producer_id, bumped.producer_epoch) == (ErrorCode.none, 1001, 1)
        retry = await coord.init_producer_id("tx", 60000, 1001, 0)  # lost response: same answer
        assert (retry.error, retry.producer_epoch) == (ErrorCode.none, 1)
        assert (await coord.init_producer_id("tx", 60000, 555, 0)).error == ErrorCode.producer_fenced
    run(scenario())


def test_bad_requests(tmp_path):
    async def scenario():
        broker = make_broker(tmp_path)
        coord = make_coordinator(broker, FakeSender())
        assert (await coord.init_producer_id("tx", 1000)).error == ErrorCode.not_coordinator
        coord.on_leadership(TP, True, 0)
        assert (await coord.init_producer_id("tx", 1000)).error == ErrorCode.coordinator_load_in_progress
        coord, _ = await _coordinator(broker, 0)
        assert (await coord.init_producer_id("", 1000)).error == ErrorCode.invalid_request
        assert (await coord.init_producer_id("tx", 0)).error == ErrorCode.invalid_transaction_timeout
        assert (await coord.init_producer_id("tx", 900001)).error == ErrorCode.invalid_transaction_timeout
        assert await coord.add_partitions("unknown", 1, 0, {A0}) == ErrorCode.invalid_producer_id_mapping
        assert await coord.end_txn("unknown", 1, 0, True) == ErrorCode.invalid_producer_id_mapping
        await coord.init_producer_id("tx", 1000)
        assert await coord.end_txn("tx", 1001, 0, True) == ErrorCode.invalid_txn_state  # Empty
        # A failed write leaves the state as it was and maps the error as Kafka.
        broker.replica_manager.fail_with = ErrorCode.not_enough_replicas
        assert await coord.add_partitions("tx", 1001, 0, {A0}) == ErrorCode.coordinator_not_available
        broker.replica_manager.fail_with = ErrorCode.not_leader_or_follower
        assert await coord.add_partitions("tx", 1001, 0, {A0}) == ErrorCode.not_coordinator
        meta = coord.partitions[0].txns["tx"]
        assert meta.state == TxnState.EMPTY and not meta.pending
    run(scenario())


def test_timed_out_transaction_is_aborted_and_its_producer_fenced(tmp_path):
    async def scenario():
        broker = make_broker(tmp_path)
        coord, sender = await _coordinator(broker, 0)
        await coord.init_producer_id("tx", 50)
        await coord.add_partitions("tx", 1001, 0, {A0})
        coord.abort_timed_out(int(time.time() * 1000) + 10)  # not yet
        assert coord.partitions[0].txns["tx"].state == TxnState.ONGOING
        coord.abort_timed_out(int(time.time() * 1000) + 1000)
        await _settled(coord, "tx", TxnState.COMPLETE_ABORT)
        assert sender.sent == [(1, 1001, 1, False, 0, [A0])]
        assert await coord.end_txn("tx", 1001, 0, True) == ErrorCode.producer_fenced
    run(scenario())


def test_failover_completes_prepared_transactions(tmp_path):
    async def scenario():
        broker = make_broker(tmp_path)
        old, old_sender = await _coordinator(broker, 0)
        await old.init_producer_id("tx", 60000)
        await old.add_partitions("tx", 1001, 0, {A0})
        old_sender.errors[A0] = [ErrorCode.not_leader_or_follower] * 1000  # never lands
        assert await old.end_txn("tx", 1001, 0, True) == ErrorCode.none
        await asyncio.sleep(0.05)
        old.on_leadership(TP, False, 1)  # resigns: its marker loop stops
        await asyncio.sleep(0.2)
        attempts = len(old_sender.sent)
        await asyncio.sleep(0.3)
        assert len(old_sender.sent) == attempts
        # The next coordinator loads PrepareCommit from the log and sends the markers again.
        new, new_sender = await _coordinator(broker, 1)
        await _settled(new, "tx", TxnState.COMPLETE_COMMIT)
        assert new_sender.sent == [(1, 1001, 0, True, 1, [A0])]
        assert (await new.init_producer_id("tx", 60000)).producer_epoch == 1
        # And the id survives a third load with its epoch.
        third, _ = await _coordinator(broker, 2)
        meta = third.partitions[0].txns["tx"]
        assert (meta.state, meta.producer_id, meta.producer_epoch) == (TxnState.EMPTY, 1001, 1)
        await old.stop()
        await new.stop()
        await third.stop()
    run(scenario())


def test_placement_uses_the_topics_partition_count(tmp_path):
    broker = make_broker(tmp_path)
    coord = make_coordinator(broker, FakeSender())
    assert coord.partition_for("anything") == 0
    broker.metadata.topics[TRANSACTION_STATE_TOPIC] = {i: None for i in range(50)}
    assert coord.partition_for("hello") == partition_for("hello", 50) == 99162322 % 50


def test_idle_transactional_ids_expire(tmp_path):
    async def scenario():
        broker = make_broker(tmp_path)
        coord, _ = await _coordinator(broker, 0)
        await coord.init_producer_id("idle", 60000)
        await coord.init_producer_id("busy", 60000)
        await coord.add_partitions("busy", 1002, 0, {A0})
        coord.expire_transactional_ids(int(time.time() * 1000))  # not idle long enough
        await asyncio.sleep(0.05)
        assert set(coord.partitions[0].txns) == {"idle", "busy"}
        coord.expire_transactional_ids(int(time.time() * 1000) + 604800000)
        for _ in range(200):
            if "idle" not in coord.partitions[0].txns:
                break
            await asyncio.sleep(0.005)
        assert set(coord.partitions[0].txns) == {"busy"}  # an open transaction stays
        assert coord.describe("idle")["error_code"] == ErrorCode.transactional_id_not_found
        again, _ = await _coordinator(broker, 1)  # the tombstone is in the log
        assert set(again.partitions[0].txns) == {"busy"}
        fresh = await again.init_producer_id("idle", 60000)
        assert (fresh.error, fresh.producer_epoch) == (ErrorCode.none, 0)
    run(scenario())


def test_markers_go_to_the_leaders_in_partition_order(tmp_path):
    """One marker round visits the partitions' leaders in a fixed order (sorted partitions),
    not in a set's hash order: a simulated run replays under any PYTHONHASHSEED."""
    tps = {TopicPartition(f"topic-{i}", 0) for i in range(12)}

    class SpreadSender(FakeSender):
        def leader_of(self, tp):
            return 1 + int(tp.topic.split("-")[1])

    async def scenario():
        broker = make_broker(tmp_path)
        sender = SpreadSender()
        coord = make_coordinator(broker, sender)
        coord.on_leadership(TP, True, 0)
        for _ in range(200):
            if coord.partitions[0].status == Loading.LOADED:
                break
            await asyncio.sleep(0.005)
        await coord.init_producer_id("tx", 60000)
        assert await coord.add_partitions("tx", 1001, 0, tps) == ErrorCode.none
        assert await coord.end_txn("tx", 1001, 0, True) == ErrorCode.none
        await _settled(coord, "tx", TxnState.COMPLETE_COMMIT)
        assert [sent[5][0] for sent in sender.sent] == sorted(tps)
    run(scenario())
