"""The simulation's invariants, as named objects.

An :class:`Invariant` watches the run through three hooks and returns the violations it
sees (plain messages; the simulation stamps them with the time):

- :meth:`Invariant.on_state_write`: every write of a partition state znode, before it lands
  (old state or None, new state, the writing broker and the controller epoch version the
  write was fenced with);
- :meth:`Invariant.after_step`: after every step of the event loop;
- :meth:`Invariant.at_end`: once the run has settled (liveness: what must have happened).

Brokers' own observations go through :meth:`Invariant.on_broker_leader_epoch`.

:func:`controller_invariants` is the controller's set (Kafka's guarantees for the
ZooKeeper-mode controller: KafkaController's epoch fencing, the clean leader election
rules of PartitionStateMachine, KIP-455 reassignments).  The data path's invariants
(no acknowledged write lost, replicas agree below the high watermark, the high watermark
never goes back: :class:`weir.sim.data.DataPlane`) hang on :class:`DataPathInvariants`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.coordination.codecs import LeaderIsr

if TYPE_CHECKING:
    from weir.sim.world import World

__all__ = [
    "AcknowledgedWritesKept",
    "AtMostOneLeaderPerEpoch",
    "CleanLeaderElection",
    "CommittedRecordsKept",
    "ControllerEpochMonotonic",
    "DataPathInvariants",
    "HighWatermarkMonotonic",
    "Invariant",
    "IsrSubsetOfReplicas",
    "LeaderEpochMonotonic",
    "LeaderInIsr",
    "OneControllerPerEpoch",
    "ReassignmentsResolve",
    "ReplicasAgreeBelowHighWatermark",
    "ReplicasConverge",
    "controller_invariants",
    "data_invariants",
]


class Invariant:
    """Base: a named property; each hook returns the violations it found."""

    name = "invariant"

    def on_state_write(self, sim: World, tp: TopicPartition, old: LeaderIsr | None,
                       new: LeaderIsr, writer: int, epoch_version: int) -> Iterable[str]:
        return ()

    def on_broker_leader_epoch(self, sim: World, broker: int, tp: TopicPartition,
                               old: int | None, new: int) -> Iterable[str]:
        return ()

    def after_step(self, sim: World) -> Iterable[str]:
        return ()

    def at_end(self, sim: World) -> Iterable[str]:
        return ()


def _key(sim: World, tp: TopicPartition) -> tuple[Any, int]:
    """A partition of one topic incarnation (a recreated name is another topic)."""
    topic = sim.zk.topics.get(tp.topic)
    return (topic.topic_id if topic is not None else tp.topic), tp.partition


class OneControllerPerEpoch(Invariant):
    """At most one controller acts per controller epoch: no two live active controllers
    share an epoch, and every write fenced with one ``/controller_epoch`` version comes
    from one broker."""

    name = "one controller per epoch"

    def __init__(self) -> None:
        self._writers: dict[int, int] = {}

    def on_state_write(self, sim: World, tp: TopicPartition, old: LeaderIsr | None,
                       new: LeaderIsr, writer: int, epoch_version: int) -> Iterable[str]:
        if self._writers.setdefault(epoch_version, writer) != writer:
            yield (f"brokers {self._writers[epoch_version]} and {writer} both wrote at "
                   f"controller epoch version {epoch_version}")

    def after_step(self, sim: World) -> Iterable[str]:
        epochs = [n.controller_epoch for n in sim.nodes.values() if n.active]
        if len(epochs) != len(set(epochs)):
            yield f"two active controllers share an epoch: {sorted(epochs)}"


class ControllerEpochMonotonic(Invariant):
    """``/controller_epoch`` never goes back, and neither does any broker's view of it."""

    name = "controller epoch monotonic"

    def __init__(self) -> None:
        self._zk = 0
        self._brokers: dict[tuple[int, int, str], int] = {}

    def after_step(self, sim: World) -> Iterable[str]:
        epoch = sim.zk.controller_epoch
        if epoch < self._zk:
            yield f"/controller_epoch went back {self._zk} -> {epoch}"
        self._zk = max(self._zk, epoch)
        for node in sim.nodes.values():
            if not node.alive:
                continue
            if node.core is None:
                continue
            # Kafka keeps two: the replica manager's (LeaderAndIsr, StopReplica) and the
            # metadata cache's (UpdateMetadata).
            for which, seen in (("replica manager", node.core.replica_manager.controller_epoch),
                                ("metadata cache", node.core.metadata.controller_epoch)):
                key = (node.id, node.incarnation, which)
                if seen < self._brokers.get(key, -1):
                    yield f"broker {node.id} {which} controller epoch went back to {seen}"
                self._brokers[key] = seen


