"""The per-event scope shared by the state machines, and the ZK-step generator type.

State machine operations are generators: they ``yield`` a :class:`ZkOperation` and are
resumed with its result (``result = yield op``).  Plain effects and requests go into the
:class:`EventScope` of the event being handled.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from weir.common import TopicPartition
from weir.controller.context import ControllerContext
from weir.controller.effects import (
    Effect,
    Log,
    SendRequests,
    ZkOperation,
    ZkReadPartitionStates,
    ZkUpdatePartitionStates,
)
from weir.controller.requests import OutboundRequest, RequestBatch
from weir.coordination.codecs import LeaderIsr

__all__ = ["EventScope", "ZkSteps", "update_leader_isr"]

T = TypeVar("T")
ZkSteps = Generator[ZkOperation, Any, T]
"""A core operation: yields ZooKeeper operations, receives their results, returns T."""


@dataclass
class EventScope:
    """Collects the effects and the request batch of the event being handled."""

    batch: RequestBatch
    now_ms: int
    effects: list[Effect] = field(default_factory=list)
    held: list[OutboundRequest] = field(default_factory=list)

    def log(self, entry: Log) -> None:
        self.effects.append(entry)

    def send_now(self, hold: Collection[int] = ()) -> None:
        """Send what the batch holds now, ahead of the event's further ZooKeeper writes,
        and go on with an empty batch (Kafka's state machines end each
        ``handleStateChanges`` with ``sendRequestsToBrokers``: the LeaderAndIsr and
        UpdateMetadata of newly elected leaders leave before the replica state machine's
        ISR shrinks are written).  Each broker's channel keeps the order of the batches.

        The requests for the brokers in ``hold`` are kept back and go first in the event's
        last batch (:meth:`take_held`).
        """
        if self.batch.is_empty():
            return
        requests = self.batch.build()
        self.batch = self.batch.fresh()
        now = tuple(r for r in requests if r.broker_id not in hold)
        self.held.extend(r for r in requests if r.broker_id in hold)
        if now:
            self.effects.append(SendRequests(now))

    def take_held(self) -> list[OutboundRequest]:
        """The requests :meth:`send_now` kept back (in their order), now taken."""
        held, self.held = self.held, []
        return held

    def take_effects(self) -> list[Effect]:
        taken, self.effects = self.effects, []
        return taken


def update_leader_isr(ctx: ControllerContext, scope: EventScope,
                      partitions: Iterable[TopicPartition],
                      compute: Callable[[TopicPartition, LeaderIsr], LeaderIsr | None],
                      max_attempts: int) -> ZkSteps[dict[TopicPartition, LeaderIsr]]:
    """Conditionally write new leader/ISR states computed from the current ones.

    ``compute(tp, current)`` returns the state to write (its zk version being the expected
    one) or ``None`` to skip the partition.  All writes of one attempt form one ZooKeeper
    operation; partitions whose write fails are re-read and recomputed, up to
    ``max_attempts`` times.  Returns the states written (with their new zk versions); the
    context's leadership is updated for them.
    """
    done: dict[TopicPartition, LeaderIsr] = {}
    remaining = list(partitions)
    for attempt in range(1, max_attempts + 1):
        updates: dict[TopicPartition, LeaderIsr] = {}
        for tp in remaining:
            current = ctx.leadership.get(tp)
            if current is None:
                scope.log(Log.error(f"No leader/ISR state for {tp}; cannot update it"))
                continue
            new = compute(tp, current)
            if new is not None:
                updates[tp] = new
        if not updates:
            break
        results = yield ZkUpdatePartitionStates(updates, ctx.epoch_zk_version)
        failed = []
        for tp in updates:
            res = results.get(tp)
            if isinstance(res, LeaderIsr):
                ctx.leadership[tp] = res
                done[tp] = res
            else:
                failed.append((tp, res))
        if not failed:
            break
        if attempt == max_attempts:
            for tp, err in failed:
                scope.log(Log.error(f"Giving up updating leader/ISR of {tp}: {err!r}"))
            break
        fresh = yield ZkReadPartitionStates(frozenset(tp for tp, _ in failed))
        remaining = []
        for tp, err in failed:
            if tp in fresh:
                ctx.leadership[tp] = fresh[tp]
                remaining.append(tp)
            else:
                scope.log(Log.error(f"Leader/ISR state of {tp} vanished: {err!r}"))
    return done
