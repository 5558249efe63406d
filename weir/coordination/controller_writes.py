"""The controller's ZooKeeper writes, each fenced by ``/controller_epoch``'s znode version.

Kafka's ``KafkaZkClient`` methods that take ``expectedControllerEpochZkVersion``
(``createTopicPartitionStatesRaw``, ``updateLeaderAndIsr``, ``deleteTopicZNode``,
``setOrCreatePartitionReassignment``, ``deletePreferredReplicaElection``,
``deleteLogDirEventNotifications``): every write goes through
:func:`weir.coordination.fenced.run_fenced`, so a deposed controller's writes fail as a whole
with :class:`ControllerMovedError`.  :class:`ControllerWrites` is mixed into
:class:`weir.coordination.zk.ZkClient`; the controller calls these methods on its client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError, NotEmptyError

from weir.common import TopicPartition
from weir.coordination import codecs, fenced, paths
from weir.coordination.codecs import LeaderIsr
from weir.protocol.errors import ErrorCode, KafkaError


class ControllerWrites:
    """Fenced controller writes over ``self._client`` (a started kazoo client)."""

    _client: KazooClient
    get_children: Callable[[str], list[str]]  # ZkClient's: sorted children, [] if no node

    # -- partition states ----------------------------------------------------------------

    def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsr], controller_epoch_zk_version: int
    ) -> dict[TopicPartition, KafkaError | LeaderIsr]:
        """Create state znodes (and their parents), fenced; each result has zk_version 0."""
        tps = list(states)
        self._create_partition_parents(tps, controller_epoch_zk_version)
        ops = [
            fenced.create(paths.partition_state(*tp), codecs.encode_leader_isr(states[tp]))
            for tp in tps
        ]
        results = fenced.run_fenced(self._client, ops, controller_epoch_zk_version)
        out: dict[TopicPartition, KafkaError | LeaderIsr] = {}
        for tp, op, result in zip(tps, ops, results, strict=True):
            if isinstance(result, Exception):
                out[tp] = fenced.to_kafka_error(op, result)
            else:
                out[tp] = _with_version(states[tp], 0)
        return out

    def _create_partition_parents(self, tps: list[TopicPartition], epoch_version: int) -> None:
        wanted: list[str] = []
        for topic in sorted({tp.topic for tp in tps}):
            wanted.append(paths.topic_partitions(topic))
        wanted.extend(paths.partition(*tp) for tp in tps)
        pending = {p: self._client.exists_async(p) for p in wanted}
        missing = [p for p, result in pending.items() if result.get() is None]
        # Failures (a parent already there, a topic gone) show up on the state creates.
        fenced.run_fenced(self._client, [fenced.create(p) for p in missing], epoch_version)

    def update_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsr], controller_epoch_zk_version: int
    ) -> dict[TopicPartition, LeaderIsr | KafkaError]:
        """Conditional updates (each at ``state.zk_version``), fenced; new versions out.

        A stale version gives that partition a :class:`ZkVersionMismatchError` without
        failing the others; a missing znode a :class:`ZkNoNodeError`.
        """
        return self.start_partition_state_updates(states, controller_epoch_zk_version)()

    def start_partition_state_updates(
        self, states: Mapping[TopicPartition, LeaderIsr], controller_epoch_zk_version: int
    ) -> Callable[[], dict[TopicPartition, LeaderIsr | KafkaError]]:
        """:meth:`update_partition_states` in two halves (:func:`fenced.start_fenced`): the
        writes are sent now, the function returned waits for their results."""
        tps = list(states)
        ops = [
            fenced.set_data(
                paths.partition_state(*tp),
                codecs.encode_leader_isr(states[tp]),
                states[tp].zk_version,
            )
            for tp in tps
        ]
        finish = fenced.start_fenced(self._client, ops, controller_epoch_zk_version)

        def results() -> dict[TopicPartition, LeaderIsr | KafkaError]:
            out: dict[TopicPartition, LeaderIsr | KafkaError] = {}
            for tp, op, result in zip(tps, ops, finish(), strict=True):
                if isinstance(result, Exception):
                    out[tp] = fenced.to_kafka_error(op, result)
                else:
                    out[tp] = _with_version(states[tp], int(result.version))
            return out
        return results

    # -- topic deletion ------------------------------------------------------------------

    def delete_topic_znodes(self, name: str, controller_epoch_zk_version: int) -> None:
        """Remove the topic's assignment tree, config and deletion mark, fenced."""
        for _ in range(3):
            targets = self._subtree_bottom_up(paths.topic(name))
            targets += [paths.topic_config(name), paths.delete_topic(name)]
            ops = [fenced.delete(p) for p in targets]
            results = fenced.run_fenced(self._client, ops, controller_epoch_zk_version)
            errors = [
                r for r in results if isinstance(r, Exception) and not isinstance(r, NoNodeError)
            ]
            if not errors:
                return
            if not any(isinstance(e, NotEmptyError) for e in errors):
                raise fenced.to_kafka_error(ops[results.index(errors[0])], errors[0])
        raise KafkaError(ErrorCode.unknown_server_error, f"could not delete topic '{name}' znodes")

    def _subtree_bottom_up(self, root: str) -> list[str]:
        """``root`` and its descendants, children before parents."""
        ordered: list[str] = []

        def visit(path: str) -> None:
            for child in self.get_children(path):
                visit(f"{path}/{child}")
            ordered.append(path)

        if self._client.exists(root):
            visit(root)
        return ordered

    # -- reassignment, preferred election, log dir events --------------------------------

    def set_reassignments(
        self, reassignment: Mapping[TopicPartition, list[int]], controller_epoch_zk_version: int
    ) -> None:
        """Rewrite the pending reassignments (empty → delete the znode), fenced."""
        if not reassignment:
            self.delete_reassignments(controller_epoch_zk_version)
            return
        op = fenced.set_data(paths.REASSIGN_PARTITIONS, codecs.encode_reassignment(reassignment))
        (result,) = fenced.run_fenced(self._client, [op], controller_epoch_zk_version)
        if isinstance(result, NoNodeError):
            op = fenced.create(op.path, op.data)
            (result,) = fenced.run_fenced(self._client, [op], controller_epoch_zk_version)
        if isinstance(result, Exception):
            raise fenced.to_kafka_error(op, result)

    def delete_reassignments(self, controller_epoch_zk_version: int) -> None:
        self._delete_fenced(paths.REASSIGN_PARTITIONS, controller_epoch_zk_version)

    def delete_preferred_election(self, controller_epoch_zk_version: int) -> None:
        self._delete_fenced(paths.PREFERRED_REPLICA_ELECTION, controller_epoch_zk_version)

    def delete_log_dir_events(self, names: Iterable[str],
                              controller_epoch_zk_version: int) -> None:
        for name in names:
            self._delete_fenced(f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{name}",
                                controller_epoch_zk_version)

    def _delete_fenced(self, path: str, controller_epoch_zk_version: int) -> None:
        op = fenced.delete(path)
        (result,) = fenced.run_fenced(self._client, [op], controller_epoch_zk_version)
        if isinstance(result, Exception) and not isinstance(result, NoNodeError):
            raise fenced.to_kafka_error(op, result)


def _with_version(state: LeaderIsr, zk_version: int) -> LeaderIsr:
    return LeaderIsr(
        leader=state.leader,
        leader_epoch=state.leader_epoch,
        isr=list(state.isr),
        controller_epoch=state.controller_epoch,
        zk_version=zk_version,
        leader_recovery_state=state.leader_recovery_state,
    )


__all__ = ["ControllerWrites"]
