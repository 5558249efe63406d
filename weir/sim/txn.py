"""Transactions under simulation (``--txn``): the production transaction coordinator on every
simulated broker, over the brokers' real ``__transaction_state`` partitions, driven by
simulated transactional producers while the faults run.

Each broker incarnation of a data-path run is a production ``BrokerCore``
(:mod:`weir.sim.node`), and the transaction plane is the core's own, built by its
constructor from what the simulated world gives it:

* ``core.txn_coordinator``, the production
  :class:`~weir.transactions.coordinator.TransactionCoordinator`, its ``CoordinatorLog`` the
  production ``ReplicaManagerLog`` over the core's real ``ReplicaManager`` (state changes
  written with acks=all to real ``__transaction_state`` logs, replicated by the real
  fetchers), loading a partition when LeaderAndIsr makes the broker its leader (a
  leadership listener), on the loop's clock (``coordinator_clock``) and the core's
  ``MetadataCache``; its settings are the broker configuration's
  (``transaction.state.log.num.partitions``, ``request.timeout.ms``,
  ``transaction.abort.timed.out.transaction.cleanup.interval.ms``:
  :func:`weir.sim.node.broker_config`), and it has ``__transaction_state`` created by
  :meth:`TxnPlane.create_topic` (the core's ``create_transaction_state_topic``);
* ``core.producer_ids``, the production ``ProducerIdManager`` over the broker's ZooKeeper
  session (``/latest_producer_id_block`` is a real znode of the znode-level fake);
* ``core.txn_markers``, the production :class:`~weir.transactions.markers.MarkerSender`,
  and ``core.txn_verifier``, the production ``TxnVerifier`` (KIP-890), both over the core's
  ``connect`` (:meth:`~weir.sim.node.SimNode.connect_frames`): WriteTxnMarkers v1 and
  AddPartitionsToTxn v4 ``verify_only`` frames cross the simulated network and are answered
  by the receiving core's handlers.

Every frame the producers send a broker goes through ``SimNode.serve_frame``, that is
``BrokerCore.serve_frame``: the core's ``Dispatcher`` and the production handlers (Produce,
FindCoordinator, InitProducerId, AddPartitionsToTxn, EndTxn, WriteTxnMarkers).  This plane
starts each incarnation's coordinator (its clock, as ``Broker.start`` does) and abandons it
when the process dies.

:class:`SimTxnProducer` is a transactional client (the Java producer's TransactionManager,
simplified): FindCoordinator (key type 1), InitProducerId (KIP-360 with its producer id and
epoch after an abortable error), AddPartitionsToTxn, transactional batches to the
partition leaders, EndTxn commit or abort, retries of retriable errors at a coordinator
looked up again, pauses past ``transaction.timeout.ms``, and now and then a new instance of
the same transactional id (a restarted application) whose InitProducerId fences the old one,
which carries on as a zombie until told it is fenced.  What the producers did goes to
:class:`TxnPlane`'s histories, which :mod:`weir.sim.txn_invariants` judges.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v9.request import ProduceRequest

from weir.common import TopicPartition
from weir.protocol.client import FrameConnection
from weir.protocol.codec import build
from weir.protocol.errors import ErrorCode
from weir.records.builder import build_batch
from weir.sim.internal_topics import create_internal_topic
from weir.sim.node import TXN_STATE_PARTITIONS
from weir.transactions.codec import TRANSACTION_STATE_TOPIC
from weir.transactions.coordinator import TransactionCoordinator

if TYPE_CHECKING:
    from weir.sim.data import DataPlane
    from weir.sim.node import SimNode
    from weir.sim.world import World

__all__ = ["SimTxnProducer", "TxnAttempt", "TxnPlane", "TxnWrite", "txn_config"]

TRANSACTIONAL_IDS = 5
TXN_TIMEOUT_MS = 500  # transaction.timeout.ms of the producers
CLIENT_TIMEOUT_MS = 500  # the producers' request.timeout.ms
CLIENT_LINK_BASE = 2000  # producers' network addresses (members are 1000+, brokers 1..n)
VALUE_PREFIX = b"txn:"

COMMITTED = "committed"  # EndTxn(commit) answered NONE
ABORTED = "aborted"  # never asked to commit (EndTxn(abort) sent, or given up before)
UNKNOWN = "unknown"  # asked to commit, no definite answer (fenced, or gave up retrying)

_FENCED = frozenset({ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch,
                     ErrorCode.invalid_producer_id_mapping})
_REFIND = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available})
_RETRY = frozenset({ErrorCode.coordinator_load_in_progress, ErrorCode.concurrent_transactions})


def txn_config(**overrides: Any) -> Any:
    """A data-path configuration with transactions: faults every 60-300 ms rather than
    30-150 (a transaction needs several coordinator round trips and acks=all writes to
    finish between two faults) and a longer settle phase (the producers stop halfway
    through it; the coordinators' timeouts abort what they left open)."""
    from weir.sim.config import data_config

    return data_config(**{"transactions": True, "fault_every_ms": (60, 300),
                          "settle_ms": 4000, **overrides})


@dataclass
class TxnWrite:
    """One transactional batch sent to a partition leader."""

    tp: TopicPartition
    values: list[bytes]
    sent_at: int
    incarnation: int  # DataPlane.forgotten[topic] when sent (a deleted topic promises nothing)
    acked: bool = False


@dataclass
class TxnAttempt:
    """One transaction of one producer instance, as the producer saw it."""

    txn_id: str
    instance: int
    producer_id: int
    epoch: int
    started_at: int
    writes: list[TxnWrite] = field(default_factory=list)
    commit_sent_at: int | None = None
    outcome: str | None = None  # COMMITTED, ABORTED, UNKNOWN; None while open
    ended_at: int | None = None


@dataclass
class TxnPlane:
    """The transaction side of a simulated cluster: the coordinator of each broker
    incarnation (its core's), producers, and the histories the invariants read."""

    sim: World
    data: DataPlane
    # broker -> (incarnation, its core's transaction coordinator)
    coordinators: dict[int, tuple[int, TransactionCoordinator]] = field(default_factory=dict)
    producers: list[SimTxnProducer] = field(default_factory=list)
    attempts: list[TxnAttempt] = field(default_factory=list)
    by_value: dict[bytes, tuple[TxnAttempt, TxnWrite]] = field(default_factory=dict)
    # instance -> when a newer instance of its transactional id got its epoch
    fenced_at: dict[int, int] = field(default_factory=dict)
    # value -> first time a read_committed read below the LSO exposed it
    exposed: dict[bytes, int] = field(default_factory=dict)
    _values: Any = field(default_factory=lambda: itertools.count(1))
    _instances: Any = field(default_factory=lambda: itertools.count(1))
    _links: Any = field(default_factory=lambda: itertools.count(CLIENT_LINK_BASE))

    @property
    def stats(self) -> Any:
        return self.data.stats

    @property
    def stop_at(self) -> int:
        """Producers start no transaction from here on (the rest must end by the end)."""
        config = self.sim.config
        return config.fault_ms + config.settle_ms // 2

    # -- broker processes ----------------------------------------------------------------

    def start(self, node: SimNode) -> None:
        """A new broker incarnation: its core's transaction coordinator starts (its clock:
        timed-out transactions, expired transactional ids), as ``Broker.start`` does."""
        assert node.core is not None
        coordinator = node.core.txn_coordinator
        self.coordinators[node.id] = (node.incarnation, coordinator)
        coordinator.start()

    def crash(self, node: SimNode) -> None:
        entry = self.coordinators.pop(node.id, None)
        if entry is not None:
            self.data.bury(entry[1].abandon())

    def coordinator(self, node: SimNode) -> TransactionCoordinator | None:
        entry = self.coordinators.get(node.id)
        if entry is None or entry[0] != node.incarnation or not node.alive:
            return None
        return entry[1]

    async def create_topic(self) -> None:
        """The topic administration's creation of ``__transaction_state`` (the cores'
        ``create_transaction_state_topic``: a ZooKeeper round trip; RF 3, as
        transaction.state.log.replication.factor)."""
        await create_internal_topic(self.sim, TRANSACTION_STATE_TOPIC, TXN_STATE_PARTITIONS)

    # -- the producers' network ----------------------------------------------------------

    def connection(self, link: int, broker_id: int) -> FrameConnection:
        """A client connection from ``link`` to a broker: frames may be lost or reordered
        on the way there and back (as :meth:`DataPlane.send`); a dead broker refuses it."""
        sim = self.sim

        async def open_call() -> Any:
            await asyncio.sleep(sim.net_delay() / 1000)
            target = sim.nodes[broker_id]
            if not target.alive:
                raise ConnectionRefusedError(f"broker {broker_id} is down")
            incarnation = target.incarnation

            async def call(frame: bytes) -> bytes:
                answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

                async def serve() -> None:
                    try:
                        response = await target.serve_frame(frame, f"txn-producer-{link}")
                    except ConnectionError:
                        return
                    self._lossy(target.id, link,
                                lambda: answer.done() or answer.set_result(response))

                def arrive() -> None:
                    if target.alive and target.incarnation == incarnation:
                        target.spawn(serve())
                self._lossy(link, broker_id, arrive)
                return await answer
            return call
        return FrameConnection(open_call, client_id=f"txn-producer-{link}")

    def _lossy(self, src: int, dst: int, fn: Any) -> None:
        sim, config = self.sim, self.sim.config
        if sim.rng.random() < config.data_drop_ratio:
            return
        if sim.rng.random() < config.data_reorder_ratio:
            sim.schedule(sim.net_delay(), fn)
        else:
            sim.deliver(src, dst, fn)

    # -- histories -----------------------------------------------------------------------

    def start_producers(self) -> None:
        for i in range(TRANSACTIONAL_IDS):
            self.spawn_producer(f"tx{i}")

    def spawn_producer(self, txn_id: str) -> SimTxnProducer:
        producer = SimTxnProducer(self, txn_id, next(self._instances), next(self._links))
        self.producers.append(producer)
        self.sim.spawn(producer.run())
        return producer

    def next_value(self, txn_id: str, instance: int) -> bytes:
        return VALUE_PREFIX + f"{txn_id}/{instance}/{next(self._values)}".encode()

    def record_write(self, attempt: TxnAttempt, write: TxnWrite) -> None:
        attempt.writes.append(write)
        for value in write.values:
            self.by_value[value] = (attempt, write)

    def on_fenced(self, producer: SimTxnProducer) -> None:
        """A fenced instance ends; the application starts a new one unless another
        instance of its transactional id runs (a fatal error, then a restart)."""
        if self.sim.now >= self.stop_at:
            return
        if not any(p.txn_id == producer.txn_id and not p.fenced and p is not producer
                   for p in self.producers):
            self.spawn_producer(producer.txn_id)

    def superseded(self, txn_id: str, instance: int) -> None:
        """A newer instance of ``txn_id`` got its epoch: older instances are fenced."""
        for producer in self.producers:
            if (producer.txn_id == txn_id and producer.instance < instance
                    and producer.instance not in self.fenced_at):
                self.fenced_at[producer.instance] = self.sim.now


class SimTxnProducer:
    """A transactional producer instance; see the module docstring."""

    def __init__(self, plane: TxnPlane, txn_id: str, instance: int, link: int) -> None:
        self.plane = plane
        self.txn_id = txn_id
        self.instance = instance
        self.link = link
        self.coordinator: int | None = None
        self.producer_id = -1
        self.epoch = -1
        self.sequences: dict[TopicPartition, int] = {}
        self.fenced = False
        self.needs_init = False
        self._connections: dict[int, FrameConnection] = {}

    @property
    def sim(self) -> World:
        return self.plane.sim

    async def _sleep(self, ms: int) -> None:
        await asyncio.sleep(ms / 1000)

    async def _request(self, broker: int, payload: Any) -> Any:
        """The decoded answer, or None (refused, lost, timed out)."""
        conn = self._connections.get(broker)
        if conn is None or not conn.connected:
            conn = self._connections[broker] = self.plane.connection(self.link, broker)
            try:
                await conn.connect(timeout_s=CLIENT_TIMEOUT_MS / 1000)
            except (TimeoutError, ConnectionError, OSError):
                return None
        try:
            return await conn.request(payload, timeout_s=CLIENT_TIMEOUT_MS / 1000)
        except (TimeoutError, ConnectionError, OSError):
            return None

    def _count(self, what: str, code: ErrorCode | None) -> None:
        self.plane.stats[f"txn_{what}_{'timeout' if code is None else code.name}"] += 1

    async def run(self) -> None:
        await self._sleep(self.sim.rng.randint(0, 200))
        while self.sim.now < self.plane.stop_at and not self.fenced:
            if self.coordinator is None:
                await self._find_coordinator()
            elif self.producer_id < 0 or self.needs_init:
                await self._init()
            else:
                await self._transaction()
            await self._sleep(self.sim.rng.randint(5, 40))
        if self.fenced:
            self.plane.stats["txn_fenced_instances"] += 1
            self.plane.on_fenced(self)

    async def _find_coordinator(self) -> None:
        live = [n.id for n in self.sim.nodes.values() if n.alive]
        if not live:
            await self._sleep(100)
            return
        answer = await self._request(self.sim.rng.choice(live), build(
            FindCoordinatorRequest, key_type=1, coordinator_keys=[self.txn_id]))
        found = None if answer is None else answer.coordinators[0]
        if found is None or found.error_code != ErrorCode.none:
            self._count("find", None if found is None else ErrorCode(found.error_code))
            await self._sleep(50)
            return
        self.coordinator = int(found.node_id)

    async def _coordinator_call(self, what: str, payload: Any) -> ErrorCode | None | Any:
        """A request to the coordinator; on NOT_COORDINATOR (or no answer) it is looked up
        again before the caller retries."""
        assert self.coordinator is not None
        answer = await self._request(self.coordinator, payload)
        if answer is None:
            self._count(what, None)
            self.coordinator = None
        return answer

    async def _init(self) -> None:
        """InitProducerId: a new epoch (fencing older instances), KIP-360 style when this
        instance already had one."""
        answer = await self._coordinator_call("init", build(
            InitProducerIdRequest, transactional_id=self.txn_id,
            transaction_timeout=timedelta(milliseconds=TXN_TIMEOUT_MS), producer_id=self.producer_id,
            producer_epoch=self.epoch))
        if answer is None:
            return
        code = ErrorCode(answer.error_code)
        if code != ErrorCode.none:
            self._count("init", code)
            if code in _REFIND:
                self.coordinator = None
            elif code in _FENCED:
                self.fenced = True
            await self._sleep(30)
            return
        self.producer_id, self.epoch = int(answer.producer_id), int(answer.producer_epoch)
        self.needs_init = False
        self.sequences.clear()
        self.plane.superseded(self.txn_id, self.instance)
        self.plane.stats["txn_inits"] += 1

    async def _transaction(self) -> None:
        sim, plane = self.sim, self.plane
        rng = sim.rng
        live = sorted(tp for tp in sim.zk.states
                      if tp.topic not in sim.zk.to_delete and not tp.topic.startswith("__"))
        if not live:
            return
        newest = max(p.instance for p in plane.producers if p.txn_id == self.txn_id)
        if newest == self.instance and rng.random() < 0.1:
            # A new instance of the application starts (this one looked dead: a long GC
            # pause) and its InitProducerId fences this one, which then wakes up and carries
            # on as a zombie: its next request must be refused.
            plane.stats["txn_new_instances"] += 1
            sim.faults.append(f"{sim.now}: new instance of transactional id {self.txn_id}")
            plane.spawn_producer(self.txn_id)
            resume = sim.now + rng.randint(300, 1500)  # (unless the new one is quicker)
            while sim.now < resume and self.instance not in plane.fenced_at:
                await self._sleep(20)
        tps = rng.sample(live, min(len(live), rng.randint(1, 3)))
        attempt = TxnAttempt(self.txn_id, self.instance, self.producer_id, self.epoch, sim.now)
        plane.attempts.append(attempt)
        abortable = not await self._add_partitions(tps)
        if self.fenced:
            self._end_attempt(attempt, ABORTED)
            return
        for _ in range(rng.randint(1, 4) if not abortable else 0):
            if not await self._produce(attempt, rng.choice(tps)):
                abortable = True
                break
        if self.fenced:
            self._end_attempt(attempt, ABORTED)
            return
        if rng.random() < 0.05:  # a pause past transaction.timeout.ms: the coordinator aborts
            plane.stats["txn_pauses"] += 1
            await self._sleep(rng.randint(TXN_TIMEOUT_MS, 2 * TXN_TIMEOUT_MS))
        commit = not abortable and rng.random() < 0.75
        await self._end(attempt, commit)
        if abortable:
            self.producer_id_reinit()

    def producer_id_reinit(self) -> None:
        """An abortable error leaves the sequences unknown: bump the epoch (KIP-360)."""
        self.needs_init = True

    async def _add_partitions(self, tps: list[TopicPartition]) -> bool:
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        payload = build(AddPartitionsToTxnRequest, v3_and_below_transactional_id=self.txn_id,
                        v3_and_below_producer_id=self.producer_id,
                        v3_and_below_producer_epoch=self.epoch,
                        v3_and_below_topics=[{"name": t, "partitions": p}
                                             for t, p in by_topic.items()])
        for _ in range(10):
            if self.coordinator is None:
                await self._find_coordinator()
                continue
            answer = await self._coordinator_call("add_partitions", payload)
            if answer is None:
                continue
            codes = {ErrorCode(p.partition_error_code) for t in answer.results_by_topic_v3_and_below
                     for p in t.results_by_partition}
            if codes == {ErrorCode.none}:
                return True
            code = next(c for c in sorted(codes) if c != ErrorCode.none)
            self._count("add_partitions", code)
            if code in _FENCED:
                self.fenced = True
                return False
            if code in _REFIND:
                self.coordinator = None
            elif code not in _RETRY:
                return False
            await self._sleep(20)
        return False

    async def _produce(self, attempt: TxnAttempt, tp: TopicPartition) -> bool:
        """One transactional batch to the partition's leader (acks=all); True if written."""
        sim, plane = self.sim, self.plane
        state = sim.zk.states.get(tp)
        if state is None or state.leader < 0:
            return False
        values = [plane.next_value(self.txn_id, self.instance)
                  for _ in range(sim.rng.randint(1, 3))]
        sequence = self.sequences.get(tp, 0)
        batch = build_batch(values, timestamp_ms=sim.now, producer_id=self.producer_id,
                            producer_epoch=self.epoch, base_sequence=sequence,
                            transactional=True)
        write = TxnWrite(tp, values, sim.now, plane.data.forgotten[tp.topic])
        plane.record_write(attempt, write)
        answer = await self._request(state.leader, build(
            ProduceRequest, transactional_id=self.txn_id, acks=-1,
            timeout=timedelta(milliseconds=CLIENT_TIMEOUT_MS),
            topic_data=[{"name": tp.topic, "partition_data": [
                {"index": tp.partition, "records": batch}]}]))
        plane.stats["txn_produced"] += 1
        if answer is None:
            self._count("produce", None)
            return False
        code = ErrorCode(answer.responses[0].partition_responses[0].error_code)
        if code != ErrorCode.none:
            self._count("produce", code)
            if code in _FENCED:
                self.fenced = True
            return False
        write.acked = True
        self.sequences[tp] = sequence + len(values)
        plane.stats["txn_produce_acked"] += 1
        return True

    async def _end(self, attempt: TxnAttempt, commit: bool) -> None:
        """EndTxn, retried until a definite answer (or the producer gives up at the end)."""
        sim = self.sim
        if commit:
            attempt.commit_sent_at = sim.now
        payload = build(EndTxnRequest, transactional_id=self.txn_id,
                        producer_id=self.producer_id, producer_epoch=self.epoch,
                        committed=commit)
        deadline = self.plane.stop_at + 2 * TXN_TIMEOUT_MS
        while sim.now < deadline:
            if self.coordinator is None:
                await self._find_coordinator()
                continue
            answer = await self._coordinator_call("end", payload)
            if answer is None:
                continue
            code = ErrorCode(answer.error_code)
            if code == ErrorCode.none:
                self._end_attempt(attempt, COMMITTED if commit else ABORTED)
                return
            self._count("end", code)
            if code in _REFIND:
                self.coordinator = None
            elif code not in _RETRY:
                # Fenced, or the coordinator aborted it (timeout): whatever it decided.
                self.fenced = self.fenced or code in _FENCED
                self._end_attempt(attempt, UNKNOWN if commit else ABORTED)
                if code not in _FENCED:
                    self.producer_id_reinit()
                return
            await self._sleep(20)
        self._end_attempt(attempt, UNKNOWN if commit else ABORTED)

    def _end_attempt(self, attempt: TxnAttempt, outcome: str) -> None:
        attempt.outcome = outcome
        attempt.ended_at = self.sim.now
        self.plane.stats[f"txn_{outcome}"] += 1
