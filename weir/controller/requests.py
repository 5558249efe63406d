"""Per-event batching of controller-to-broker requests (Kafka's ControllerBrokerRequestBatch).

While the core handles one event, the state machines add partitions to a
:class:`RequestBatch`.  At the end of the event :meth:`RequestBatch.build` turns it into at
most one LeaderAndIsr, one UpdateMetadata and one StopReplica request per live broker, in
that order, each stamped with the controller id and epoch and the recipient's broker epoch;
"leading" UpdateMetadata (failover, broker startup) is built when added and goes first.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from weir.common import TopicPartition
from weir.controller.context import LEADER_DURING_DELETE, ControllerContext
from weir.coordination.codecs import LeaderIsr, parse_endpoint
from weir.protocol.interbroker import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from weir.protocol.interbroker.leader_and_isr.v7.request import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrTopicState,
)
from weir.protocol.interbroker.stop_replica.v4.request import (
    StopReplicaPartitionState,
    StopReplicaTopicState,
)
from weir.protocol.interbroker.update_metadata.v8.request import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataTopicState,
)

__all__ = [
    "LEADER_AND_ISR_FULL",
    "LEADER_AND_ISR_INCREMENTAL",
    "OutboundRequest",
    "RequestBatch",
]

LEADER_AND_ISR_INCREMENTAL = 0
LEADER_AND_ISR_FULL = 1
EPOCH_DURING_DELETE = -2
NO_EPOCH = -1
ZERO_UUID = uuid.UUID(int=0)
PLAINTEXT = "PLAINTEXT"
PLAINTEXT_PROTOCOL = 0
# Kafka's SecurityProtocol ids, as UpdateMetadata carries them.
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
_MISSING = object()


@dataclass(frozen=True, slots=True)
class OutboundRequest:
    """One request for one broker (``request`` is an interbroker request dataclass)."""

    broker_id: int
    request: Any


class RequestBatch:
    """Collects the requests of one event, merged per broker and partition."""

    def __init__(self, controller_id: int, ctx: ControllerContext) -> None:
        self._controller_id = controller_id
        self._ctx = ctx
        self._leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]] = {}
        self._update_metadata: dict[int, set[TopicPartition]] = {}
        self._update_metadata_all: set[int] = set()
        self._update_metadata_live: set[TopicPartition] = set()
        """Partitions whose UpdateMetadata goes to every broker live at build time."""
        self._stop_replica: dict[int, dict[TopicPartition, bool]] = {}
        self._leading: list[OutboundRequest] = []
        """UpdateMetadata built when added, sent before everything else of the batch."""
        self._offline_of: dict[tuple[int, ...], tuple[int, ...]] = {}
        """Offline replicas per assigned replicas, while one set of requests is built."""
        self._states: dict[TopicPartition, tuple[Any, ...]] = {}
        """The last LeaderAndIsr partition state built per partition, with its inputs, so
        that adding the same state for several brokers (one call per replica) builds it
        once."""

    def fresh(self) -> RequestBatch:
        """An empty batch for the same controller (after this one was built and sent)."""
        return RequestBatch(self._controller_id, self._ctx)

    def is_empty(self) -> bool:
        return not (self._leader_and_isr or self._update_metadata or self._stop_replica
                    or self._update_metadata_live or self._leading)

    # -- adding ----------------------------------------------------------------------------

    def add_leader_and_isr(self, brokers: Iterable[int], tp: TopicPartition,
                           leader_isr: LeaderIsr, replicas: Iterable[int],
                           is_new: bool = False) -> None:
        """LeaderAndIsr for ``tp`` to ``brokers``, and UpdateMetadata for it to all."""
        state = self._partition_state(tp, leader_isr, tuple(replicas), is_new)
        for broker in brokers:
            if broker < 0:
                continue
            per_broker = self._leader_and_isr.setdefault(broker, {})
            previous = per_broker.get(tp)
            if previous is not None and previous.is_new and not is_new:
                per_broker[tp] = dataclasses.replace(state, is_new=True)
            else:
                per_broker[tp] = state
        self._update_metadata_live.add(tp)

    def drop_leader_and_isr(self, partitions: Iterable[TopicPartition]
                            ) -> dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]]:
        """Take ``partitions`` out of the LeaderAndIsr requests queued so far (a newer state
        for them is meant for a later batch of the same event); returns what was taken, for
        :meth:`restore_leader_and_isr`."""
        wanted = set(partitions)
        taken: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]] = {}
        for broker, per_broker in self._leader_and_isr.items():
            for tp in wanted.intersection(per_broker):
                taken.setdefault(broker, {})[tp] = per_broker.pop(tp)
        self._leader_and_isr = {b: states for b, states in self._leader_and_isr.items()
                                if states}
        return taken

    def restore_leader_and_isr(self, taken: dict[int, dict[TopicPartition, Any]],
                               partitions: Iterable[TopicPartition]) -> None:
        """Put back the taken states of ``partitions`` that got no newer one meanwhile."""
        wanted = set(partitions)
        for broker, states in taken.items():
            for tp in wanted.intersection(states):
                self._leader_and_isr.setdefault(broker, {}).setdefault(tp, states[tp])

    def _partition_state(self, tp: TopicPartition, leader_isr: LeaderIsr,
                         replicas: tuple[int, ...], is_new: bool
                         ) -> LeaderAndIsrPartitionState:
        moving = self._ctx.reassignments.get(tp)
        cached = self._states.get(tp)
        if (cached is not None and cached[0] is leader_isr and cached[1] == replicas
                and cached[2] is moving and cached[3] == is_new):
            return cached[4]
        state = LeaderAndIsrPartitionState(
            partition_index=tp.partition,
            controller_epoch=leader_isr.controller_epoch,
            leader=leader_isr.leader,
            leader_epoch=leader_isr.leader_epoch,
            isr=tuple(leader_isr.isr),
            partition_epoch=leader_isr.zk_version,
            replicas=replicas,
            adding_replicas=moving.adding if moving else (),
            removing_replicas=moving.removing if moving else (),
            is_new=is_new,
        )
        self._states[tp] = (leader_isr, replicas, moving, is_new, state)
        return state

    def add_update_metadata(self, brokers: Iterable[int], partitions: Iterable[TopicPartition]
                            = (), *, all_partitions: bool = False) -> None:
        """UpdateMetadata to ``brokers`` with ``partitions`` (or every partition)."""
        partitions = tuple(partitions)
        for broker in brokers:
            self._update_metadata.setdefault(broker, set()).update(partitions)
            if all_partitions:
                self._update_metadata_all.add(broker)

    def add_leading_update_metadata(self, brokers: Iterable[int], *,
                                    all_partitions: bool = False) -> None:
        """UpdateMetadata to ``brokers``, built now and sent ahead of the batch's other
        requests: the live brokers, and every partition's current state if
        ``all_partitions`` (Kafka's sendUpdateMetadataRequest at the start of
        onControllerFailover / onBrokerStartup, before the state machines' LeaderAndIsr).
        """
        ctx = self._ctx
        live = ctx.live_brokers
        self._offline_of = {}
        partitions = set(ctx.leadership) if all_partitions else set()
        topic_states = self._group_topic_states(
            (tp, self._metadata_partition_state(tp)) for tp in sorted(partitions))
        live_brokers = self._broker_states()
        for broker in sorted(b for b in set(brokers) if b in live):
            self._leading.append(OutboundRequest(broker, UpdateMetadataRequest(
                controller_id=self._controller_id,
                controller_epoch=ctx.controller_epoch,
                broker_epoch=ctx.broker_epoch(broker),
                topic_states=topic_states,
                live_brokers=live_brokers,
            )))

    def add_stop_replica(self, brokers: Iterable[int], tp: TopicPartition,
                         delete: bool) -> None:
        """StopReplica for ``tp``; a delete request is never downgraded in the same batch.

        Only brokers live *now* get it (Kafka sends each state change's batch at once, to
        live brokers): a broker that bounced is out of the live set while its old
        incarnation's replicas go offline, and that StopReplica must not reach the new
        incarnation after the LeaderAndIsr that restarts them (StopReplica goes last).
        """
        for broker in brokers:
            if broker < 0 or broker not in self._ctx.live_brokers:
                continue
            per_broker = self._stop_replica.setdefault(broker, {})
            per_broker[tp] = delete or per_broker.get(tp, False)

    # -- building --------------------------------------------------------------------------

    def build(self) -> list[OutboundRequest]:
        """The batch as requests to live brokers: LeaderAndIsr, UpdateMetadata, StopReplica.

        Marks the brokers that got their first LeaderAndIsr (type FULL) in the context.
        """
        live = self._ctx.live_brokers
        self._offline_of = {}
        self._metadata_cache: dict[TopicPartition, Any] = {}
        self._built_topic_states: list[tuple[set[TopicPartition], tuple[Any, ...]]] = []
        self._live_broker_states: tuple[UpdateMetadataBroker, ...] | None = None
        # Leading UpdateMetadata first, to brokers still live at the epoch it was built for.
        out: list[OutboundRequest] = [
            r for r in self._leading
            if r.broker_id in live and live[r.broker_id].epoch == r.request.broker_epoch]
        for broker in sorted(b for b in self._leader_and_isr if b in live):
            out.append(OutboundRequest(broker, self._leader_and_isr_request(broker)))
        if self._update_metadata_live:
            self.add_update_metadata(live, self._update_metadata_live)
            self._update_metadata_live = set()
        for broker in sorted(b for b in self._update_metadata if b in live):
            out.append(OutboundRequest(broker, self._update_metadata_request(broker)))
        for broker in sorted(b for b in self._stop_replica if b in live):
            out.append(OutboundRequest(broker, self._stop_replica_request(broker)))
        return out

    def _topic_id(self, topic: str) -> uuid.UUID:
        return self._ctx.topic_ids.get(topic, ZERO_UUID)

    def _leader_and_isr_request(self, broker: int) -> LeaderAndIsrRequest:
        states = self._leader_and_isr[broker]
        by_topic: dict[str, list[LeaderAndIsrPartitionState]] = {}
        for tp in sorted(states):
            by_topic.setdefault(tp.topic, []).append(states[tp])
        leaders = {s.leader for s in states.values()}
        live_leaders = tuple(
            LeaderAndIsrLiveLeader(broker_id=info.id, host_name=info.host, port=info.port)
            for bid, info in sorted(self._ctx.live_brokers.items()) if bid in leaders
        )
        # The broker deletes the logs a FULL request does not name (stray partitions, as a
        # ZooKeeper-mode broker does for the KRaft migration controller's full requests,
        # KIP-866): the first request to a broker is FULL only if it names every replica the
        # broker hosts (topics being deleted aside).  One that does not (a failover sending
        # the new leaders in a batch of their own, the ISR shrinks later) goes out as
        # INCREMENTAL, and this controller deletes no strays on that broker.
        full = (broker not in self._ctx.brokers_sent_full_leader_and_isr
                and self._names_every_replica(broker, states))
        self._ctx.brokers_sent_full_leader_and_isr.add(broker)
        return LeaderAndIsrRequest(
            controller_id=self._controller_id,
            controller_epoch=self._ctx.controller_epoch,
            broker_epoch=self._ctx.broker_epoch(broker),
            type_=LEADER_AND_ISR_FULL if full else LEADER_AND_ISR_INCREMENTAL,
            topic_states=tuple(
                LeaderAndIsrTopicState(topic_name=topic, topic_id=self._topic_id(topic),
                                       partition_states=tuple(parts))
                for topic, parts in by_topic.items()
            ),
            live_leaders=live_leaders,
        )

    def _names_every_replica(self, broker: int, states: dict[TopicPartition, Any]) -> bool:
        ctx = self._ctx
        return all(r.partition in states for r in ctx.replicas_on_brokers((broker,))
                   if not ctx.is_topic_queued_for_deletion(r.partition.topic))

    def _update_metadata_request(self, broker: int) -> UpdateMetadataRequest:
        ctx = self._ctx
        if broker in self._update_metadata_all:
            partitions = set(ctx.leadership)
        else:
            partitions = self._update_metadata[broker]
        if self._live_broker_states is None:
            self._live_broker_states = self._broker_states()
        return UpdateMetadataRequest(
            controller_id=self._controller_id,
            controller_epoch=ctx.controller_epoch,
            broker_epoch=ctx.broker_epoch(broker),
            topic_states=self._metadata_topic_states(partitions),
            live_brokers=self._live_broker_states,
        )

    def _broker_states(self) -> tuple[UpdateMetadataBroker, ...]:
        return tuple(
            UpdateMetadataBroker(
                id=info.id,
                endpoints=tuple(
                    UpdateMetadataEndpoint(
                        port=port, host=host, listener=name,
                        security_protocol=SECURITY_PROTOCOL_IDS.get(info.protocol_of(name),
                                                                    PLAINTEXT_PROTOCOL))
                    for name, host, port in map(parse_endpoint, info.listener_endpoints())),
                rack=info.rack,
            )
            for _, info in sorted(self._ctx.live_brokers.items())
        )

    def _group_topic_states(self, states: Iterable[tuple[TopicPartition, Any]]
                            ) -> tuple[UpdateMetadataTopicState, ...]:
        """Partition states (None ones skipped) grouped into topic states, in order."""
        by_topic: dict[str, list[UpdateMetadataPartitionState]] = {}
        for tp, state in states:
            if state is not None:
                by_topic.setdefault(tp.topic, []).append(state)
        return tuple(
            UpdateMetadataTopicState(topic_name=topic, topic_id=self._topic_id(topic),
                                     partition_states=tuple(parts))
            for topic, parts in by_topic.items()
        )

    def _metadata_topic_states(self, partitions: set[TopicPartition]
                               ) -> tuple[UpdateMetadataTopicState, ...]:
        """The topic states for ``partitions``; built once per distinct set of partitions
        (usually every broker gets the same ones)."""
        for built_for, topic_states in self._built_topic_states:
            if built_for == partitions:
                return topic_states
        cache = self._metadata_cache

        def state_of(tp: TopicPartition) -> Any:
            state = cache.get(tp, _MISSING)
            if state is _MISSING:
                state = cache[tp] = self._metadata_partition_state(tp)
            return state

        topic_states = self._group_topic_states((tp, state_of(tp)) for tp in sorted(partitions))
        self._built_topic_states.append((partitions, topic_states))
        return topic_states

    def _metadata_partition_state(self, tp: TopicPartition) -> UpdateMetadataPartitionState | None:
        ctx = self._ctx
        leader_isr = ctx.leadership.get(tp)
        if leader_isr is None:
            return None
        replicas = ctx.replicas(tp)
        leader = leader_isr.leader
        if tp.topic in ctx.topics_to_delete:
            leader = LEADER_DURING_DELETE
        if ctx.replicas_on_offline_dirs:
            offline = tuple(r for r in replicas if not ctx.is_replica_online(r, tp))
        else:
            # Offline = not live: the same for every partition with these replicas (a few
            # distinct assignments for many partitions); the cache lives for one build.
            offline = self._offline_of.get(replicas)
            if offline is None:
                live = ctx.live_brokers
                offline = self._offline_of[replicas] = tuple(
                    r for r in replicas if r not in live)
        return UpdateMetadataPartitionState(
            partition_index=tp.partition,
            controller_epoch=leader_isr.controller_epoch,
            leader=leader,
            leader_epoch=leader_isr.leader_epoch,
            isr=tuple(leader_isr.isr),
            zk_version=leader_isr.zk_version,
            replicas=replicas,
            offline_replicas=offline,
        )

    def _stop_replica_request(self, broker: int) -> StopReplicaRequest:
        by_topic: dict[str, list[StopReplicaPartitionState]] = {}
        for tp, delete in sorted(self._stop_replica[broker].items()):
            by_topic.setdefault(tp.topic, []).append(StopReplicaPartitionState(
                partition_index=tp.partition,
                leader_epoch=self._stop_epoch(tp, delete),
                delete_partition=delete,
            ))
        return StopReplicaRequest(
            controller_id=self._controller_id,
            controller_epoch=self._ctx.controller_epoch,
            broker_epoch=self._ctx.broker_epoch(broker),
            topic_states=tuple(
                StopReplicaTopicState(topic_name=topic, partition_states=tuple(parts))
                for topic, parts in by_topic.items()
            ),
        )

    def _stop_epoch(self, tp: TopicPartition, delete: bool) -> int:
        if delete:
            return EPOCH_DURING_DELETE
        leader_isr = self._ctx.leadership.get(tp)
        return leader_isr.leader_epoch if leader_isr is not None else NO_EPOCH