class IsrSubsetOfReplicas(Invariant):
    """Every written ISR is a non-empty subset of the partition's replicas."""

    name = "ISR subset of replicas"

    def on_state_write(self, sim: World, tp: TopicPartition, old: LeaderIsr | None,
                       new: LeaderIsr, writer: int, epoch_version: int) -> Iterable[str]:
        topic = sim.zk.topics.get(tp.topic)
        replicas = topic.partitions.get(tp.partition, []) if topic is not None else []
        if not new.isr or not set(new.isr) <= set(replicas):
            yield f"{tp}: ISR {new.isr} not a non-empty subset of replicas {replicas}"


class LeaderInIsr(Invariant):
    """A partition's leader (when it has one) is in its ISR."""

    name = "leader in ISR"

    def on_state_write(self, sim: World, tp: TopicPartition, old: LeaderIsr | None,
                       new: LeaderIsr, writer: int, epoch_version: int) -> Iterable[str]:
        if new.leader >= 0 and new.leader not in new.isr:
            yield f"{tp}: leader {new.leader} not in ISR {new.isr}"


class LeaderEpochMonotonic(Invariant):
    """Leader epochs never go back (in ZooKeeper and on every broker), and a new leader
    always comes with a new leader epoch."""

    name = "leader epochs monotonic"

    def on_state_write(self, sim: World, tp: TopicPartition, old: LeaderIsr | None,
                       new: LeaderIsr, writer: int, epoch_version: int) -> Iterable[str]:
        if old is None:
            return
        if new.leader_epoch < old.leader_epoch:
            yield f"{tp}: leader epoch went back {old.leader_epoch} -> {new.leader_epoch}"
        elif new.leader != old.leader and new.leader_epoch == old.leader_epoch:
            yield f"{tp}: leader {old.leader} -> {new.leader} without a new leader epoch"

    def on_broker_leader_epoch(self, sim: World, broker: int, tp: TopicPartition,
                               old: int | None, new: int) -> Iterable[str]:
        if old is not None and new < old:
            yield f"broker {broker}: leader epoch of {tp} went back {old} -> {new}"


class AtMostOneLeaderPerEpoch(Invariant):
    """One leader epoch of a partition names one leader, ever."""

    name = "at most one leader per epoch"

    def __init__(self) -> None:
        self._leaders: dict[tuple[Any, int, int], int] = {}

    def on_state_write(self, sim: World, tp: TopicPartition, old: LeaderIsr | None,
                       new: LeaderIsr, writer: int, epoch_version: int) -> Iterable[str]:
        if new.leader < 0:
            return
        key = (*_key(sim, tp), new.leader_epoch)
        first = self._leaders.setdefault(key, new.leader)
        if first != new.leader:
            yield f"{tp}: leader epoch {new.leader_epoch} names leaders {first} and {new.leader}"


class CleanLeaderElection(Invariant):
    """With unclean leader election off, a new leader comes from the old ISR."""

    name = "clean leader election"

    def on_state_write(self, sim: World, tp: TopicPartition, old: LeaderIsr | None,
                       new: LeaderIsr, writer: int, epoch_version: int) -> Iterable[str]:
        if old is not None and new.leader >= 0 and new.leader != old.leader \
                and new.leader not in old.isr:
            yield f"{tp}: unclean election of {new.leader} (ISR was {old.isr})"


