"""What a change to a partition wakes: the one place the replica manager's parts report
high-watermark, ISR, record and leadership changes to.

Kafka's ``ReplicaManager`` reacts to the same events by ``tryCompleteDelayedProduce`` /
``tryCompleteDelayedFetch`` (``Partition.tryCompleteDelayedRequests``) and, for a role
change, by its ``onLeadershipChange`` callback (the group and transaction coordinators load
or unload their partitions).  Here:

- the produce purgatory holds ``DelayedProduce`` operations (``acks=all``): they may
  complete when the high watermark moves, the ISR changes or the leadership changes;
- the fetch purgatory holds ``DelayedFetch`` and ``DelayedDeleteRecords``: they may
  complete when records are appended, the high or low watermark moves or the leadership
  changes;
- the leadership listeners hear of each role change this broker applies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from weir.common import TopicPartition
from weir.replication.purgatory import Purgatory

log = logging.getLogger(__name__)

LeadershipListener = Callable[[TopicPartition, bool, int], None]


class PartitionNotifier:
    __slots__ = ("fetch", "leadership_listeners", "produce")

    def __init__(self, produce: Purgatory, fetch: Purgatory) -> None:
        self.produce = produce
        self.fetch = fetch
        # Called as listener(tp, is_leader, leader_epoch) after each role change.
        self.leadership_listeners: list[LeadershipListener] = []

    def records_appended(self, tp: TopicPartition) -> None:
        """New records in the log (as leader or follower), or its start moved: waiting
        fetches may now have their bytes, DeleteRecords its low watermark."""
        self.fetch.notify(tp)

    def high_watermark_changed(self, tp: TopicPartition) -> None:
        """The leader's high watermark moved: ``acks=all`` produces and consumer fetches."""
        self.produce.notify(tp)
        self.fetch.notify(tp)

    def isr_changed(self, tp: TopicPartition, high_watermark_moved: bool) -> None:
        """The ISR changed (Kafka's ``Partition.maybeShrinkIsr``/``expandIsr``): waiting
        produces may now fail on min.insync.replicas; waiting fetches are retried only if
        the high watermark moved (each retry re-reads every partition of a follower's
        fetch, so retrying them on every ISR change is quadratic at many partitions)."""
        if high_watermark_moved:
            self.fetch.notify(tp)
        self.produce.notify(tp)

    def log_replaced(self, tp: TopicPartition) -> None:
        """The partition's log object changed (a move between log dirs): every waiter
        re-checks against the new one."""
        self.produce.notify(tp)
        self.fetch.notify(tp)

    def leadership_changed(self, tp: TopicPartition, is_leader: bool, leader_epoch: int,
                           *, tell_listeners: bool = True) -> None:
        """A role change applied (LeaderAndIsr, StopReplica, a failed log dir): the
        listeners first, then the waiters, which a role change may have fenced.
        ``tell_listeners`` False: this broker neither led nor leads (nothing for the
        coordinators)."""
        if tell_listeners:
            for listener in self.leadership_listeners:
                try:
                    listener(tp, is_leader, leader_epoch)
                except Exception:
                    log.exception("leadership listener failed for %s", tp)
        self.produce.notify(tp)
        self.fetch.notify(tp)
