"""The transactions' invariants (``--txn``, :mod:`weir.sim.txn`), judged on what a
read_committed consumer reads from the partitions' online leaders.

:func:`read_committed` is the consumer's view of one log, as Kafka's consumer builds it from
a read_committed fetch (KIP-98): nothing at or past the last stable offset; below it, a
transactional batch is delivered unless its producer's next marker is an ABORT (the
aborted transactions a Fetch response lists, whose markers may lie past the LSO); a COMMIT
marker, or no marker at all, delivers it.  So a last stable offset that passes an open transaction shows
as that transaction's records delivered before it was decided.

* :class:`ReadCommittedOnlyDecided` (after steps, sampled): a record read_committed
  exposes belongs to a transaction whose producer had already asked to commit it, and was
  not written by an instance after a newer instance of its transactional id got its epoch
  (a fenced producer's later writes never become visible);
* :class:`TransactionsAtomic` (at the end): every transaction the producer saw committed
  has all its records visible, once; no record of a transaction the producer aborted, or
  never asked to commit (aborted by the coordinator's timeout, or fenced), is visible; a
  transaction whose commit got no definite answer is visible whole or not at all; no
  record is visible twice;
* :class:`NoHungTransactions` (at the end, after faults healed and the coordinators'
  timeouts passed): every partition's LSO is its high watermark and every coordinator's
  transactional ids are decided (none Ongoing, preparing, or with a write pending).  An
  open transaction whose coordinator's ``__transaction_state`` records a power failure
  took (every ISR member lost them unflushed) is excused: nobody remembers it, as in
  Kafka, where an operator aborts it (KIP-664's ``kafka-transactions.sh --abort``), and
  so are the committed records behind the LSO it holds.

The power-loss exemption of :mod:`weir.sim.data` applies: a record a broker lost to power
failure may vanish if that broker later leads without it (acks=all relies on replication,
not fsync); such a record is excused, not owed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from weir.common import TopicPartition
from weir.records.batch import iter_headers
from weir.records.control import read_marker
from weir.records.records import iter_records
from weir.sim.invariants import Invariant
from weir.sim.replica import read_all
from weir.sim.txn import COMMITTED, UNKNOWN, VALUE_PREFIX
from weir.transactions import codec
from weir.transactions.codec import TRANSACTION_STATE_TOPIC
from weir.transactions.state import TxnState

if TYPE_CHECKING:
    from weir.sim.txn import TxnPlane
    from weir.sim.world import World
    from weir.storage.log import Log

__all__ = ["NoHungTransactions", "ReadCommittedOnlyDecided", "TransactionsAtomic",
           "TxnInvariants", "read_committed", "txn_invariants"]

OBSERVE_EVERY_MS = 20
_UNDECIDED = frozenset({TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                        TxnState.PREPARE_EPOCH_FENCE})


def read_committed(log: Log) -> list[tuple[int, bytes]]:
    """(offset, value) of every record a read_committed consumer reads from ``log``: those
    below the LSO, but a transactional record whose producer's next marker (anywhere in the
    log: Kafka lists an aborted transaction whose marker is past the LSO too) is an ABORT."""
    lso = log.last_stable_offset
    buf = read_all(log)
    out: list[tuple[int, bytes]] = []
    pending: dict[int, list[tuple[int, bytes]]] = {}
    for header in iter_headers(buf):
        if header.position + header.size > len(buf):
            break
        chunk = buf[header.position:header.position + header.size]
        if header.is_control:
            held = pending.pop(header.producer_id, [])
            marker = read_marker(chunk)
            if marker is not None and marker.committed:
                out.extend(held)
            continue
        if header.base_offset >= lso:
            continue
        records = [(r.offset, r.value or b"") for r in iter_records(chunk) if r.offset < lso]
        if header.is_transactional:
            pending.setdefault(header.producer_id, []).extend(records)
        else:
            out.extend(records)
    for held in pending.values():  # below the LSO and no marker: delivered
        out.extend(held)
    return sorted(out)


def _data_partitions(sim: World) -> list[tuple[TopicPartition, Log]]:
    """The online leaders' logs of the live data topics, in a fixed order."""
    out = []
    for tp, replicas in sim.data.online_leaders():
        if not tp.topic.startswith("__"):
            out.append((tp, replicas.logs[tp]))
    return out


