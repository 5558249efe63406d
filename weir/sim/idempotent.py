"""Idempotent producers in the simulation (``enable.idempotence``, ``acks=all``), as
librdkafka behaves: per partition up to five Produce requests in flight on one connection to
the leader (``max.in.flight.requests.per.connection``), answered in request order; a batch
keeps its producer id, epoch and base sequence on every retry, to whichever broker leads
the partition by then, until it is acknowledged.

librdkafka's rules for the answers (``rdkafka_request.c``,
``rd_kafka_msgbatch_handle_Produce_result``), which this model follows:

* a retriable error (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, a lost
  request...) puts the batch back in the partition's queue, in sequence order, and *drains*:
  no request is sent until every one in flight is answered; then the queue is resent;
* a success for a batch while an earlier batch of the partition waits in the queue for its
  retry acknowledges that earlier batch too (``rd_kafka_dr_implicit_ack``: the broker only
  takes sequences in order, so the earlier batch is written) - **without an offset**;
* DUPLICATE_SEQUENCE_NUMBER is taken for success, also without an offset;
* OUT_OF_ORDER_SEQUENCE_NUMBER for the head of the line (no earlier batch unacknowledged) is
  a fatal sequence desynchronisation (a new producer starts); for a later batch (an earlier
  one failed) a retry.

Kafka itself answers so that librdkafka acknowledges without an offset: an earlier request
refused (NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER) or timed out in the produce purgatory
(REQUEST_TIMED_OUT) and a later one of the same producer appended and acknowledged.  Those
implicit acknowledgements are counted (``idempotent_implicit_acks``), not violations.

A batch a broker already wrote must be answered, on a retry, with the offsets it was first
written at - by the old leader and by a new one alike, which rebuilt the producer's last
batches while it followed (Kafka's ``ProducerStateEntry``/``BatchMetadata``).  So, checked
as it happens (:meth:`IdempotentProducers.answer`) and on what the consumer reads
(:meth:`IdempotentProducers.committed`):

* **every explicit acknowledgement carries its offsets** (a client told "written" must
  learn where): never DUPLICATE_SEQUENCE_NUMBER, never a success without offsets;
* the acknowledged offsets hold the batch's values (the data plane's ``acknowledged``
  promises, checked by the durability invariants);
* **no batch is written twice**: a value of an idempotent producer is at one offset only.

The power-loss exemption of :mod:`weir.sim.data` applies here too: a record that the new
leader itself lost to power failure is forgotten (:meth:`IdempotentProducers.excused`).
That leader rebuilt the producer's state from what its log kept, so a retry of the lost
batch is the next sequence to it and is written anew at another offset, as Kafka's
``ProducerAppendInfo.checkSequence`` takes it: the batch is then at one offset of the log
that survives, not twice.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode
from weir.sim.config import SimConfig
from weir.sim.world import World

__all__ = ["PREFIX", "IdempotentProducers"]

PREFIX = b"idem:"  # the values these producers write
PRODUCER_ID = 7000  # producer ids PRODUCER_ID + n: one producer per partition
RETRY_BACKOFF_MS = (5, 40)
MAX_IN_FLIGHT = 5  # librdkafka's cap with idempotence
MAX_QUEUED = 8  # batches a partition's producer holds before it skips a produce turn


@dataclass
class _Batch:
    sequence: int
    values: list[bytes]
    attempts: int = 0
    error: ErrorCode = ErrorCode.none  # the last attempt's


@dataclass
class _Request:
    batch: _Batch
    answer: tuple[ErrorCode, list[tuple[int, bytes]]] | None = None


@dataclass
class _Partition:
    """librdkafka's per-partition producer state (``rktp_msgq``, ``rktp_xmit_msgq``)."""

    queue: list[_Batch] = field(default_factory=list)  # unsent or to retry, sequence order
    in_flight: list[_Request] = field(default_factory=list)  # request order
    broker: tuple[int, int] = (-1, -1)  # the connection: broker id and incarnation
    broken: bool = False  # a request on it was lost: so is every later one (TCP)
    wire: list[Callable[[], None]] = field(default_factory=list)  # sent, not yet arrived
    draining: bool = False  # an error: nothing new is sent until in_flight is empty
    retry_scheduled: bool = False


class Plane(Protocol):
    """What the producers use of the data path (:class:`weir.sim.data.DataPlane`)."""

    sim: World
    config: SimConfig
    stats: Counter[str]

    def send(self, src_id: int, dst: Any, fn: Callable[[Any], object],
             may_duplicate: bool = False) -> None: ...


