"""Idempotent producers in the simulation (weir.sim.idempotent), modelled on librdkafka (up
to five requests in flight per partition, answered in order; drain and retry on an error;
implicit acknowledgement of earlier batches by a later success): batches resent unchanged
across leader changes, crashes, lost answers and power loss must be acknowledged with the
offsets they were first written at, and written once (Kafka's ProducerStateEntry keeps a
producer's last batches, rebuilt on followers as they replicate)."""

from __future__ import annotations

import functools
from collections import Counter

import pytest

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.sim import run_seed
from weir.sim.cluster import data_config
from weir.sim.idempotent import IdempotentProducers
from weir.storage.log import Log
from weir.storage.log_results import AppendResult

SEEDS = range(8)


def _config():
    return data_config(idempotent_producers=True)


@functools.cache
def _clean_run(seed: int):
    """One unplanted run per seed, shared by the tests that only read its result."""
    return run_seed(seed, _config())


@pytest.mark.parametrize("seed", SEEDS)
def test_retried_batches_keep_their_offsets_and_are_written_once(seed: int) -> None:
    result = _clean_run(seed)
    assert result.ok, "\n".join(result.violations + ["faults:"] + result.faults)
    stats = result.data_stats
    assert stats["idempotent_acked"] > 0 and stats["idempotent_retries"] > 0


def test_seeds_resend_batches_a_broker_already_wrote() -> None:
    """The runs do exercise the path: some retries reach a leader holding the batch."""
    duplicates = 0
    original = Log.append_as_leader

    def counting(self, *args, **kwargs):
        nonlocal duplicates
        result = original(self, *args, **kwargs)
        duplicates += result.duplicate
        return result

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Log, "append_as_leader", counting)
        for seed in SEEDS:
            run_seed(seed, _config())
    assert duplicates > 0


def _violations(marker: str, seeds: range = SEEDS) -> list[str]:
    for seed in seeds:
        found = [v for v in run_seed(seed, _config()).violations if marker in v]
        if found:
            return found
    return []


def test_catches_a_duplicate_answered_without_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plant a leader answering a retried batch it already wrote without its offsets (what
    librdkafka reports as an acknowledgement with no offset)."""
    original = Log.append_as_leader

    def offsetless(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        if result.duplicate:
            return AppendResult(-1, -1, -1, result.log_start_offset, duplicate=True)
        return result

    monkeypatch.setattr(Log, "append_as_leader", offsetless)
    assert _violations("acknowledged without its offsets")


def test_catches_a_new_leader_that_forgot_the_producers_batches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Plant followers that do not rebuild producer state as they replicate: a new leader
    takes a resent batch it already holds for a new one (the producer is unknown to it)."""
    original = Log.append_as_follower

    def forgetful(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        self.producer_state.clear()
        return result

    monkeypatch.setattr(Log, "append_as_follower", forgetful)
    assert _violations("written twice")


def test_pipelined_requests_meet_the_answers_that_make_librdkafka_ack_without_offsets() -> None:
    """Kafka-conformant answers do lead librdkafka to acknowledge without an offset: an
    earlier request refused or timed out in the produce purgatory, a later request of the
    same producer appended and acknowledged (rd_kafka_dr_implicit_ack).  The seeds reach
    that path, with every explicit acknowledgement carrying its offsets."""
    implicit = 0
    for seed in SEEDS:
        result = _clean_run(seed)
        assert result.ok, "\n".join(result.violations)
        implicit += result.data_stats.get("idempotent_implicit_acks", 0)
    assert implicit > 0


def test_catches_duplicate_sequence_number_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plant a leader answering a retried batch it holds with DUPLICATE_SEQUENCE_NUMBER (as
    Kafka 0.11 did for a batch older than its cache): librdkafka takes that for success,
    with no offset.  Kafka 3.x answers the original offsets, or OUT_OF_ORDER_SEQUENCE_NUMBER
    for a batch no longer among the producer's last five."""
    original = Log.append_as_leader

    def duplicate_sequence(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        if result.duplicate:
            raise KafkaError(ErrorCode.duplicate_sequence_number, "a duplicate")
        return result

    monkeypatch.setattr(Log, "append_as_leader", duplicate_sequence)
    assert _violations("acknowledged without its offsets: duplicate_sequence_number")


class _Sim:
    def __init__(self) -> None:
        self.violations: list[str] = []

    def violation(self, message: str) -> None:
        self.violations.append(message)


class _Plane:
    def __init__(self) -> None:
        self.sim = _Sim()
        self.config = _config()
        self.stats: Counter[str] = Counter()

    def send(self, *args, **kwargs) -> None:
        raise AssertionError("not sent")


def test_a_record_lost_to_power_failure_may_be_written_again_elsewhere() -> None:
    """Seed 6: a batch read at offsets 64-65 was lost to power failure by the broker that
    then led (the data plane excuses it); the producer's retry is the next sequence to
    that leader, written at 61-62.  Not a duplicate; without the excuse it still is one."""
    tp = TopicPartition("t1", 1)
    value = b"idem:t1-1#158"
    plane = _Plane()
    producers = IdempotentProducers(plane, lambda *_args: None)
    producers.committed(tp, 64, value)
    producers.excused(tp, 64, value)
    producers.committed(tp, 61, value)
    assert plane.sim.violations == []
    producers.excused(tp, 64, value)  # excusing another offset forgets nothing
    producers.committed(tp, 70, value)
    assert plane.sim.violations == [
        f"{tp}: idempotent record {value!r} written twice, at offsets 61 and 70 (read)"]
