"""Topic deletion (Kafka's TopicDeletionManager), driven by the two state machines.

A topic queued for deletion (``/admin/delete_topics/<t>``) goes through:

1. its partitions -> Offline -> NonExistent, UpdateMetadata (leader -2) to every broker;
2. its live replicas -> Offline -> ReplicaDeletionStarted (StopReplica with delete);
   replicas on dead brokers -> ReplicaDeletionIneligible, and the topic is ineligible;
3. as brokers answer: ReplicaDeletionSuccessful, or ReplicaDeletionIneligible on error;
4. when every replica succeeded: replicas -> NonExistent, znodes removed, topic forgotten.

An ineligible topic resumes when a broker hosting one of its replicas starts again.

A topic may be deleted while one of its partitions is being reassigned, as Kafka's
controller does when the deletion arrives during the move (processTopicDeletion marks only
topics already queued ineligible).  Its moves end with it (the reassignment manager
neither advances nor completes a move of a topic queued for deletion), and so do their entries in
``/admin/reassign_partitions``, removed before the topic's znodes: left behind, an entry
would move the partition of a topic re-created under that name.
"""

from __future__ import annotations

from collections.abc import Iterable

from weir.controller.context import ControllerContext
from weir.controller.effects import Log, UnwatchTopics, ZkDeleteTopic, ZkSetReassignments
from weir.controller.partition_state_machine import PartitionStateMachine
from weir.controller.replica_state_machine import ReplicaStateMachine
from weir.controller.scope import EventScope, ZkSteps
from weir.controller.states import PartitionReplica, PartitionState, ReplicaState

__all__ = ["TopicDeletionManager"]

R = ReplicaState