class ReassignmentsResolve(Invariant):
    """Every acknowledged reassignment (KIP-455 AlterPartitionReassignments answered
    NONE) completes or is cancelled: at the end
    no partition is still moving, ``/admin/reassign_partitions`` is gone, and each
    partition whose last acknowledged request was a move has exactly its target replicas."""

    name = "acknowledged reassignments complete or are cancelled"

    def __init__(self) -> None:
        self.acknowledged: dict[TopicPartition, tuple[int, ...] | None] = {}
        self._superseded: dict[TopicPartition, int] = {}

    def version(self, tp: TopicPartition) -> int:
        """How many times requests for ``tp`` were superseded (taken when one is sent)."""
        return self._superseded.get(tp, 0)

    def acknowledge(self, tp: TopicPartition, target: tuple[int, ...] | None,
                    sent_at_version: int | None = None) -> None:
        """The controller accepted a move of ``tp`` to ``target`` (None: a cancel).  An
        answer to a request sent before a superseding one (``sent_at_version`` older than
        :meth:`version`) promises nothing: which of the two the controller applied last is
        not known."""
        if sent_at_version is not None and sent_at_version != self.version(tp):
            return
        self.acknowledged[tp] = target

    def supersede(self, tp: TopicPartition) -> None:
        """A request for ``tp`` whose acceptance is not known replaces the earlier one."""
        self.acknowledged.pop(tp, None)
        self._superseded[tp] = self.version(tp) + 1

    def at_end(self, sim: World) -> Iterable[str]:
        zk = sim.zk
        if zk.reassignments:
            yield f"/admin/reassign_partitions still holds {sorted(zk.reassignments)}"
        for name, topic in sorted(zk.topics.items()):
            for p in sorted(set(topic.adding) | set(topic.removing)):
                yield (f"{TopicPartition(name, p)} is still being reassigned: adding "
                       f"{topic.adding.get(p)} removing {topic.removing.get(p)}")
        for tp, target in sorted(self.acknowledged.items()):
            topic = zk.topics.get(tp.topic)
            if target is None or topic is None or tp.topic in zk.to_delete:
                continue
            if sorted(topic.partitions.get(tp.partition, [])) != sorted(target):
                yield (f"{tp}: acknowledged reassignment to {list(target)} ended with "
                       f"replicas {topic.partitions.get(tp.partition)}")


def controller_invariants() -> list[Invariant]:
    """A fresh set of the controller's invariants (they keep per-run state)."""
    return [OneControllerPerEpoch(), ControllerEpochMonotonic(), IsrSubsetOfReplicas(),
            LeaderInIsr(), LeaderEpochMonotonic(), AtMostOneLeaderPerEpoch(),
            CleanLeaderElection(), ReassignmentsResolve()]


# == The data path (owned with weir.sim.data and weir.sim.replica) ===========================
#
# Checked against the production ReplicaManager, fetchers and logs the simulation runs.  A
# partition is looked at once it is online (ZooKeeper's leader is alive and applied that
# leader epoch).  The bookkeeping (what was acknowledged, what the consumer read below the
# high watermark, which broker lost which record to power failure) is DataPlane's; the
# exemption (acks=all relies on replication, not fsync) is documented in weir.sim.data.


class _PromisesKept(Invariant):
    """Every promise of one kind (acknowledged or committed records) is in the online
    leader's log at its offset, unless excused by the power-loss exemption.  Promises
    already checked against one log stay true until that log is rewritten, so only new
    ones are checked while the leader's log only grows."""

    what = ""

    def __init__(self) -> None:
        self._seen: dict[TopicPartition, tuple[Any, int]] = {}

    def after_step(self, sim: World) -> Iterable[str]:
        plane = sim.data
        if plane is None:
            return []
        out = []
        for tp, leader in plane.online_leaders():
            state = (leader.node.id, leader.node.incarnation, leader.generation(tp),
                     plane.forgotten[tp.topic])
            promised = plane.table(self.what).get(tp, {})
            seen = self._seen.get(tp)
            total = len(plane.promises.get((self.what, tp), []))
            if seen is not None and seen[0] == state:
                items = plane.new_promises(self.what, tp, seen[1])
                items = [(o, v) for o, v in items if promised.get(o) == v]
            else:
                items = sorted(promised.items())
            self._seen[tp] = (state, total)
            if not items:
                continue
            records = leader.records(tp)
            for offset, value in items:
                if records.get(offset) == value:
                    continue
                if plane.excuse(tp, offset, value, leader.node.id, promised):
                    continue
                out.append(f"{tp}: {self.what} offset {offset} ({value!r}) is not in the log "
                           f"of leader {leader.node.id} (found {records.get(offset)!r})")
                del promised[offset]  # reported once
        return out


class AcknowledgedWritesKept(_PromisesKept):
    """No acknowledged write is lost: under acks=all and min.insync.replicas=2, every
    record a producer was told is written is in the online leader's log at its offset."""

    name = "no acknowledged write lost"
    what = "acknowledged"


class CommittedRecordsKept(_PromisesKept):
    """The committed offset never goes back: every record the consumer read below the
    largest high watermark ever exposed is still in the online leader's log."""

    name = "committed records kept"
    what = "committed"


