"""The data path of the simulation: producers, fetch traffic, power loss and the data
invariants (acks=all, min.insync.replicas, KIP-101 truncation), on top of the controller simulation in :mod:`weir.sim.cluster`.

Each broker incarnation has a :class:`~weir.sim.replica.SimReplicas` (real ``Partition``
cores and real ``Log`` files under one temporary directory per run).  Producers append
with acks=all and min.insync.replicas=2; an append is acknowledged when the produce
purgatory's rule says so.  A simulated consumer reads each partition from its current
leader up to the high watermark.  Checked after every step (once a partition is online,
i.e. ZooKeeper's leader is alive and has applied that leader epoch):

* **no acknowledged record is lost**: every acknowledged (offset, value) is in the
  leader's log at that offset;
* **the committed offset never goes back**: let C be the largest high watermark any online
  leader ever exposed; every record a consumer read below C is still in the leader's log at
  its offset (a new leader's *high watermark* may start below C - it learns it from its
  followers - but its *log* never lacks what was committed, and by the end of the run its
  high watermark is back at or above C);
* **the high watermark of one leader epoch never decreases** on that leader;
* **replicas agree below the high watermark**: each follower that finished truncating for
  the current leader epoch holds byte-for-byte the leader's batches below
  min(its high watermark, the leader's).

Exemption, Kafka's durability model: acks=all relies on replication, not fsync.  A record
a broker lost to power failure (it was in its log, the machine lost its unflushed bytes)
may legitimately disappear if that very broker later leads without it; such losses are
counted as ``excused_losses`` and forgotten, never reported as violations; the committed
offset C then restarts at the first such offset (the new leader cannot bring it back).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.sim.replica import FETCHING, Disk, FetchState, SimReplicas, read_all

if TYPE_CHECKING:
    from weir.sim.cluster import SimConfig, Simulation
    from weir.sim.node import SimNode

__all__ = ["DataPlane"]

Record = tuple[int, bytes]


class DataPlane:
    """Data-path state of a whole simulated cluster."""

    def __init__(self, sim: Simulation, root: Path) -> None:
        self.sim = sim
        self.config: SimConfig = sim.config
        self.root = root
        self.disks = {b: Disk(root / f"broker-{b}") for b in sim.nodes}
        self._versions = itertools.count(1)
        self._values = itertools.count()
        self.acked: dict[TopicPartition, dict[int, bytes]] = {}
        self.consumed: dict[TopicPartition, dict[int, bytes]] = {}
        self.committed: dict[TopicPartition, int] = {}
        self.amnesia: dict[tuple[TopicPartition, int, bytes], set[int]] = {}
        self.stats: Counter[str] = Counter()
        self._hw_seen: dict[TopicPartition, tuple[int, int, int, int]] = {}
        self._checked: dict[tuple, object] = {}
        self._unchecked: dict[TopicPartition, list[Record]] = {}
        self.dirty = True

    def next_version(self) -> int:
        self.dirty = True
        return next(self._versions)

    # -- lifecycle of broker processes ---------------------------------------------------

    def start(self, node: SimNode) -> None:
        node.replicas = SimReplicas(self, node, self.disks[node.id])
        node.replicas.open_logs(set(self.sim.zk.topics))
        incarnation = node.incarnation

        def tick() -> None:
            if self.sim.ticking and node.alive and node.incarnation == incarnation:
                node.replicas.checkpoint()
                self.sim.schedule(self.sim.rng.randint(*self.config.flush_every_ms), tick)
        self.sim.schedule(self.sim.rng.randint(*self.config.flush_every_ms), tick)
        self.dirty = True

    def crash(self, node: SimNode, lose_unflushed: bool) -> None:
        if node.replicas is None:
            return
        for tp, offset, value in node.replicas.close(lose_unflushed):
            self.stats["records_lost_to_power_failure"] += 1
            self.amnesia.setdefault((tp, offset, value), set()).add(node.id)
        node.replicas = None
        self.dirty = True

    def forget_topic(self, topic: str) -> None:
        """A topic marked for deletion: its data is no longer promised to anyone."""
        for table in (self.acked, self.consumed, self.committed, self._hw_seen,
                      self._unchecked):
            for tp in [tp for tp in table if tp.topic == topic]:
                del table[tp]

    # -- network -------------------------------------------------------------------------

    def _send(self, src_id: int, dst: SimNode, fn: Callable[[SimReplicas], object]) -> None:
        """A message that may be lost; ``fn`` runs on ``dst`` if it is still the same
        incarnation when the message arrives."""
        if self.sim.rng.random() < self.config.data_drop_ratio:
            return
        incarnation = dst.incarnation

        def arrive() -> None:
            if dst.alive and dst.incarnation == incarnation and dst.replicas is not None:
                self.dirty = True
                fn(dst.replicas)
        self.sim._deliver(src_id, dst.id, arrive)

    # -- the fetcher ---------------------------------------------------------------------

    def schedule_fetch(self, replicas: SimReplicas, tp: TopicPartition, st: FetchState,
                       delay_ms: int) -> None:
        self.sim.schedule(delay_ms, lambda: self._fetch_round(replicas, tp, st))

    def _fetch_round(self, replicas: SimReplicas, tp: TopicPartition, st: FetchState) -> None:
        node = replicas.node
        if not self.sim.ticking or node.replicas is not replicas or replicas.fetch.get(tp) \
                is not st:
            return
        self.dirty = True
        st.token += 1
        token = st.token
        self.stats["fetch_rounds"] += 1
        leader = self.sim.nodes[st.leader]
        log = replicas.follower_log(tp, st)
        if log is None:
            return
        if st.state != FETCHING:
            asked = log.epoch_cache.latest_epoch
            if asked < 0:
                replicas.truncate_without_epochs(tp, st)
                self.schedule_fetch(replicas, tp, st, 0)
                return
            self._send(node.id, leader, lambda r: self._send(
                leader.id, node, self._answer(replicas, tp, st, token, "epoch",
                                           r.serve_epoch(tp, st.leader_epoch, asked))))
        else:
            offset, last_epoch, start = st.offset, log.epoch_cache.latest_epoch, \
                log.log_start_offset
            self._send(node.id, leader, lambda r: self._send(
                leader.id, node, self._answer(replicas, tp, st, token, "fetch",
                                           r.serve_fetch(node.id, tp, st.leader_epoch, offset,
                                                         last_epoch, start))))
        # A lost request or answer: ask again after the request timeout.
        self.sim.schedule(self.config.fetch_timeout_ms,
                          lambda: st.token == token and self._fetch_round(replicas, tp, st))

    def _answer(self, replicas: SimReplicas, tp: TopicPartition, st: FetchState, token: int,
                kind: str, answer):
        def apply(_dst: SimReplicas) -> None:
            if st.token != token or replicas.fetch.get(tp) is not st:
                return  # stale: the partition moved on while the request was in flight
            self.dirty = True
            st.token += 1
            error = answer[0] if kind == "epoch" else answer["error"]
            if error not in (ErrorCode.none, ErrorCode.offset_out_of_range):
                self.schedule_fetch(replicas, tp, st, self.config.fetch_backoff_ms)
                return
            try:
                if kind == "epoch":
                    replicas.apply_epoch_answer(tp, st, answer[1], answer[2])
                    got = True
                else:
                    got = replicas.apply_fetched(tp, st, answer)
            except KafkaError as exc:
                self.sim.violation(f"broker {replicas.node.id} {tp}: {kind} answer failed: "
                                   f"{exc.message}")
                return
            delay = 0 if got else self.sim.rng.randint(*self.config.fetch_idle_ms)
            self.schedule_fetch(replicas, tp, st, delay)
        return apply

    # -- producers -----------------------------------------------------------------------

    def start_producers(self) -> None:
        self.sim.schedule(self.sim.rng.randint(*self.config.produce_every_ms), self._produce)

    def _produce(self) -> None:
        sim = self.sim
        if sim.now >= self.config.fault_ms + self.config.settle_ms // 3:
            return
        sim.schedule(sim.rng.randint(*self.config.produce_every_ms), self._produce)
        live = sorted(tp for tp in sim.zk.states if tp.topic not in sim.zk.to_delete)
        if not live:
            return
        tp = sim.rng.choice(live)
        leader = sim.zk.states[tp].leader
        if leader < 0 or not sim.nodes[leader].alive:
            return
        count = sim.rng.randint(1, 3)
        values = [f"{tp}#{next(self._values)}".encode() for _ in range(count)]
        self.stats["produced"] += count
        node = sim.nodes[leader]
        self._send(0, node, lambda r: r.serve_produce(
            tp, values, self.config.min_insync_replicas, self.config.produce_timeout_ms,
            lambda code, records: self._produced(tp, code, records)))

    def _produced(self, tp: TopicPartition, code: ErrorCode, records: list[Record]) -> None:
        self.dirty = True
        if code != ErrorCode.none:
            self.stats[f"produce_{code.name}"] += 1
            return
        if tp.topic in self.sim.zk.to_delete or tp.topic not in self.sim.zk.topics:
            return
        acked = self.acked.setdefault(tp, {})
        for offset, value in records:
            if offset in acked and acked[offset] != value:
                self.sim.violation(f"{tp}: offset {offset} acknowledged twice, for "
                                   f"{acked[offset]!r} and {value!r}")
            self._promise(acked, tp, offset, value)
        self.stats["acked"] += len(records)

    # -- invariants ----------------------------------------------------------------------

    def online_leader(self, tp: TopicPartition) -> SimReplicas | None:
        """The leader's replicas if ZooKeeper's leader is alive and applied that epoch."""
        state = self.sim.zk.states.get(tp)
        if state is None or state.leader < 0 or tp.topic in self.sim.zk.to_delete:
            return None
        replicas = self.sim.nodes[state.leader].replicas
        if replicas is None:
            return None
        part = replicas.partitions.get(tp)
        if part is None or not part.is_leader or part.leader_epoch != state.leader_epoch \
                or tp not in replicas.logs:
            return None
        return replicas

    def check_step(self) -> None:
        if not self.dirty:
            return
        self.dirty = False
        for tp in sorted(self.sim.zk.states):
            leader = self.online_leader(tp)
            if leader is not None:
                self._check_partition(tp, leader)

    def _check_partition(self, tp: TopicPartition, leader: SimReplicas) -> None:
        part = leader.partitions[tp]
        log = leader.logs[tp]
        hw = log.high_watermark
        seen = self._hw_seen.get(tp)
        who = (leader.node.id, leader.node.incarnation, part.leader_epoch)
        if seen is not None and seen[:3] == who and hw < seen[3]:
            self.sim.violation(f"{tp}: leader {leader.node.id} high watermark went back "
                               f"{seen[3]} -> {hw} in epoch {part.leader_epoch}")
        self._hw_seen[tp] = (*who, hw)
        # Promises already checked against this very log stay true until it is rewritten.
        state = (leader.node.id, leader.node.incarnation, leader.generations.get(tp))
        unchecked = self._unchecked.pop(tp, [])
        if self._checked.get(("promises", tp)) != state:
            self._checked[("promises", tp)] = state
            unchecked = None
        if unchecked != []:
            self._check_promises(tp, leader.node.id, leader.records(tp), unchecked)
        committed = self.committed.get(tp, 0)
        if hw > committed:
            records = leader.records(tp)
            consumed = self.consumed.setdefault(tp, {})
            for offset in range(committed, hw):
                if offset in records:
                    self._promise(consumed, tp, offset, records[offset])
            self.committed[tp] = hw
        self._check_agreement(tp, leader)

    def _promise(self, table: dict[int, bytes], tp: TopicPartition, offset: int,
                 value: bytes) -> None:
        table[offset] = value
        self._unchecked.setdefault(tp, []).append((offset, value))

    def _check_promises(self, tp: TopicPartition, leader_id: int, records: dict[int, bytes],
                        only: list[Record] | None) -> None:
        for what, table in (("acknowledged", self.acked), ("committed", self.consumed)):
            promised = table.get(tp, {})
            items = sorted(promised.items()) if only is None else [
                (o, v) for o, v in only if promised.get(o) == v]
            for offset, value in items:
                if records.get(offset) == value:
                    continue
                if leader_id in self.amnesia.get((tp, offset, value), ()):
                    self.stats["excused_losses"] += 1
                    del promised[offset]
                    # What was committed from here on is gone with it: the committed
                    # offset restarts at the first excused loss (see the module docstring).
                    if offset < self.committed.get(tp, 0):
                        self.committed[tp] = offset
                    continue
                self.sim.violation(f"{tp}: {what} offset {offset} ({value!r}) is not in the "
                                   f"log of leader {leader_id} (found "
                                   f"{records.get(offset)!r})")
                del promised[offset]  # reported once

    def _check_agreement(self, tp: TopicPartition, leader: SimReplicas) -> None:
        part = leader.partitions[tp]
        log = leader.logs[tp]
        for replica in part.replicas:
            node = self.sim.nodes[replica]
            other = node.replicas
            if replica == leader.node.id or other is None:
                continue
            st = other.fetch.get(tp)
            if st is None or st.state != FETCHING or st.leader != leader.node.id \
                    or st.leader_epoch != part.leader_epoch or tp not in other.logs:
                continue
            flog = other.logs[tp]
            upto = min(flog.high_watermark, log.high_watermark)
            # Offsets verified equal stay so until either log is rewritten.
            key = ("agree", tp, replica)
            state = (leader.node.id, leader.node.incarnation, leader.generations.get(tp),
                     node.incarnation, other.generations.get(tp))
            checked = self._checked.get(key)
            start = checked[1] if isinstance(checked, tuple) and checked[0] == state else 0
            if upto <= start:
                continue
            self._checked[key] = (state, upto)
            if read_all(log, upto, start) != read_all(flog, upto, start):
                self.sim.violation(f"{tp}: broker {replica} disagrees with leader "
                                   f"{leader.node.id} between offsets {start} and {upto}")

    def check_converged(self) -> None:
        """At the end: committed offsets are back, every replica holds the leader's log."""
        for tp in sorted(self.sim.zk.states):
            leader = self.online_leader(tp)
            if leader is None:
                continue  # the controller checks report that
            log = leader.logs[tp]
            if log.high_watermark < self.committed.get(tp, 0):
                self.sim.violation(f"{tp}: high watermark {log.high_watermark} stayed below "
                                   f"the committed offset {self.committed[tp]}")
            mine = read_all(log)
            for replica in leader.partitions[tp].replicas:
                other = self.sim.nodes[replica].replicas
                if replica == leader.node.id or other is None:
                    continue
                if tp not in other.logs or read_all(other.logs[tp]) != mine:
                    self.sim.violation(f"{tp}: broker {replica}'s log differs from leader "
                                       f"{leader.node.id}'s at the end")
