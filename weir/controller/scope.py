"""The per-event scope shared by the state machines, and the ZK-step generator type.

State machine operations are generators: they ``yield`` a :class:`ZkOperation` and are
resumed with its result (``result = yield op``).  Plain effects and requests go into the
:class:`EventScope` of the event being handled.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from weir.common import TopicPartition
from weir.controller.context import ControllerContext
from weir.controller.effects import (
    Effect,
    Log,
    ZkOperation,
    ZkReadPartitionStates,
    ZkUpdatePartitionStates,
)
from weir.controller.requests import RequestBatch
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

    def log(self, entry: Log) -> None:
        self.effects.append(entry)

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