class HighWatermarkMonotonic(Invariant):
    """One leader's high watermark never decreases within a leader epoch (Kafka's
    Partition.maybeIncrementLeaderHW only moves it forward)."""

    name = "high watermark monotonic"

    def __init__(self) -> None:
        self._seen: dict[TopicPartition, tuple[int, int, int, int, int]] = {}

    def after_step(self, sim: World) -> Iterable[str]:
        if sim.data is None:
            return []
        out = []
        for tp, leader in sim.data.online_leaders():
            epoch = leader.partitions[tp].leader_epoch
            hw = leader.logs[tp].high_watermark
            # (A topic deleted and created again under its name is a new partition.)
            who = (leader.node.id, leader.node.incarnation, epoch, sim.data.forgotten[tp.topic])
            seen = self._seen.get(tp)
            if seen is not None and seen[:4] == who and hw < seen[4]:
                out.append(f"{tp}: leader {leader.node.id} high watermark went back "
                           f"{seen[4]} -> {hw} in epoch {epoch}")
            self._seen[tp] = (*who, hw)
        return out


class ReplicasAgreeBelowHighWatermark(Invariant):
    """Each follower fetching from the current leader in its current epoch holds, byte for
    byte, the leader's batches below min(its high watermark, the leader's)."""

    name = "replicas agree below the high watermark"

    def __init__(self) -> None:
        self._checked: dict[tuple[TopicPartition, int], tuple[Any, int]] = {}

    def after_step(self, sim: World) -> Iterable[str]:
        from weir.replication.fetcher import ReplicaState
        from weir.sim.replica import read_all

        if sim.data is None:
            return []
        out = []
        for tp, leader in sim.data.online_leaders():
            part = leader.partitions[tp]
            log = leader.logs[tp]
            for replica in part.replicas:
                other = sim.nodes[replica].replicas
                if replica == leader.node.id or other is None or tp not in other.logs:
                    continue
                followed = other.fetch_state(tp)
                if followed is None or followed[0] != leader.node.id \
                        or followed[1].state is not ReplicaState.FETCHING \
                        or followed[1].leader_epoch != part.leader_epoch:
                    continue
                flog = other.logs[tp]
                upto = min(flog.high_watermark, log.high_watermark)
                # Offsets verified equal stay so until either log is rewritten.
                state = (leader.node.id, leader.node.incarnation, leader.generation(tp),
                         sim.nodes[replica].incarnation, other.generation(tp))
                checked = self._checked.get((tp, replica))
                start = checked[1] if checked is not None and checked[0] == state else 0
                if upto <= start:
                    continue
                self._checked[(tp, replica)] = (state, upto)
                if read_all(log, upto, start) != read_all(flog, upto, start):
                    out.append(f"{tp}: broker {replica} disagrees with leader "
                               f"{leader.node.id} between offsets {start} and {upto}")
        return out


class ReplicasConverge(Invariant):
    """At the end: each committed offset is exposed again, and every replica holds the
    leader's log."""

    name = "replicas converge"

    def at_end(self, sim: World) -> Iterable[str]:
        from weir.sim.replica import read_all

        if sim.data is None:
            return []
        out = []
        for tp, leader in sim.data.online_leaders():
            log = leader.logs[tp]
            committed = sim.data.committed.get(tp, 0)
            if log.high_watermark < committed:
                out.append(f"{tp}: high watermark {log.high_watermark} stayed below the "
                           f"committed offset {committed}")
            mine = read_all(log)
            for replica in leader.partitions[tp].replicas:
                other = sim.nodes[replica].replicas
                if replica == leader.node.id or other is None:
                    continue
                if tp not in other.logs or read_all(other.logs[tp]) != mine:
                    out.append(f"{tp}: broker {replica}'s log differs from leader "
                               f"{leader.node.id}'s at the end")
        return out


def data_invariants() -> list[Invariant]:
    """A fresh set of the data path's invariants."""
    return [HighWatermarkMonotonic(), AcknowledgedWritesKept(), CommittedRecordsKept(),
            ReplicasAgreeBelowHighWatermark(), ReplicasConverge()]


class DataPathInvariants(Invariant):
    """The data path's invariants (:func:`data_invariants`, or ``parts``), run after the
    simulated consumer observed the step (:meth:`weir.sim.data.DataPlane.observe`).
    Checks run in the order of ``parts``; their messages are prefixed with their names."""

    name = "data path"

    def __init__(self, parts: list[Invariant] | None = None) -> None:
        self.parts = data_invariants() if parts is None else parts

    def after_step(self, sim: World) -> Iterable[str]:
        if sim.data is None:
            return []
        sim.data.observe()
        return [f"{part.name}: {message}" for part in self.parts
                for message in part.after_step(sim)]

    def at_end(self, sim: World) -> Iterable[str]:
        return [f"{part.name}: {message}" for part in self.parts
                for message in part.at_end(sim)]