def _excused(sim: World) -> set[bytes]:
    """Values some broker lost to power failure (the data path's exemption)."""
    return {value for (_tp, _offset, value) in sim.data.amnesia}


class ReadCommittedOnlyDecided(Invariant):
    name = "read_committed exposes only decided transactions"

    def __init__(self) -> None:
        self._last = -OBSERVE_EVERY_MS

    def after_step(self, sim: World) -> Iterable[str]:
        plane: TxnPlane | None = sim.txn
        if plane is None or not sim.ticking or sim.now - self._last < OBSERVE_EVERY_MS:
            return []  # (not ticking: the run is over; its logs close)
        self._last = sim.now
        out = []
        for tp, log in _data_partitions(sim):
            for offset, value in read_committed(log):
                if not value.startswith(VALUE_PREFIX) or value in plane.exposed:
                    continue
                plane.exposed[value] = sim.now
                found = plane.by_value.get(value)
                if found is None:
                    continue
                attempt, write = found
                if attempt.commit_sent_at is None or attempt.commit_sent_at > sim.now:
                    out.append(f"{tp} offset {offset}: {value!r} of an undecided transaction "
                               f"of {attempt.txn_id} (instance {attempt.instance}, producer "
                               f"id {attempt.producer_id} epoch {attempt.epoch}) is below the "
                               f"LSO {log.last_stable_offset}")
                fenced = plane.fenced_at.get(attempt.instance)
                if fenced is not None and write.sent_at >= fenced:
                    out.append(f"{tp} offset {offset}: {value!r}, written by instance "
                               f"{attempt.instance} of {attempt.txn_id} at {write.sent_at}, "
                               f"after a newer instance fenced it at {fenced}, is visible")
        return out


class TransactionsAtomic(Invariant):
    name = "transactions atomic"

    def at_end(self, sim: World) -> Iterable[str]:
        plane: TxnPlane | None = sim.txn
        if plane is None:
            return []
        out: list[str] = []
        visible: Counter[bytes] = Counter()
        where: dict[bytes, TopicPartition] = {}
        for tp, log in _data_partitions(sim):
            for _offset, value in read_committed(log):
                if value.startswith(VALUE_PREFIX):
                    visible[value] += 1
                    where[value] = tp
        for value, count in sorted(visible.items()):
            if count > 1:
                out.append(f"{value!r} is visible {count} times ({where[value]})")
            found = plane.by_value.get(value)
            if found is None:
                out.append(f"{value!r} is visible but was never sent")
                continue
            attempt, write = found
            if attempt.commit_sent_at is None:
                out.append(f"{value!r} of an aborted transaction of {attempt.txn_id} "
                           f"(instance {attempt.instance}, {attempt.outcome}) is visible")
            fenced = plane.fenced_at.get(attempt.instance)
            if fenced is not None and write.sent_at >= fenced:
                out.append(f"{value!r} of fenced instance {attempt.instance} of "
                           f"{attempt.txn_id}, written after {fenced}, is visible")
        excused = _excused(sim)
        owed_topics = {tp.topic for tp, _log in _data_partitions(sim)}
        held = _held_by_forgotten(sim)
        # A record past the LSO of a partition held by a forgotten transaction is not
        # visible yet, and will not be until an operator aborts that transaction.
        behind = {value for tp, lso in held.items()
                  for offset, value in sim.data.online_leader(tp).records(tp).items()
                  if offset >= lso}
        for attempt in plane.attempts:
            if attempt.outcome not in (COMMITTED, UNKNOWN):
                continue
            seen, missing = [], []
            for write in attempt.writes:
                if not write.acked or write.tp.topic not in owed_topics \
                        or write.incarnation != sim.data.forgotten[write.tp.topic]:
                    continue
                for value in write.values:
                    if value in excused or value in behind:
                        continue
                    if visible[value]:
                        seen.append(value)
                    else:
                        missing.append((write.tp, value))
            if attempt.outcome == COMMITTED and missing:
                out.append(f"committed transaction of {attempt.txn_id} (instance "
                           f"{attempt.instance}, epoch {attempt.epoch}, started "
                           f"{attempt.started_at}) lacks {missing[:3]}")
            elif attempt.outcome == UNKNOWN and seen and missing:
                out.append(f"transaction of {attempt.txn_id} (instance {attempt.instance}) "
                           f"is partly visible: {seen[:2]} but not {missing[:2]}")
        return out