class TopicDeletionManager:
    """See the module docstring."""

    def __init__(self, ctx: ControllerContext, partitions: PartitionStateMachine,
                 replicas: ReplicaStateMachine) -> None:
        self._ctx = ctx
        self._psm = partitions
        self._rsm = replicas

    def topics_with_offline_replicas(self, topics: Iterable[str]) -> set[str]:
        ctx = self._ctx
        return {
            t for t in topics
            if any(not ctx.is_replica_online(r.replica) for r in ctx.replicas_of_topic(t))
        }

    def init(self, scope: EventScope, topics: Iterable[str]) -> None:
        """Controller failover, before the state machines start (Kafka's
        TopicDeletionManager.init): queue the topics, mark those with a replica on a dead
        broker ineligible.  :meth:`resume_deletions` starts the work afterwards."""
        topics = set(topics)
        if topics:
            self._ctx.topics_to_delete |= topics
            self.mark_ineligible(scope, self.topics_with_offline_replicas(topics))

    def enqueue(self, scope: EventScope, topics: Iterable[str]) -> ZkSteps[None]:
        """Queue topics for deletion (ineligible if a replica's broker is down) and go on."""
        topics = set(topics)
        if not topics:
            return
        self._ctx.topics_to_delete |= topics
        blocked = self.topics_with_offline_replicas(topics)
        self.mark_ineligible(scope, blocked)
        yield from self.resume_deletions(scope)

    def mark_ineligible(self, scope: EventScope, topics: Iterable[str]) -> None:
        topics = set(topics) & self._ctx.topics_to_delete
        if topics:
            scope.log(Log.info(f"Halted deletion of topics {sorted(topics)}"))
            self._ctx.topics_ineligible_for_deletion |= topics

    def resume_for_topics(self, scope: EventScope, topics: Iterable[str]) -> ZkSteps[None]:
        """Make topics eligible again (a broker came back) and resume deletions."""
        topics = set(topics) & self._ctx.topics_to_delete
        if topics:
            self._ctx.topics_ineligible_for_deletion -= topics
            yield from self.resume_deletions(scope)

    def fail_replica_deletion(self, scope: EventScope,
                              replicas: Iterable[PartitionReplica]) -> ZkSteps[None]:
        """Replicas whose deletion failed (error, or their broker died)."""
        ctx = self._ctx
        replicas = [r for r in replicas if ctx.is_topic_queued_for_deletion(r.partition.topic)]
        if not replicas:
            return
        started = [r for r in replicas if ctx.replica_state(r) is R.DELETION_STARTED]
        waiting = [r for r in replicas if ctx.replica_state(r) in (R.NEW, R.ONLINE)]
        yield from self._rsm.handle_state_changes(scope, started, R.DELETION_INELIGIBLE)
        yield from self._rsm.handle_state_changes(scope, waiting, R.OFFLINE)
        self.mark_ineligible(scope, {r.partition.topic for r in replicas})
        yield from self.resume_deletions(scope)

    def complete_replica_deletion(self, scope: EventScope,
                                  replicas: Iterable[PartitionReplica]) -> ZkSteps[None]:
        """Replicas whose broker confirmed the deletion."""
        replicas = [r for r in replicas if self._ctx.replica_state(r) is R.DELETION_STARTED]
        yield from self._rsm.handle_state_changes(scope, replicas, R.DELETION_SUCCESSFUL)
        yield from self.resume_deletions(scope)

    def resume_deletions(self, scope: EventScope) -> ZkSteps[None]:
        """Complete, retry or start the deletion of every queued topic, as it allows."""
        ctx = self._ctx
        retry: list[str] = []
        start: list[str] = []
        for topic in sorted(ctx.topics_to_delete):
            states = [ctx.replica_state(r) for r in ctx.replicas_of_topic(topic)]
            if all(s is R.DELETION_SUCCESSFUL for s in states):
                yield from self._complete_topic(scope, topic)
                continue
            if R.DELETION_STARTED in states:
                continue
            if R.DELETION_INELIGIBLE in states:
                retry.append(topic)
            if topic not in ctx.topics_ineligible_for_deletion:
                start.append(topic)
        for topic in retry:
            failed = ctx.replicas_in_state(topic, R.DELETION_INELIGIBLE)
            scope.log(Log.info(f"Retrying deletion of topic {topic}: replicas "
                               f"{[str(r) for r in failed]} were not deleted"))
            yield from self._rsm.handle_state_changes(scope, failed, R.OFFLINE)
        if start:
            yield from self._start_deletion(scope, start)

    def _start_deletion(self, scope: EventScope, topics: list[str]) -> ZkSteps[None]:
        ctx = self._ctx
        unseen = [t for t in topics if t not in ctx.topics_with_deletion_started]
        if unseen:
            partitions = [tp for t in unseen for tp in ctx.partitions_of(t)]
            yield from self._psm.handle_state_changes(scope, partitions, PartitionState.OFFLINE)
            yield from self._psm.handle_state_changes(scope, partitions,
                                                      PartitionState.NON_EXISTENT)
            ctx.topics_with_deletion_started.update(unseen)
        scope.batch.add_update_metadata(
            ctx.live_brokers, [tp for t in topics for tp in ctx.partitions_of(t)])
        for topic in topics:
            scope.log(Log.info(f"Deletion of topic {topic} (re)started"))
            replicas = [r for r in ctx.replicas_of_topic(topic)
                        if ctx.replica_state(r) is not R.DELETION_SUCCESSFUL]
            dead = [r for r in replicas if not ctx.is_replica_online(r.replica)]
            alive = [r for r in replicas if ctx.is_replica_online(r.replica)]
            yield from self._rsm.handle_state_changes(scope, dead, R.DELETION_INELIGIBLE)
            yield from self._rsm.handle_state_changes(scope, alive, R.OFFLINE)
            yield from self._rsm.handle_state_changes(scope, alive, R.DELETION_STARTED)
            if dead:
                self.mark_ineligible(scope, [topic])

    def _complete_topic(self, scope: EventScope, topic: str) -> ZkSteps[None]:
        ctx = self._ctx
        done = ctx.replicas_in_state(topic, R.DELETION_SUCCESSFUL)
        yield from self._rsm.handle_state_changes(scope, done, R.NON_EXISTENT)
        scope.effects.append(UnwatchTopics(frozenset({topic})))
        moves = [tp for tp in ctx.zk_reassignments if tp.topic == topic]
        if moves:
            for tp in moves:
                del ctx.zk_reassignments[tp]
            scope.log(Log.info(f"Removing the reassignments of deleted topic {topic} from "
                               "/admin/reassign_partitions"))
            yield ZkSetReassignments(dict(ctx.zk_reassignments), ctx.epoch_zk_version)
        yield ZkDeleteTopic(topic, ctx.epoch_zk_version)
        ctx.remove_topic(topic)
        scope.log(Log.info(f"Deletion of topic {topic} successfully completed"))
