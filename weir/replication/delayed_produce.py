"""An ``acks=all`` produce waiting for its followers: Kafka's ``DelayedProduce``.

One :class:`DelayedProduce` per request, over the partitions appended with ``acks=all``.
Sans-I/O: it holds each partition's required offset and the leadership it was appended
under, and sets each partition's error in the request's results as it is decided.

- :meth:`DelayedProduce.try_complete` is Kafka's ``tryComplete``: each partition still
  waiting is checked once more (``Partition.checkEnoughReplicasReachOffset``); True once
  every partition is decided.  The produce purgatory calls it when a follower's fetch moves
  the high watermark, when the ISR changes and when the partition's leadership changes.
- :meth:`DelayedProduce.on_expire` is Kafka's ``onExpiration`` + ``onComplete`` at the
  request's timeout: a partition still waiting is REQUEST_TIMED_OUT.

A partition's decision is kept once made, as Kafka's ``ProducePartitionStatus.acksPending``
is cleared once: records under the high watermark stay committed whatever happens later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from weir.replication.partition import Partition


class _Result(Protocol):
    error: ErrorCode


class DelayedProduce:
    """Kafka's ``DelayedProduce`` (see the module docstring).

    ``partitions`` is the replica manager's live map of hosted partitions (read at every
    check: a partition removed or re-created since the append is no longer the one the
    records were appended to).  Each partition's ``min.insync.replicas`` is its topic's,
    read only when the ISR is not complete (``Partition.effective_min_isr``)."""

    __slots__ = ("_partitions", "_pending", "results")

    def __init__(self, required: dict[TopicPartition, int],
                 results: dict[TopicPartition, _Result],
                 partitions: dict[TopicPartition, Partition]) -> None:
        self.results = results
        self._partitions = partitions
        # Partitions still waiting: (required offset, the Partition appended to, its
        # leadership generation then).  Right after the append this broker leads each one.
        self._pending: dict[TopicPartition, tuple[int, Partition, int]] = {}
        for tp, offset in required.items():
            p = partitions[tp]
            self._pending[tp] = (offset, p, p.leadership_generation)

    @property
    def keys(self) -> list[TopicPartition]:
        """The partitions this operation is watched under in the produce purgatory."""
        return list(self._pending)

    def _status(self, tp: TopicPartition, offset: int, led: Partition,
                generation: int) -> ErrorCode | None:
        """None while waiting; else the partition's final error.  It asks only that this
        broker led the partition without interruption since the append (the same
        ``Partition`` object and leadership generation: after leader -> follower -> leader
        the records may have been truncated) and that the high watermark passed the
        offset; a leader-epoch bump that keeps this broker leader does not fail the wait."""
        current = self._partitions.get(tp)
        if current is not led or current.leadership_generation != generation:
            return ErrorCode.not_leader_or_follower
        return current.check_enough_replicas_reach_offset(offset)

    def try_complete(self) -> bool:
        """Kafka's ``DelayedProduce.tryComplete``: decide what can be decided; True once
        every partition is."""
        pending = self._pending
        for tp, (offset, led, generation) in list(pending.items()):
            code = self._status(tp, offset, led, generation)
            if code is not None:
                self.results[tp].error = code
                del pending[tp]
        return not pending

    def on_expire(self) -> None:
        """The request's timeout passed: a last check, then REQUEST_TIMED_OUT for each
        partition whose followers have not caught up."""
        if self.try_complete():
            return
        for tp in self._pending:
            self.results[tp].error = ErrorCode.request_timed_out
        self._pending.clear()

    @property
    def is_completed(self) -> bool:
        return not self._pending
