"""Idempotent producers in the simulation (``enable.idempotence``, ``acks=all``), as
librdkafka and the Java client behave: per partition one batch in flight, resent unchanged
(same producer id, epoch and base sequence) after an error or a lost answer, to whichever
broker leads the partition by then, until it is acknowledged.

A batch a broker already wrote must be answered, on a retry, with the offsets it was first
written at - by the old leader and by a new one alike, which rebuilt the producer's last
batches while it followed (Kafka's ``ProducerStateEntry``/``BatchMetadata``).  So, checked
as it happens (:meth:`IdempotentProducers.answer`) and on what the consumer reads
(:meth:`IdempotentProducers.committed`):

* **every acknowledgement carries its offsets** (a client told "written" must learn where);
* the acknowledged offsets hold the batch's values (the data plane's ``acknowledged``
  promises, checked by the durability invariants);
* **no batch is written twice**: a value of an idempotent producer is at one offset only.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode
from weir.sim.config import SimConfig
from weir.sim.world import World

__all__ = ["PREFIX", "IdempotentProducers"]

PREFIX = b"idem:"  # the values these producers write
PRODUCER_ID = 7000  # producer ids PRODUCER_ID + n: one producer per partition
RETRY_BACKOFF_MS = (5, 40)


@dataclass
class _Batch:
    sequence: int
    values: list[bytes]
    attempts: int = 0


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
        self._pending: dict[TopicPartition, _Batch] = {}
        self._written: dict[tuple[TopicPartition, bytes], int] = {}  # acked or read: offset
        self._values = itertools.count()

    # -- sending -----------------------------------------------------------------------

    def produce(self, tp: TopicPartition) -> None:
        """A new batch for ``tp`` unless one is still in flight there."""
        if tp in self._pending:
            return
        count = self.sim.rng.randint(1, 3)
        sequence = self._next_sequence.get(tp, 0)
        self._next_sequence[tp] = sequence + count
        values = [PREFIX + f"{tp}#{next(self._values)}".encode() for _ in range(count)]
        self._pending[tp] = _Batch(sequence, values)
        self.plane.stats["idempotent_produced"] += count
        self._send(tp)

    def _send(self, tp: TopicPartition) -> None:
        batch = self._pending.get(tp)
        sim = self.sim
        if batch is None:
            return
        if tp.topic in sim.zk.to_delete or tp.topic not in sim.zk.topics:
            del self._pending[tp]  # the topic is going: nothing more to deliver
            return
        batch.attempts += 1
        attempt = batch.attempts
        if attempt > 1:
            self.plane.stats["idempotent_retries"] += 1
        state = sim.zk.states.get(tp)
        leader = -1 if state is None else state.leader
        if leader < 0 or not sim.nodes[leader].alive:
            self._retry_later(tp, batch)
            return
        producer = (self._ids.setdefault(tp, PRODUCER_ID + len(self._ids)), 0, batch.sequence)
        timeout_ms = self.plane.config.produce_timeout_ms
        self.plane.send(0, sim.nodes[leader], lambda r: r.serve_produce(
            tp, batch.values, timeout_ms,
            lambda code, records: self.answer(tp, batch, code, records), producer=producer))
        # No answer (a lost message, a dead broker): the client's request timeout, a resend.
        sim.schedule(2 * timeout_ms + 50, lambda: self._resend_if_unanswered(tp, batch,
                                                                             attempt))

    def _resend_if_unanswered(self, tp: TopicPartition, batch: _Batch, attempt: int) -> None:
        if self._pending.get(tp) is batch and batch.attempts == attempt:
            self._send(tp)

    def _retry_later(self, tp: TopicPartition, batch: _Batch) -> None:
        def again() -> None:
            if self._pending.get(tp) is batch:
                self._send(tp)
        self.sim.schedule(self.sim.rng.randint(*RETRY_BACKOFF_MS), again)

    # -- answers and checks ------------------------------------------------------------

    def answer(self, tp: TopicPartition, batch: _Batch, code: ErrorCode,
               records: list[tuple[int, bytes]]) -> None:
        """The broker's answer to one attempt at ``batch`` (a late answer to an earlier
        attempt counts as much as the last one's)."""
        if self._pending.get(tp) is not batch:
            return  # answered already
        if code != ErrorCode.none:
            self.plane.stats[f"idempotent_{code.name}"] += 1
            self._retry_later(tp, batch)
            return
        del self._pending[tp]
        self.plane.stats["idempotent_acked"] += len(batch.values)
        if len(records) != len(batch.values) or any(offset < 0 for offset, _v in records):
            self.sim.violation(f"{tp}: idempotent batch at sequence {batch.sequence} "
                               f"acknowledged without its offsets: {records}")
            return
        if tp.topic in self.sim.zk.to_delete or tp.topic not in self.sim.zk.topics:
            return
        for offset, value in records:
            self._written_at(tp, offset, value, "acknowledged")
            self._promise(tp, offset, value)

    def committed(self, tp: TopicPartition, offset: int, value: bytes) -> None:
        """A record the consumer read below the high watermark."""
        if value.startswith(PREFIX):
            self._written_at(tp, offset, value, "read")

    def _written_at(self, tp: TopicPartition, offset: int, value: bytes, how: str) -> None:
        seen = self._written.setdefault((tp, value), offset)
        if seen != offset:
            self.sim.violation(f"{tp}: idempotent record {value!r} written twice, at offsets "
                               f"{seen} and {offset} ({how})")

    def forget_topic(self, topic: str) -> None:
        for tp in [tp for tp in self._pending if tp.topic == topic]:
            del self._pending[tp]
        for key in [k for k in self._written if k[0].topic == topic]:
            del self._written[key]
