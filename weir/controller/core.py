"""The sans-I/O controller: events and ``now_ms`` in, effects out (Kafka's KafkaController).

Usage by a shell::

    effects = core.handle(event, now_ms)
    while True:
        run the plain effects (logs, sends, watches) in order
        if not effects or not isinstance(effects[-1], ZkOperation): break
        result = execute(effects[-1])                  # ZooKeeper I/O, in the shell
        effects = core.complete(result, now_ms)

Each operation is a generator that yields :class:`~weir.controller.effects.ZkOperation`
values and is resumed with their results, so every decision stays here.  The requests of
one event are merged into one batch and emitted after its last ZooKeeper write.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from weir.common import TopicPartition
from weir.controller.alter_partition import IsrManager
from weir.controller.context import ControllerContext, ReplicaAssignment
from weir.controller.deletion import TopicDeletionManager
from weir.controller.effects import (
    Effect,
    Log,
    Reply,
    SendRequests,
    TopicsRead,
    UnwatchTopics,
    WatchTopics,
    ZkDeleteTopic,
    ZkReadTopics,
)
from weir.controller.events import (
    AlterPartition,
    AlterReassignments,
    AutoLeaderRebalance,
    BrokerChange,
    ControlledShutdown,
    ControllerEvent,
    ControllerResigned,
    ElectLeaders,
    LeaderAndIsrResult,
    ListReassignments,
    PartitionModifications,
    PreferredReplicaElection,
    Startup,
    StopReplicaResult,
    TopicChange,
    TopicConfigChange,
    TopicDeletion,
    UncleanLeaderElectionEnable,
    ZkReassignmentChange,
)
from weir.controller.log_dir_events import LogDirEventNotification, on_log_dir_event
from weir.controller.partition_state_machine import PartitionStateMachine
from weir.controller.preferred import LeaderElections
from weir.controller.reassignment import ReassignmentManager
from weir.controller.replica_state_machine import ReplicaStateMachine
from weir.controller.requests import RequestBatch
from weir.controller.scope import EventScope, ZkSteps
from weir.controller.settings import ControllerSettings
from weir.controller.states import PartitionReplica, PartitionState, ReplicaState
from weir.coordination.codecs import TopicAssignment
from weir.protocol.errors import ErrorCode

__all__ = ["ControllerCore"]

R = ReplicaState

_LOG_EACH_FAILURE_UP_TO = 100
"""A LeaderAndIsr answer with more failed partitions is logged as one line per error."""


class ControllerCore:
    """The active controller's logic; inactive until a :class:`Startup` event."""

    def __init__(self, settings: ControllerSettings) -> None:
        self.settings = settings
        self.ctx = ControllerContext()
        self.partitions = PartitionStateMachine(self.ctx, settings)
        self.replicas = ReplicaStateMachine(self.ctx, settings)
        self.deletion = TopicDeletionManager(self.ctx, self.partitions, self.replicas)
        self.isr = IsrManager(self.ctx, self.partitions, self.replicas,
                              batch=self.settings.controlled_shutdown_batch)
        self.elections = LeaderElections(self.ctx, self.partitions, settings)
        self.reassignment = ReassignmentManager(self.ctx, self.partitions, self.replicas,
                                                settings)
        self.active = False
        self._pending: ZkSteps[None] | None = None
        self._scope: EventScope | None = None

    # -- driving -----------------------------------------------------------------------------

    @property
    def awaiting_result(self) -> bool:
        """True while a yielded ZooKeeper operation waits for :meth:`complete`."""
        return self._pending is not None

    def handle(self, event: ControllerEvent, now_ms: int) -> list[Effect]:
        """Handle one event; returns its effects (the last may be a :class:`ZkOperation`)."""
        if self._pending is not None:
            raise RuntimeError("complete() the pending ZooKeeper operation before the next event")
        if isinstance(event, UncleanLeaderElectionEnable):
            was = self.settings.unclean_leader_election_enable
            self._reconfigure(replace(self.settings,
                                      unclean_leader_election_enable=event.enabled))
            if not self.active or was or not event.enabled:
                return []
        elif not self.active and not isinstance(event, Startup):
            return []
        self._scope = EventScope(RequestBatch(self.settings.broker_id, self.ctx), now_ms)
        return self._drive(self._dispatch(event), None)

    def complete(self, result: Any, now_ms: int) -> list[Effect]:
        """Resume the current event with the result of the ZooKeeper operation it yielded."""
        if self._pending is None or self._scope is None:
            raise RuntimeError("no ZooKeeper operation is pending")
        self._scope.now_ms = now_ms
        return self._drive(self._pending, result)

    def abort(self) -> list[Effect]:
        """Drop the event in progress and resign (the shell saw ControllerMovedError)."""
        if self._pending is not None:
            self._pending.close()
        self._pending = None
        self._scope = None
        return self._resign()

    def _drive(self, steps: ZkSteps[None], value: Any) -> list[Effect]:
        scope = self._scope
        assert scope is not None
        try:
            op = steps.send(value)
        except StopIteration:
            return self._finish(scope)
        except Exception as exc:  # noqa: BLE001 - a bug must not kill the event loop
            scope.log(Log.error(f"Controller failed to handle an event: {exc!r}"))
            return self._finish(scope)
        self._pending = steps
        return [*scope.take_effects(), op]

    def _finish(self, scope: EventScope) -> list[Effect]:
        self._pending = None
        self._scope = None
        effects = scope.take_effects()
        held = scope.take_held()
        if self.active and not scope.batch.is_empty():
            requests = held + scope.batch.build()
            if requests:
                effects.append(SendRequests(tuple(requests)))
        elif self.active and held:
            effects.append(SendRequests(tuple(held)))
        return effects

    def _dispatch(self, event: ControllerEvent) -> ZkSteps[None]:
        match event:
            case Startup():
                yield from self._on_failover(event)
            case BrokerChange(brokers=brokers):
                yield from self._on_broker_change(brokers)
            case TopicChange(topics=topics):
                yield from self._on_topic_change(topics)
            case PartitionModifications(topic=topic):
                yield from self._on_partition_modifications(topic)
            case TopicDeletion(topics=topics):
                yield from self._on_topic_deletion(topics)
            case TopicConfigChange(configs=configs):
                yield from self._on_topic_config_change(configs)
            case UncleanLeaderElectionEnable():
                yield from self._on_unclean_default_enabled()
            case StopReplicaResult():
                yield from self._on_stop_replica_result(event)
            case LeaderAndIsrResult():
                yield from self._on_leader_and_isr_result(event)
            case ControlledShutdown():
                yield from self.isr.controlled_shutdown(  # answers early: see there
                    self._current_scope(), event.broker_id, event.broker_epoch,
                    event.reply_to)
            case AlterPartition():
                result = yield from self.isr.alter_partition(
                    self._current_scope(), event.broker_id, event.broker_epoch, event.topics)
                self._reply(event.reply_to, result)
                yield from self.reassignment.on_isr_change(
                    self._current_scope(), self._partitions_of_request(event))
            case AlterReassignments():
                outcome = yield from self.reassignment.alter(self._current_scope(),
                                                             event.targets)
                self._reply(event.reply_to, outcome)
            case ListReassignments():
                self._reply(event.reply_to, self.reassignment.list(event.partitions))
            case ZkReassignmentChange(partitions=partitions):
                yield from self.reassignment.zk_request(self._current_scope(), partitions)
            case ElectLeaders():
                outcome = yield from self.elections.elect(
                    self._current_scope(), event.election_type, event.partitions)
                self._reply(event.reply_to, outcome)
            case PreferredReplicaElection(partitions=partitions):
                yield from self.elections.admin_election(self._current_scope(), partitions)
            case AutoLeaderRebalance():
                yield from self.elections.auto_rebalance(self._current_scope())
            case ControllerResigned():
                self._scope_effects(self._resign())
            case LogDirEventNotification():  # JBOD (KIP-112): weir.controller.log_dir_events
                yield from on_log_dir_event(self, self._current_scope(), event)

    def _partitions_of_request(self, event: AlterPartition) -> list[TopicPartition]:
        names = {topic_id: name for name, topic_id in self.ctx.topic_ids.items()}
        return [TopicPartition(names[tid], p) for tid, parts in event.topics.items()
                if tid in names for p in parts]

    def _current_scope(self) -> EventScope:
        assert self._scope is not None
        return self._scope

    def _reply(self, reply_to: Any, value: Any) -> None:
        if reply_to is not None:
            self._current_scope().effects.append(Reply(reply_to, value))

    def _scope_log(self, entry: Log) -> None:
        assert self._scope is not None
        self._scope.log(entry)

    def _scope_effects(self, effects: Iterable[Effect]) -> None:
        assert self._scope is not None
        self._scope.effects.extend(effects)

    # -- failover and resignation ----------------------------------------------------------

    def _on_failover(self, event: Startup) -> ZkSteps[None]:
        scope = self._scope
        assert scope is not None
        ctx = self.ctx
        ctx.clear()
        self.active = True
        ctx.controller_epoch = event.controller_epoch
        ctx.epoch_zk_version = event.epoch_zk_version
        ctx.live_brokers.update(event.brokers)
        for name, assignment in event.topics.items():
            ctx.add_topic(name, assignment.topic_id, assignment.partitions)
            self._load_reassignments(assignment)
        ctx.zk_reassignments = {tp: tuple(r) for tp, r in event.zk_reassignments.items()}
        ctx.leadership.update(
            (tp, li) for tp, li in event.partition_states.items() if ctx.replicas(tp))
        ctx.topic_configs.update({t: dict(c) for t, c in event.topic_configs.items()})
        scope.log(Log.info(f"Broker {self.settings.broker_id} became controller with epoch "
                           f"{ctx.controller_epoch}; live brokers {sorted(ctx.live_brokers)}, "
                           f"{len(event.topics)} topics"))
        scope.effects.append(WatchTopics(frozenset(event.topics)))
        # Kafka's onControllerFailover: the deletion manager first (the state machines'
        # start-up leaves topics being deleted alone), then UpdateMetadata with the live
        # brokers ahead of the state machines' LeaderAndIsr.
        to_delete = set(event.topics_to_delete) & set(ctx.topic_ids)
        self.deletion.init(scope, to_delete)
        scope.batch.add_leading_update_metadata(ctx.live_brokers)
        scope.batch.add_update_metadata(ctx.live_brokers, all_partitions=True)
        # Leaders that restarted since their partition's state was written (their
        # registration is newer) may have lost an unflushed tail; re-sending them the same
        # leader epoch would let them write new batches at offsets and an epoch that the
        # followers already hold differently. Handle them as bounced brokers: out of the
        # ISRs, new leaders (new epochs) first, then back as followers.
        restarted = self._restarted_leaders()
        saved = {b: ctx.live_brokers.pop(b) for b in restarted}
        self.replicas.initialize()
        # Partition states first (a dead leader makes its partition Offline either way), so
        # that removing the dead replicas from the ISRs also elects the new leaders: one
        # ZooKeeper write per partition instead of two (ISR shrink, then election).
        self.partitions.initialize()
        yield from self.replicas.startup(scope, elector=self.partitions)
        yield from self.partitions.trigger_online_state_change(scope)
        if restarted:
            scope.log(Log.warning(
                f"Leaders {restarted} restarted since their partitions' states were written; "
                "electing again with new leader epochs"))
            ctx.live_brokers.update(saved)
            yield from self._on_broker_startup(restarted)
        unknown = set(event.topics_to_delete) - to_delete
        for topic in sorted(unknown):
            yield from self._delete_unknown_topic_marker(topic)
        yield from self.deletion.resume_deletions(scope)
        yield from self.reassignment.resume_all(scope)
        if event.zk_reassignments:
            yield from self.reassignment.zk_request(scope, event.zk_reassignments)

    def _restarted_leaders(self) -> list[int]:
        """Live brokers leading a partition whose state predates their registration."""
        ctx = self.ctx
        return sorted({
            li.leader for li in ctx.leadership.values()
            if li.leader in ctx.live_brokers and li.mzxid >= 0
            and ctx.live_brokers[li.leader].epoch > li.mzxid
        })

    def _load_reassignments(self, assignment: TopicAssignment) -> None:
        """Moves in progress recorded in a topic znode (KIP-455) go to the context."""
        for index in set(assignment.adding) | set(assignment.removing):
            replicas = assignment.partitions.get(index)
            if replicas:
                self.ctx.reassignments[TopicPartition(assignment.name, index)] = (
                    ReplicaAssignment(tuple(replicas), tuple(assignment.adding.get(index, ())),
                                      tuple(assignment.removing.get(index, ()))))

    def _resign(self) -> list[Effect]:
        was_active = self.active
        self.active = False
        topics = frozenset(self.ctx.topic_ids)
        self.ctx.clear()
        if not was_active:
            return []
        return [UnwatchTopics(topics),
                Log.info(f"Broker {self.settings.broker_id} resigned as controller")]

    # -- brokers ---------------------------------------------------------------------------

    def _on_broker_change(self, brokers: Any) -> ZkSteps[None]:
        ctx = self.ctx
        current = dict(brokers)
        new = sorted(set(current) - set(ctx.live_brokers))
        dead = sorted(set(ctx.live_brokers) - set(current))
        bounced = sorted(b for b in set(current) & set(ctx.live_brokers)
                         if current[b].epoch != ctx.live_brokers[b].epoch)
        # Same registration, new content (a dynamic advertised.listeners change): Kafka's
        # processBrokerModification updates the broker's endpoints and sends every live
        # broker UpdateMetadata (onBrokerUpdate).
        updated = sorted(b for b in set(current) & set(ctx.live_brokers)
                         if b not in bounced and current[b] != ctx.live_brokers[b])
        if updated:
            self._scope_log(Log.info(f"Updated broker metadata: {updated}"))
            ctx.live_brokers.update({b: current[b] for b in updated})
            scope = self._scope
            assert scope is not None
            scope.batch.add_leading_update_metadata(set(ctx.live_brokers))
        if not (new or dead or bounced):
            return
        self._scope_log(Log.info(f"Broker change: new {new}, dead {dead}, bounced {bounced}"))
        if new:
            ctx.live_brokers.update({b: current[b] for b in new})
            yield from self._on_broker_startup(new)
        if bounced:
            for b in bounced:
                del ctx.live_brokers[b]
            yield from self._on_broker_failure(bounced)
            ctx.live_brokers.update({b: current[b] for b in bounced})
            yield from self._on_broker_startup(bounced)
        if dead:
            for b in dead:
                del ctx.live_brokers[b]
            yield from self._on_broker_failure(dead)

    def _on_broker_startup(self, brokers: list[int]) -> ZkSteps[None]:
        scope = self._scope
        assert scope is not None
        ctx = self.ctx
        ctx.brokers_sent_full_leader_and_isr.difference_update(brokers)
        for b in brokers:
            ctx.replicas_on_offline_dirs.pop(b, None)
        # Kafka's onBrokerStartup: UpdateMetadata first, the live brokers to everyone and
        # every partition to the new brokers, then the replicas' LeaderAndIsr (and
        # UpdateMetadata for the partitions that change on the way).
        scope.batch.add_leading_update_metadata(set(ctx.live_brokers) - set(brokers))
        scope.batch.add_leading_update_metadata(brokers, all_partitions=True)
        hosted = ctx.replicas_on_brokers(brokers)
        on_new = [r for r in hosted if ctx.replica_state(r) is not R.DELETION_SUCCESSFUL]
        yield from self.replicas.handle_state_changes(scope, on_new, R.ONLINE)
        yield from self.partitions.trigger_online_state_change(scope)
        # All of them, deleted ones too: their broker's death made the topic ineligible.
        deleting = {r.partition.topic for r in hosted
                    if ctx.is_topic_queued_for_deletion(r.partition.topic)}
        yield from self.reassignment.on_broker_startup(scope, brokers)
        yield from self.deletion.resume_for_topics(scope, deleting)

    def _on_broker_failure(self, brokers: list[int]) -> ZkSteps[None]:
        ctx = self.ctx
        ctx.shutting_down.difference_update(brokers)
        for b in brokers:
            ctx.replicas_on_offline_dirs.pop(b, None)
        yield from self._on_replicas_offline(ctx.replicas_on_brokers(brokers))

    def _on_replicas_offline(self, replicas: list[PartitionReplica]) -> ZkSteps[None]:
        """Kafka's onReplicasBecomeOffline (dead brokers' replicas, failed log dirs)."""
        scope = self._scope
        assert scope is not None
        ctx = self.ctx
        to_delete = ctx.topics_to_delete
        if to_delete:
            active = [r for r in replicas if r.partition.topic not in to_delete]
            deleting = [r for r in replicas if r.partition.topic in to_delete]
        else:
            active, deleting = replicas, []
        # One pass over every partition (Kafka's partitionsWithOfflineLeader), with the
        # context's lookups inlined: this runs for every broker failure.
        live = ctx.live_brokers
        offline_dirs = ctx.replicas_on_offline_dirs
        states = ctx.partition_states
        eligible_states = (PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE)
        leaderless = [
            tp for tp, li in ctx.leadership.items()
            if (li.leader not in live or (offline_dirs and not ctx.is_replica_online(
                li.leader, tp)))
            and tp.topic not in to_delete
            and states.get(tp, PartitionState.NON_EXISTENT) in eligible_states
        ]
        yield from self.partitions.handle_state_changes(scope, leaderless,
                                                        PartitionState.OFFLINE)
        # One write round: the offline replicas leave the ISRs and the partitions they led
        # get new leaders (the offline selector) in the same conditional writes.
        yield from self.replicas.handle_state_changes(scope, active, R.OFFLINE,
                                                      elector=self.partitions)
        yield from self.partitions.trigger_online_state_change(scope)
        yield from self.deletion.fail_replica_deletion(scope, deleting)
        scope.batch.add_update_metadata(ctx.live_brokers)

    # -- topics ----------------------------------------------------------------------------

    def _on_topic_change(self, topics: frozenset[str]) -> ZkSteps[None]:
        ctx = self.ctx
        new = set(topics) - set(ctx.topic_ids)
        gone = set(ctx.topic_ids) - set(topics)
        for topic in sorted(gone):
            self._scope_log(Log.info(f"Topic {topic} disappeared from ZooKeeper"))
            ctx.remove_topic(topic)
        if gone:
            self._scope_effects([UnwatchTopics(frozenset(gone))])
        if not new:
            return
        read: TopicsRead = yield ZkReadTopics(frozenset(new))
        added: list[TopicPartition] = []
        for name, assignment in read.assignments.items():
            if name not in new:
                continue
            ctx.add_topic(name, assignment.topic_id, assignment.partitions)
            ctx.topic_configs[name] = dict(read.configs.get(name, {}))
            added.extend(ctx.partitions_of(name))
        self._scope_log(Log.info(f"New topics: {sorted(read.assignments)}"))
        self._scope_effects([WatchTopics(frozenset(read.assignments))])
        yield from self._on_new_partitions(added)

    def _on_partition_modifications(self, topic: str) -> ZkSteps[None]:
        ctx = self.ctx
        if topic not in ctx.topic_ids:
            return
        if ctx.is_topic_queued_for_deletion(topic):
            self._scope_log(Log.info(f"Ignoring partition changes of {topic}: being deleted"))
            return
        read: TopicsRead = yield ZkReadTopics(frozenset({topic}))
        assignment = read.assignments.get(topic)
        if assignment is None:
            return
        known = ctx.assignments.get(topic, {})
        added = {p: r for p, r in assignment.partitions.items() if p not in known}
        if not added:
            return
        ctx.add_topic(topic, assignment.topic_id, added)
        self._scope_log(Log.info(f"New partitions of {topic}: {sorted(added)}"))
        yield from self._on_new_partitions([TopicPartition(topic, p) for p in sorted(added)])

    def _on_new_partitions(self, partitions: list[TopicPartition]) -> ZkSteps[None]:
        """Kafka's onNewPartitionCreation: New, NewReplica, Online, OnlineReplica."""
        scope = self._scope
        assert scope is not None
        if not partitions:
            return
        replicas = [PartitionReplica(tp, r) for tp in partitions for r in self.ctx.replicas(tp)]
        yield from self.partitions.handle_state_changes(scope, partitions, PartitionState.NEW)
        yield from self.replicas.handle_state_changes(scope, replicas, R.NEW)
        yield from self.partitions.handle_state_changes(scope, partitions,
                                                        PartitionState.ONLINE)
        yield from self.replicas.handle_state_changes(scope, replicas, R.ONLINE)

    def _on_topic_config_change(self, configs: Any) -> ZkSteps[None]:
        """New overrides take effect at the next election; enabling unclean election
        elects the topic's Offline partitions now (Kafka's TopicUncleanLeaderElectionEnable
        → triggerOnlinePartitionStateChange(topic))."""
        scope = self._scope
        assert scope is not None
        ctx = self.ctx
        default = self.settings.unclean_leader_election_enable
        enabled = []
        for topic, overrides in sorted(configs.items()):
            if topic not in ctx.topic_ids:
                continue
            was = ctx.unclean_allowed(topic, default)
            ctx.topic_configs[topic] = dict(overrides)
            if not was and ctx.unclean_allowed(topic, default):
                enabled.append(topic)
        if not enabled:
            return
        scope.log(Log.info(f"Unclean leader election enabled for {enabled}"))
        offline = [tp for topic in enabled if not ctx.is_topic_queued_for_deletion(topic)
                   for tp in ctx.partitions_of(topic)
                   if ctx.partition_state(tp) in (PartitionState.NEW, PartitionState.OFFLINE)]
        yield from self.partitions.handle_state_changes(scope, offline, PartitionState.ONLINE)

    def _reconfigure(self, settings: ControllerSettings) -> None:
        """New settings for the core and its state machines (a dynamic broker config)."""
        self.settings = settings
        for part in (self.partitions, self.replicas, self.elections, self.reassignment):
            part._settings = settings

    def _on_unclean_default_enabled(self) -> ZkSteps[None]:
        """The broker default of ``unclean.leader.election.enable`` became true: elect the
        Offline partitions of every topic without an override saying false (Kafka's
        processUncleanLeaderElectionEnable → triggerOnlinePartitionStateChange)."""
        scope = self._scope
        assert scope is not None
        ctx = self.ctx
        offline = [tp for topic in sorted(ctx.topic_ids)
                   if ctx.unclean_allowed(topic, True)
                   and not ctx.is_topic_queued_for_deletion(topic)
                   for tp in ctx.partitions_of(topic)
                   if ctx.partition_state(tp) in (PartitionState.NEW, PartitionState.OFFLINE)]
        scope.log(Log.info("Unclean leader election enabled as the broker default; "
                           f"electing {len(offline)} offline partitions"))
        yield from self.partitions.handle_state_changes(scope, offline, PartitionState.ONLINE)

    def _on_topic_deletion(self, topics: frozenset[str]) -> ZkSteps[None]:
        scope = self._scope
        assert scope is not None
        known = set(topics) & set(self.ctx.topic_ids)
        for topic in sorted(set(topics) - known):
            yield from self._delete_unknown_topic_marker(topic)
        yield from self.deletion.enqueue(scope, known - self.ctx.topics_to_delete)

    def _delete_unknown_topic_marker(self, topic: str) -> ZkSteps[None]:
        self._scope_log(Log.info(f"Ignoring deletion of unknown topic {topic}"))
        yield ZkDeleteTopic(topic, self.ctx.epoch_zk_version)

    # -- broker responses ------------------------------------------------------------------

    def _on_stop_replica_result(self, event: StopReplicaResult) -> ZkSteps[None]:
        scope = self._scope
        assert scope is not None
        ctx = self.ctx
        failed, succeeded = [], []
        for tp, code in event.errors.items():
            replica = PartitionReplica(tp, event.broker_id)
            if ctx.replica_state(replica) is not R.DELETION_STARTED:
                continue
            (succeeded if code == ErrorCode.none else failed).append(replica)
            if code != ErrorCode.none:
                scope.log(Log.warning(f"Deletion of replica {replica} failed: {code.name}"))
        if failed:
            yield from self.deletion.fail_replica_deletion(scope, failed)
            if event.broker_id in ctx.live_broker_ids and all(
                    event.errors[r.partition] == ErrorCode.stale_broker_epoch for r in failed):
                # KIP-380: the StopReplica was built with the epoch of an incarnation that
                # has since restarted, and the broker is back under a newer one. Kafka's
                # onBrokerStartup resumes the deletion; if the restart was handled before
                # this answer arrived, nothing else would: retry now, with the new epoch.
                yield from self.deletion.resume_for_topics(
                    scope, {r.partition.topic for r in failed})
        if succeeded:
            yield from self.deletion.complete_replica_deletion(scope, succeeded)

    def _on_leader_and_isr_result(self, event: LeaderAndIsrResult) -> ZkSteps[None]:
        """Kafka's processLeaderAndIsrResponseReceived: replicas answered with
        KAFKA_STORAGE_ERROR are on a failed log directory and go offline."""
        ctx = self.ctx
        errors = event.errors
        none = ErrorCode.none
        failed = [(tp, code) for tp, code in errors.items() if code != none]
        failed.sort()  # only the failures are logged: the answer may hold every partition
        storage = {tp for tp, code in failed if code == ErrorCode.kafka_storage_error}
        if len(failed) <= _LOG_EACH_FAILURE_UP_TO:
            for tp, code in failed:
                self._scope_log(Log.warning(
                    f"Broker {event.broker_id} failed LeaderAndIsr for {tp}: {code.name}"))
        else:  # one line per error code (a failover's answers may refuse thousands)
            by_code: dict[ErrorCode, list[TopicPartition]] = {}
            for tp, code in failed:
                by_code.setdefault(code, []).append(tp)
            for code, tps in by_code.items():
                self._scope_log(Log.warning(
                    f"Broker {event.broker_id} failed LeaderAndIsr for {len(tps)} partitions: "
                    f"{code.name} (first {', '.join(map(str, tps[:5]))})"))
        if event.broker_id not in ctx.live_brokers:
            return  # an answer of a previous incarnation
        before = ctx.replicas_on_offline_dirs.get(event.broker_id, set())
        if not before and not storage:
            return  # the common case: nothing was or is on a failed log directory
        ok = {tp for tp in before if errors.get(tp) == none}
        now = (before - ok) | {tp for tp in storage if event.broker_id in ctx.replicas(tp)}
        if now:
            ctx.replicas_on_offline_dirs[event.broker_id] = now
        else:
            ctx.replicas_on_offline_dirs.pop(event.broker_id, None)
        new = sorted(now - before)
        if new:
            self._scope_log(Log.info(f"Replicas of {[str(tp) for tp in new]} on broker "
                                     f"{event.broker_id} are on a failed log directory: "
                                     "marking them offline"))
            yield from self._on_replicas_offline(
                [PartitionReplica(tp, event.broker_id) for tp in new])