class NoHungTransactions(Invariant):
    name = "no hung transactions"

    def at_end(self, sim: World) -> Iterable[str]:
        plane: TxnPlane | None = sim.txn
        if plane is None:
            return []
        out: list[str] = []
        # Held by transactions whose coordinator's records were lost to power failure
        # (every ISR member lost them): nobody remembers them, as in Kafka, where an
        # operator aborts them (kafka-transactions.sh --abort, KIP-664).
        held = _held_by_forgotten(sim)
        plane.stats["txn_partitions_held_by_forgotten_transactions"] = len(held)
        for tp, log in _data_partitions(sim):
            lso, hw = log.last_stable_offset, log.high_watermark
            if lso < hw and tp not in held:
                out.append(f"{tp}: LSO {lso} below the high watermark {hw} (open "
                           f"transactions of producer ids {sorted(_open_producers(log))})")
        lost = _lost_coordinator_state(sim)
        for node in sim.nodes.values():
            coordinator = plane.coordinator(node)
            if coordinator is None:
                continue
            for part in coordinator.loaded_partitions():
                for txn_id, meta in sorted(part.txns.items()):
                    if (meta.state in _UNDECIDED and not meta.pending
                            and lost.get(meta.producer_id, -1) > meta.producer_epoch):
                        # Its coordinator forgot a later epoch (the record of the epoch
                        # bump was lost to power failure, unflushed) that the
                        # data partitions' markers already carried: they refuse this
                        # epoch's markers with INVALID_PRODUCER_EPOCH, and the transaction
                        # waits for an operator, as in Kafka (kafka-transactions.sh --abort,
                        # KIP-664).
                        plane.stats["txn_ids_behind_a_forgotten_epoch"] += 1
                        continue
                    if meta.state in _UNDECIDED or meta.pending:
                        out.append(f"broker {node.id}: transactional id {txn_id} is "
                                   f"{meta.state.name} (pending {meta.pending_state})")
        undecided = [a for a in plane.attempts if a.outcome is None]
        if undecided:
            out.append(f"{len(undecided)} transactions the producers never ended, e.g. "
                       f"{undecided[0].txn_id} started {undecided[0].started_at}")
        return out


def _open_producers(log: Log) -> set[int]:
    return {pid for pid, entry in log.producer_state.producers.items()
            if entry.current_txn_first_offset is not None}


def _held_by_forgotten(sim: World) -> dict[TopicPartition, int]:
    """Partitions whose LSO is held below the high watermark only by transactions whose
    coordinator's records were lost to power failure: tp -> that LSO."""
    lost = _lost_coordinator_state(sim)
    out = {}
    for tp, log in _data_partitions(sim):
        lso = log.last_stable_offset
        open_pids = _open_producers(log)
        if lso < log.high_watermark and open_pids and open_pids <= lost.keys():
            out[tp] = lso
    return out


def _lost_coordinator_state(sim: World) -> dict[int, int]:
    """The producer ids of ``__transaction_state`` records some broker lost to power
    failure, each with the highest producer epoch those records carried."""
    out: dict[int, int] = {}
    for (tp, _offset, value) in sim.data.amnesia:
        if tp.topic == TRANSACTION_STATE_TOPIC and value:
            try:
                transit = codec.decode_value(value)
            except codec.CorruptTxnRecord:
                continue
            out[transit.producer_id] = max(out.get(transit.producer_id, -1),
                                           transit.producer_epoch)
    return out


def txn_invariants() -> list[Invariant]:
    return [ReadCommittedOnlyDecided(), TransactionsAtomic(), NoHungTransactions()]


class TxnInvariants(Invariant):
    """The transactions' invariants (:func:`txn_invariants`, or ``parts``); their messages
    are prefixed with their names."""

    name = "transactions"

    def __init__(self, parts: list[Invariant] | None = None) -> None:
        self.parts = txn_invariants() if parts is None else parts

    def after_step(self, sim: World) -> Iterable[str]:
        if sim.txn is None:
            return []
        return [f"{part.name}: {message}" for part in self.parts
                for message in part.after_step(sim)]

    def at_end(self, sim: World) -> Iterable[str]:
        if sim.txn is None:
            return []
        return [f"{part.name}: {message}" for part in self.parts
                for message in part.at_end(sim)]