class IdempotentProducers:
    """One idempotent producer per partition, driven by the simulation's clock."""

    def __init__(self, plane: Plane,
                 promise: Callable[[TopicPartition, int, bytes], None]) -> None:
        self.plane = plane
        self.sim = plane.sim
        self._promise = promise  # an acknowledged (offset, value), for the invariants
        self._ids: dict[TopicPartition, int] = {}
        self._next_sequence: dict[TopicPartition, int] = {}
        self._parts: dict[TopicPartition, _Partition] = {}
        self._written: dict[tuple[TopicPartition, bytes], int] = {}  # acked or read: offset
        self._values = itertools.count()
        self._fresh = 0  # producers started after a fatal error

    # -- sending -----------------------------------------------------------------------

    def produce(self, tp: TopicPartition) -> None:
        """A new batch for ``tp`` (unless its producer already holds enough)."""
        part = self._parts.setdefault(tp, _Partition())
        if len(part.queue) + len(part.in_flight) >= MAX_QUEUED:
            return
        count = self.sim.rng.randint(1, 3)
        sequence = self._next_sequence.get(tp, 0)
        self._next_sequence[tp] = sequence + count
        values = [PREFIX + f"{tp}#{next(self._values)}".encode() for _ in range(count)]
        part.queue.append(_Batch(sequence, values))
        self.plane.stats["idempotent_produced"] += count
        self._pump(tp)

    def _pump(self, tp: TopicPartition) -> None:
        """Send what the queue holds, up to MAX_IN_FLIGHT requests on the connection."""
        part = self._parts.get(tp)
        sim = self.sim
        if part is None or part.draining:
            return
        if tp.topic in sim.zk.to_delete or tp.topic not in sim.zk.topics:
            del self._parts[tp]  # the topic is going: nothing more to deliver
            return
        state = sim.zk.states.get(tp)
        leader = -1 if state is None else state.leader
        if leader < 0 or not sim.nodes[leader].alive:
            if part.queue:
                self._retry_later(tp, part)
            return
        node = sim.nodes[leader]
        if part.in_flight and part.broker != (leader, node.incarnation):
            return  # librdkafka lets the old connection's requests finish before moving
        if not part.in_flight:  # a new connection
            part.broker, part.broken, part.wire = (leader, node.incarnation), False, []
        while part.queue and len(part.in_flight) < MAX_IN_FLIGHT:
            batch = part.queue.pop(0)
            batch.attempts += 1
            if batch.attempts > 1:
                self.plane.stats["idempotent_retries"] += 1
            request = _Request(batch)
            part.in_flight.append(request)
            self._send(tp, part, request, leader)

    def _send(self, tp: TopicPartition, part: _Partition, request: _Request,
              leader: int) -> None:
        sim, batch = self.sim, request.batch
        producer = (self._ids.setdefault(tp, PRODUCER_ID + len(self._ids)), 0, batch.sequence)
        timeout_ms = self.plane.config.produce_timeout_ms
        node = sim.nodes[leader]
        incarnation = node.incarnation

        def serve() -> None:
            if node.alive and node.incarnation == incarnation and node.replicas is not None:
                node.replicas.serve_produce(
                    tp, batch.values, timeout_ms,
                    lambda code, records: self._answered(tp, request, code, records),
                    producer=producer)

        def arrive() -> None:
            # Deliveries due at the same moment may run in any order: each one hands the
            # broker every request sent before it first, so they arrive in order, as on TCP.
            while serve in part.wire:
                part.wire.pop(0)()
        # One connection: requests arrive in order.  A lost one breaks the connection: no
        # later request on it arrives either (only the client's request timeout answers
        # them), as with TCP.
        if sim.rng.random() < self.plane.config.data_drop_ratio:
            part.broken = True
        if not part.broken:
            part.wire.append(serve)
            sim.deliver(0, leader, arrive)
        sim.schedule(2 * timeout_ms + 50,
                     lambda: self._answered(tp, request, ErrorCode.request_timed_out, []))

    def _retry_later(self, tp: TopicPartition, part: _Partition) -> None:
        if part.retry_scheduled:
            return
        part.retry_scheduled = True

        def again() -> None:
            part.retry_scheduled = False
            if self._parts.get(tp) is part:
                self._pump(tp)
        self.sim.schedule(self.sim.rng.randint(*RETRY_BACKOFF_MS), again)

    # -- answers and checks ------------------------------------------------------------

    def _answered(self, tp: TopicPartition, request: _Request, code: ErrorCode,
                  records: list[tuple[int, bytes]]) -> None:
        """A broker's answer to ``request`` (or the client's timeout of it); answers are
        taken in request order, as they come on one connection."""
        part = self._parts.get(tp)
        if part is None or request.answer is not None or request not in part.in_flight:
            return  # answered already (a late answer to a timed-out request is dropped)
        request.answer = (code, records)
        while part.in_flight and part.in_flight[0].answer is not None:
            done = part.in_flight.pop(0)
            assert done.answer is not None
            self.answer(tp, part, done.batch, *done.answer)
            if self._parts.get(tp) is not part:
                return
        if not part.in_flight:
            part.draining = False
            if part.queue:
                self._retry_later(tp, part)

    def answer(self, tp: TopicPartition, part: _Partition, batch: _Batch, code: ErrorCode,
               records: list[tuple[int, bytes]]) -> None:
        """librdkafka's handling of one answer, in request order."""
        earlier = [b for b in part.queue if b.sequence < batch.sequence]
        if code == ErrorCode.out_of_order_sequence_number and not earlier:
            # Head of the line: librdkafka's fatal "sequence desynchronization"; the
            # application starts a new producer (the verifier's workload does).  Reachable
            # against Kafka too: a leader takes any sequence of a producer it has no state
            # of (ProducerAppendInfo.checkSequence), say a later batch after an earlier one
            # failed before it was appended.
            self.plane.stats["idempotent_fatal"] += 1
            self._new_producer(tp, part)
            return
        if code not in (ErrorCode.none, ErrorCode.duplicate_sequence_number):
            self.plane.stats[f"idempotent_{code.name}"] += 1
            batch.error = code
            bisect.insort(part.queue, batch, key=lambda b: b.sequence)
            part.draining = True
            return
        for b in earlier:
            # rd_kafka_dr_implicit_ack: delivered with no offset.  Kafka answers so too (an
            # earlier request timed out or was refused, a later one was then appended), so
            # it is counted, not a violation; the verifier reports it (ack-without-offset).
            part.queue.remove(b)
            self.plane.stats["idempotent_implicit_acks"] += 1
        self.plane.stats["idempotent_acked"] += len(batch.values)
        if code != ErrorCode.none or len(records) != len(batch.values) \
                or any(offset < 0 for offset, _v in records):
            self.sim.violation(f"{tp}: idempotent batch at sequence {batch.sequence} "
                               f"acknowledged without its offsets: {code.name} {records}")
            return
        if tp.topic in self.sim.zk.to_delete or tp.topic not in self.sim.zk.topics:
            return
        for offset, value in records:
            self._written_at(tp, offset, value, "acknowledged")
            self._promise(tp, offset, value)

    def _new_producer(self, tp: TopicPartition, part: _Partition) -> None:
        """A fatal idempotence error: what the producer held fails (written or not: the
        checks only ask that what was read was written once) and a new producer id starts
        again at sequence 0."""
        part.queue.clear()
        part.in_flight.clear()
        part.draining = False
        self._ids[tp] = PRODUCER_ID + 1000 + self._fresh
        self._fresh += 1
        self._next_sequence[tp] = 0

    def committed(self, tp: TopicPartition, offset: int, value: bytes) -> None:
        """A record the consumer read below the high watermark."""
        if value.startswith(PREFIX):
            self._written_at(tp, offset, value, "read")

    def excused(self, tp: TopicPartition, offset: int, value: bytes) -> None:
        """The data plane excused the loss of ``value`` at ``offset`` (the online leader
        lost it to power failure): it is no longer written there, and a retry of its batch
        may write it at another offset."""
        if self._written.get((tp, value)) == offset:
            del self._written[(tp, value)]

    def _written_at(self, tp: TopicPartition, offset: int, value: bytes, how: str) -> None:
        seen = self._written.setdefault((tp, value), offset)
        if seen != offset:
            self.sim.violation(f"{tp}: idempotent record {value!r} written twice, at offsets "
                               f"{seen} and {offset} ({how})")

    def forget_topic(self, topic: str) -> None:
        for tp in [tp for tp in self._parts if tp.topic == topic]:
            del self._parts[tp]
        for key in [k for k in self._written if k[0].topic == topic]:
            del self._written[key]
