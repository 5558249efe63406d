"""The translator's decisions (sans I/O) and the decoding of committed records."""

from __future__ import annotations

from weir.common import TopicPartition
from weir.records.batch import assign_offsets, parse_header
from weir.records.builder import build_batch
from weir.records.control import build_marker
from weir.tables.decode import decode_committed
from weir.tables.translator import Commit, Load, Translator

TP = TopicPartition("t", 0)


def _at(batch: bytes, offset: int) -> bytes:
    return bytes(assign_offsets(bytearray(batch), [parse_header(batch)], offset, 0, None))


def test_a_new_leader_reads_the_table_first_and_resumes_there():
    tr = Translator()
    tr.on_leadership(TP, True, 3)
    load = tr.decide(TP, 100, 1000, now_ms=0)
    assert isinstance(load, Load)
    assert tr.decide(TP, 100, 1000, now_ms=1) is None  # one job at a time
    tr.loaded(TP, load.generation, 40, "m1")
    assert tr.partitions[TP].lag_records == 60
    assert tr.decide(TP, 100, 1000, now_ms=10) is None  # batches up to half the target lag
    commit = tr.decide(TP, 120, 1000, now_ms=510)
    assert commit == Commit(TP, load.generation, 40, 120)
    tr.committed(TP, commit.generation, 120, 80, "m2", now_ms=600)
    assert tr.partitions[TP].lag_records == 0


def test_led_partitions_are_indexed_by_topic():
    tr = Translator()
    other = TopicPartition("u", 1)
    tr.on_leadership(TP, True, 3)
    tr.on_leadership(other, True, 1)
    tr.on_leadership(TopicPartition("t", 1), True, 1)
    assert tr.by_topic == {"t": {TP, TopicPartition("t", 1)}, "u": {other}}
    tr.on_leadership(other, False, 2)
    tr.on_leadership(TP, False, 4)
    tr.on_leadership(TP, False, 4)  # a second "not leader" changes nothing
    assert tr.by_topic == {"t": {TopicPartition("t", 1)}}


def test_a_result_of_an_old_leadership_is_ignored():
    tr = Translator()
    tr.on_leadership(TP, True, 1)
    old = tr.decide(TP, 10, 0, now_ms=0)
    tr.on_leadership(TP, True, 2)  # a new epoch: the table must be read again
    tr.loaded(TP, old.generation, 10, None)
    assert tr.partitions[TP].next_offset is None
    tr.on_leadership(TP, False, 2)
    assert TP not in tr.partitions


def test_a_failure_backs_off_and_the_table_falls_behind():
    tr = Translator()
    tr.on_leadership(TP, True, 1)
    load = tr.decide(TP, 10, 0, now_ms=0)
    assert tr.failed(TP, load.generation, "catalog down", now_ms=0) == 500
    assert tr.decide(TP, 10, 0, now_ms=100) is None
    again = tr.decide(TP, 10, 0, now_ms=600)
    assert isinstance(again, Load)
    assert tr.failed(TP, again.generation, "catalog down", now_ms=600) == 1000
    assert tr.partitions[TP].lag_records == 10


def test_decode_drops_aborted_and_control_records():
    pid = 7
    plain = _at(build_batch([b"a", b"b"], keys=[b"k", None], timestamp_ms=5), 0)
    aborted = _at(build_batch([b"x"], producer_id=pid, producer_epoch=0, base_sequence=0,
                              transactional=True), 2)
    abort = _at(build_marker(pid, 0, False, 0, 9), 3)
    kept = _at(build_batch([b"y"], producer_id=pid, producer_epoch=0, base_sequence=1,
                           transactional=True, timestamp_ms=8), 4)
    commit = _at(build_marker(pid, 0, True, 0, 9), 5)
    columns = decode_committed([(plain + aborted + abort, [(pid, 2)]), (kept + commit, [])],
                               start=1, upper=6)
    assert columns.offset == [1, 4]  # offset 0 is below start
    assert columns.value == [b"b", b"y"]
    assert columns.key == [None, None]
    assert columns.timestamp_us == [5000, 8000]
    assert columns.next_offset == 6
