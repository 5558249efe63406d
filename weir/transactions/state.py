"""The transaction state machine, sans I/O: Kafka's ``TransactionMetadata`` and the checks
``TransactionCoordinator`` makes before each transition.

A transaction coordinator changes a transactional id's state in two steps, as Kafka does: a
``prepare_*`` call validates the request and returns the next state (a :class:`TxnTransit`)
while marking the metadata with a *pending* state, the shell appends that transit to
``__transaction_state`` (acks=all), and :meth:`TransactionMetadata.complete` installs it once
the write succeeded (or :meth:`TransactionMetadata.abandon` drops it if the write failed).
While a transit is pending, other requests get CONCURRENT_TRANSACTIONS.

States (``TransactionState`` ids, persisted in the log): Empty 0, Ongoing 1, PrepareCommit 2,
PrepareAbort 3, CompleteCommit 4, CompleteAbort 5, Dead 6, PrepareEpochFence 7.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use."""
        return _NAMES[self]


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit", TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit", TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead", TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
STATE_BY_NAME = {name: state for state, name in _NAMES.items()}

# Kafka's TransactionState.validPreviousStates.
_VALID_PREVIOUS = {
    TxnState.EMPTY: {TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT},
    TxnState.ONGOING: {TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                       TxnState.COMPLETE_ABORT},
    TxnState.PREPARE_COMMIT: {TxnState.ONGOING},
    TxnState.PREPARE_ABORT: {TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE},
    TxnState.COMPLETE_COMMIT: {TxnState.PREPARE_COMMIT},
    TxnState.COMPLETE_ABORT: {TxnState.PREPARE_ABORT},
    TxnState.DEAD: {TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT},
    TxnState.PREPARE_EPOCH_FENCE: {TxnState.ONGOING},
}


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka's TransactionMetadata.isEpochExhausted: the last epoch is kept for fencing."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True)
class TxnTransit:
    """A state the metadata is moving to (Kafka's TxnTransitMetadata); what is persisted."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    pending_state: TxnState | None = None
    # An epoch fence whose write failed: the next fence does not bump again (Kafka's
    # hasFailedEpochFence).
    has_failed_epoch_fence: bool = False

    @classmethod
    def from_transit(cls, transactional_id: str, t: TxnTransit) -> TransactionMetadata:
        return cls(transactional_id, t.producer_id, t.last_producer_id, t.producer_epoch,
                   t.last_producer_epoch, t.txn_timeout_ms, t.state, set(t.partitions),
                   t.txn_start_timestamp, t.txn_last_update_timestamp)

    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    # -- transitions (Kafka's prepare*) -------------------------------------------------------

    def _transit(self, state: TxnState, *, producer_id: int | None = None,
                 last_producer_id: int | None = None, producer_epoch: int | None = None,
                 last_producer_epoch: int | None = None, timeout_ms: int | None = None,
                 partitions: frozenset[TopicPartition] | None = None,
                 start: int | None = None, now: int | None = None) -> TxnTransit:
        if self.pending_state is not None:
            raise KafkaError(ErrorCode.concurrent_transactions,
                             f"{self.transactional_id}: a move to {self.pending_state.name} "
                             "is in progress")
        if self.state not in _VALID_PREVIOUS[state]:
            raise KafkaError(ErrorCode.invalid_txn_state,
                             f"{self.transactional_id}: cannot move from {self.state.kafka_name} "
                             f"to {state.kafka_name}")
        self.pending_state = state
        return TxnTransit(
            producer_id=self.producer_id if producer_id is None else producer_id,
            last_producer_id=self.last_producer_id if last_producer_id is None else last_producer_id,
            producer_epoch=self.producer_epoch if producer_epoch is None else producer_epoch,
            last_producer_epoch=(self.last_producer_epoch if last_producer_epoch is None
                                 else last_producer_epoch),
            txn_timeout_ms=self.txn_timeout_ms if timeout_ms is None else timeout_ms,
            state=state,
            partitions=frozenset(self.partitions) if partitions is None else partitions,
            txn_start_timestamp=self.txn_start_timestamp if start is None else start,
            txn_last_update_timestamp=self.txn_last_update_timestamp if now is None else now,
        )

    def prepare_fence_producer_epoch(self) -> TxnTransit:
        """Bump the epoch of an Ongoing transaction that is about to be aborted because a new
        producer initialised or the transaction timed out; the old producer is fenced."""
        if self.producer_epoch >= MAX_EPOCH:
            raise KafkaError(ErrorCode.invalid_txn_state,
                             f"{self.transactional_id}: the producer epoch cannot be bumped")
        epoch = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._transit(TxnState.PREPARE_EPOCH_FENCE, producer_epoch=epoch,
                             last_producer_epoch=NO_PRODUCER_EPOCH)

    def prepare_increment_producer_epoch(self, timeout_ms: int, expected_epoch: int | None,
                                         now: int) -> TxnTransit:
        """InitProducerId on an idle transactional id: a new epoch, fencing older producers
        (KIP-360: a producer naming its current epoch gets the next one; a retry naming the
        previous epoch gets the same answer again)."""
        if self.is_producer_epoch_exhausted():
            raise KafkaError(ErrorCode.invalid_txn_state, "the producer epoch is exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            raise KafkaError(ErrorCode.producer_fenced,
                             f"{self.transactional_id}: epoch {expected_epoch} is not current")
        return self._transit(TxnState.EMPTY, producer_epoch=epoch, last_producer_epoch=last,
                             timeout_ms=timeout_ms, partitions=frozenset(), start=-1, now=now)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now: int,
                                     record_last_epoch: bool) -> TxnTransit:
        """A new producer id once the epoch is exhausted (epoch 0 again)."""
        return self._transit(
            TxnState.EMPTY, producer_id=new_producer_id, last_producer_id=self.producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms, partitions=frozenset(), start=-1, now=now)

    def prepare_add_partitions(self, added: set[TopicPartition], now: int) -> TxnTransit:
        start = now if self.state in (TxnState.EMPTY, TxnState.COMPLETE_ABORT,
                                      TxnState.COMPLETE_COMMIT) else self.txn_start_timestamp
        return self._transit(TxnState.ONGOING, partitions=frozenset(self.partitions | added),
                             start=start, now=now)

    def prepare_abort_or_commit(self, state: TxnState, now: int) -> TxnTransit:
        return self._transit(state, now=now)

    def prepare_complete(self, now: int) -> TxnTransit:
        state = (TxnState.COMPLETE_COMMIT if self.state == TxnState.PREPARE_COMMIT
                 else TxnState.COMPLETE_ABORT)
        return self._transit(state, partitions=frozenset(), now=now)

    def prepare_dead(self) -> TxnTransit:
        return self._transit(TxnState.DEAD, partitions=frozenset())

    # -- completing a transit -----------------------------------------------------------------

    def complete(self, t: TxnTransit) -> None:
        """Install a transit whose write to the log succeeded (Kafka's completeTransitionTo)."""
        if self.pending_state != t.state:
            raise KafkaError(ErrorCode.invalid_txn_state,
                             f"{self.transactional_id}: completing {t.state.kafka_name} but "
                             f"{self.pending_state} is pending")
        self.producer_id = t.producer_id
        self.last_producer_id = t.last_producer_id
        self.producer_epoch = t.producer_epoch
        self.last_producer_epoch = t.last_producer_epoch
        self.txn_timeout_ms = t.txn_timeout_ms
        self.state = t.state
        self.partitions = set(t.partitions)
        self.txn_start_timestamp = t.txn_start_timestamp
        self.txn_last_update_timestamp = t.txn_last_update_timestamp
        self.pending_state = None
        if t.state != TxnState.PREPARE_EPOCH_FENCE:
            self.has_failed_epoch_fence = False

    def abandon(self) -> None:
        """A transit whose write failed: the metadata stays as it was."""
        self.pending_state = None


# -- the coordinator's checks (Kafka's TransactionCoordinator) -----------------------------------


def check_producer(meta: TransactionMetadata, producer_id: int, producer_epoch: int) -> None:
    if meta.producer_id != producer_id:
        raise KafkaError(ErrorCode.invalid_producer_id_mapping,
                         f"{meta.transactional_id} is mapped to producer id {meta.producer_id}, "
                         f"not {producer_id}")
    if meta.producer_epoch != producer_epoch:
        raise KafkaError(ErrorCode.producer_fenced,
                         f"{meta.transactional_id}: epoch {producer_epoch} is not the current "
                         f"epoch {meta.producer_epoch}")


def init_producer_id_valid(meta: TransactionMetadata, expected_pid: int,
                           expected_epoch: int) -> bool:
    """KIP-360: may a producer naming (pid, epoch) re-initialise this transactional id?"""
    return (meta.producer_epoch == NO_PRODUCER_EPOCH or expected_pid == meta.producer_id
            or (expected_pid == meta.last_producer_id and is_epoch_exhausted(expected_epoch)))


def prepare_add_partitions(meta: TransactionMetadata, producer_id: int, producer_epoch: int,
                           partitions: set[TopicPartition], now: int) -> TxnTransit | None:
    """AddPartitionsToTxn / AddOffsetsToTxn: None when nothing needs writing."""
    check_producer(meta, producer_id, producer_epoch)
    if meta.pending or meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        raise KafkaError(ErrorCode.concurrent_transactions,
                         f"{meta.transactional_id} is completing a transaction")
    if meta.state == TxnState.ONGOING and partitions <= meta.partitions:
        return None
    return meta.prepare_add_partitions(partitions, now)


def prepare_end(meta: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool,
                from_client: bool, now: int) -> TxnTransit | None:
    """EndTxn (from the client, or the coordinator's own abort): the PrepareCommit /
    PrepareAbort transit, or None when the transaction already ended that way."""
    if meta.producer_id != producer_id:
        raise KafkaError(ErrorCode.invalid_producer_id_mapping,
                         f"{meta.transactional_id} is mapped to another producer id")
    if (from_client and producer_epoch != meta.producer_epoch) or producer_epoch < meta.producer_epoch:
        raise KafkaError(ErrorCode.producer_fenced,
                         f"{meta.transactional_id}: epoch {producer_epoch} is not current")
    if meta.pending and meta.pending_state != TxnState.PREPARE_EPOCH_FENCE:
        raise KafkaError(ErrorCode.concurrent_transactions,
                         f"{meta.transactional_id}: a state change is in progress")
    state = meta.state
    if state == TxnState.ONGOING:
        target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if not commit and meta.pending_state == TxnState.PREPARE_EPOCH_FENCE:
            # The fencing abort: the bumped epoch goes into the PrepareAbort record.
            meta.pending_state = None
            meta.producer_epoch = producer_epoch
            meta.last_producer_epoch = NO_PRODUCER_EPOCH
        return meta.prepare_abort_or_commit(target, now)
    done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    preparing = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    if state == done:
        return None
    if state == preparing:
        raise KafkaError(ErrorCode.concurrent_transactions,
                         f"{meta.transactional_id} is already completing")
    raise KafkaError(ErrorCode.invalid_txn_state,
                     f"{meta.transactional_id} is {state.kafka_name}: cannot "
                     f"{'commit' if commit else 'abort'}")
