"""JBOD in the LogManager (KIP-112/113): placement over several log dirs, preferred dirs,
future logs and their swap by renames, and recovery of a swap interrupted by a crash."""

from __future__ import annotations

import contextlib

import pytest

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.builder import build_batch
from weir.storage.checkpoints import read_offset_checkpoint
from weir.storage.log import LogConfig
from weir.storage.log_dirs import (
    DirKind,
    delete_dir_name,
    disk_usage,
    future_dir_name,
    parse_log_dir_name,
)
from weir.storage.log_manager import DuplicateLogError, LogManager

TP0, TP1, TP2 = TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("a-b", 2)


@pytest.fixture
def dirs(tmp_path):
    return [tmp_path / "d1", tmp_path / "d2"]


@pytest.fixture
def manager(dirs):
    managers = []

    def make():
        m = LogManager(dirs, LogConfig())
        managers.append(m)
        return m

    yield make
    for m in managers:  # a "crashed" manager's files may be gone: close what is left
        for lg in [*m.all_logs().values(), *m.future_logs().values()]:
            with contextlib.suppress(OSError):
                lg.close()


def produce(lg, n=3, epoch=0):
    return lg.append_as_leader(build_batch([b"v" * 30] * n, timestamp_ms=1), epoch, 1)


def copy_all(current, future):
    """What the mover does: whole batches at the future log's end, offsets kept."""
    while future.log_end_offset < current.log_end_offset:
        read = current.read(future.log_end_offset, 1 << 20, max_offset=None)
        future.append_as_follower(read.read_bytes())


def values(lg):
    out, offset = [], lg.log_start_offset
    while offset < lg.log_end_offset:
        read = lg.read(offset, 1 << 20, max_offset=None)
        out.append(read.read_bytes())
        offset = read.last_offset + 1
    return b"".join(out)


def test_dir_names_parse_as_kafka_spells_them():
    tp = TopicPartition("my-topic", 12)
    future, delete = future_dir_name(tp), delete_dir_name(tp)
    assert future.startswith("my-topic-12.") and future.endswith("-future")
    assert len(future) == len("my-topic-12.") + 32 + len("-future")
    assert parse_log_dir_name(future) == (tp, DirKind.FUTURE)
    assert parse_log_dir_name(delete) == (tp, DirKind.DELETE)
    assert parse_log_dir_name("my-topic-12") == (tp, DirKind.CURRENT)
    for bad in ("my-topic", "my-topic-12.abc-future", "x-1.ZZ" + "0" * 30 + "-delete", "-3"):
        assert parse_log_dir_name(bad) is None


def test_disk_usage_reports_the_volume(tmp_path):
    usage = disk_usage(tmp_path)
    assert usage.total_bytes > 0 and 0 <= usage.usable_bytes <= usage.total_bytes


def test_new_logs_go_to_the_dir_with_fewest_logs_futures_counted(manager, dirs):
    m = manager()
    m.startup(now_ms=0)
    a = m.get_or_create_log(TP0)
    m.create_future_log(TP0, dirs[1])  # d2 now holds one (future) log as well
    b = m.get_or_create_log(TP1)
    assert (a.dir.parent, b.dir.parent) == (dirs[0], dirs[0])
    assert m.get_or_create_log(TP2).dir.parent == dirs[1]


def test_preferred_dir_is_used_once_for_a_log_not_created_yet(manager, dirs):
    m = manager()
    m.startup(now_ms=0)
    m.get_or_create_log(TP1)  # d1 has one
    m.maybe_update_preferred_log_dir(TP0, dirs[0])
    assert m.preferred_log_dir(TP0) == dirs[0]
    assert m.get_or_create_log(TP0).dir.parent == dirs[0]  # not the emptier d2
    assert m.preferred_log_dir(TP0) is None
    m.maybe_update_preferred_log_dir(TP0, dirs[0])  # already there: nothing recorded
    assert m.preferred_log_dir(TP0) is None


def test_resolve_log_dir_matches_absolute_paths_only(manager, dirs):
    m = manager()
    assert m.resolve_log_dir(str(dirs[1].absolute())) == dirs[1]
    assert m.resolve_log_dir(str(dirs[1]) + "/") == dirs[1]
    assert m.resolve_log_dir("/nonexistent/dir") is None


def test_swap_moves_the_log_keeping_offsets_epochs_and_hw(manager, dirs):
    m = manager()
    m.startup(now_ms=0)
    current = m.get_or_create_log(TP0, topic_id="tid")
    produce(current, epoch=0)
    produce(current, epoch=3)
    current.update_high_watermark(4)
    future = m.create_future_log(TP0, dirs[1], topic_id="tid")
    assert future.dir.parent == dirs[1] and future.dir.name.endswith("-future")
    with pytest.raises(ValueError, match="not caught up"):
        m.replace_current_with_future(TP0)
    copy_all(current, future)
    before = values(current)
    old = m.replace_current_with_future(TP0)
    assert old is current and old.dir.name.endswith("-delete") and old.dir.parent == dirs[0]
    new = m.get_log(TP0)
    assert new is future and new.dir == dirs[1] / "orders-0"
    assert m.log_dir_of(TP0) == dirs[1] and m.future_log(TP0) is None
    assert values(new) == before and new.log_end_offset == 6 and new.high_watermark == 4
    assert new.epoch_cache.entries == [(0, 0), (3, 3)]
    assert (new.dir / "leader-epoch-checkpoint").exists()
    assert (new.dir / "partition.metadata").read_text().endswith("topic_id: tid\n")
    produce(new)  # the moved log keeps working at its new path
    new.roll()
    produce(new)
    old.delete()
    m.shutdown()
    m2 = manager()
    m2.startup(now_ms=0)
    reloaded = m2.get_log(TP0)
    assert m2.log_dir_of(TP0) == dirs[1] and reloaded.log_end_offset == 12
    assert values(reloaded)[: len(before)] == before


def test_crash_between_the_two_renames_finishes_the_swap(manager, dirs):
    m = manager()
    m.startup(now_ms=0)
    current = m.get_or_create_log(TP0)
    produce(current)
    produce(current)
    future = m.create_future_log(TP0, dirs[1])
    copy_all(current, future)
    expected = values(current)
    m.checkpoint_recovery_points()
    # The swap's first rename happened, then the process died (no shutdown, no flush).
    current.rename_dir(dirs[0] / delete_dir_name(TP0))
    m2 = manager()
    m2.startup(now_ms=0)
    lg = m2.get_log(TP0)
    assert m2.log_dir_of(TP0) == dirs[1] and lg.dir.name == "orders-0"
    assert values(lg) == expected
    assert m2.future_log(TP0) is None
    assert [p.name for p in dirs[0].iterdir() if p.is_dir()] == []  # -delete removed


def test_crash_before_the_swap_keeps_both_logs_for_the_mover(manager, dirs):
    m = manager()
    m.startup(now_ms=0)
    current = m.get_or_create_log(TP0)
    produce(current)
    future = m.create_future_log(TP0, dirs[1])
    copy_all(current, future)
    produce(current)
    m2 = manager()
    m2.startup(now_ms=0)
    assert m2.log_dir_of(TP0) == dirs[0] and m2.get_log(TP0).log_end_offset == 6
    assert m2.future_dir_of(TP0) == dirs[1] and m2.future_log(TP0).log_end_offset == 3


def test_crash_after_the_swap_deletes_the_old_copy(manager, dirs):
    m = manager()
    m.startup(now_ms=0)
    current = m.get_or_create_log(TP0)
    produce(current)
    future = m.create_future_log(TP0, dirs[1])
    copy_all(current, future)
    old = m.replace_current_with_future(TP0)
    assert old.dir.exists()  # not deleted yet when the process dies
    m2 = manager()
    m2.startup(now_ms=0)
    assert m2.log_dir_of(TP0) == dirs[1] and m2.get_log(TP0).log_end_offset == 3
    assert not old.dir.exists()


def test_two_current_logs_of_a_partition_stop_the_start(manager, dirs):
    for d in dirs:
        (d / "orders-0").mkdir(parents=True)
    with pytest.raises(DuplicateLogError, match="orders-0"):
        manager().startup(now_ms=0)


def test_a_failed_dir_drops_its_future_logs_and_blocks_non_new_creation(manager, dirs):
    m = manager()
    m.startup(now_ms=0)
    m.get_or_create_log(TP0)
    m.create_future_log(TP0, dirs[1])
    m.mark_dir_failed(dirs[1], "disk gone")
    assert m.future_log(TP0) is None and m.offline_dirs == {dirs[1]: "disk gone"}
    assert m.get_log(TP0) is not None  # d1 still serves
    with pytest.raises(KafkaError) as err:
        m.get_or_create_log(TP1, is_new=False)
    assert err.value.code == ErrorCode.kafka_storage_error
    assert m.get_or_create_log(TP1, is_new=True).dir.parent == dirs[0]
    with pytest.raises(KafkaError) as err:
        m.create_future_log(TP1, dirs[1])
    assert err.value.code == ErrorCode.kafka_storage_error


def test_offline_dir_answers_storage_error_and_is_described(manager, dirs):
    m = manager()
    m.startup(now_ms=0)
    m.get_or_create_log(TP0)
    m.get_or_create_log(TP1)
    m.mark_dir_failed(dirs[0], "boom")
    with pytest.raises(KafkaError) as err:
        m.check_online(TP0)
    assert err.value.code == ErrorCode.kafka_storage_error
    m.check_online(TP1)
    m.check_online(TP2)  # not hosted: nothing to say
    assert not m.is_log_dir_online(dirs[0]) and m.is_log_dir_online(dirs[1])
    by_dir = {d: [lg.topic_partition for lg, _ in logs] for d, logs in m.logs_by_dir().items()}
    assert by_dir == {dirs[0]: [TP0], dirs[1]: [TP1]}


def test_checkpoints_cover_future_logs(manager, dirs):
    m = manager()
    m.startup(now_ms=0)
    current = m.get_or_create_log(TP0)
    produce(current)
    future = m.create_future_log(TP0, dirs[1])
    copy_all(current, future)
    future.flush()
    m.checkpoint_recovery_points()
    assert read_offset_checkpoint(dirs[1] / "recovery-point-offset-checkpoint") == {TP0: 3}
    assert read_offset_checkpoint(dirs[0] / "recovery-point-offset-checkpoint") == {TP0: 0}


def test_a_future_log_that_cannot_be_opened_takes_only_its_dir_offline(manager, dirs):
    m = manager()
    m.startup(now_ms=0)
    produce(m.get_or_create_log(TP0))
    m.get_or_create_log(TP1)  # in d2
    m.create_future_log(TP0, dirs[1])
    m.shutdown()
    (future_dir,) = [p for p in dirs[1].iterdir() if p.name.endswith("-future")]
    (future_dir / "leader-epoch-checkpoint").mkdir()  # unreadable as a file: an I/O error
    m2 = manager()
    m2.startup(now_ms=0)
    assert set(m2.offline_dirs) == {dirs[1]}
    assert m2.future_log(TP0) is None and m2.future_dir_of(TP0) is None
    assert m2.get_log(TP0).log_end_offset == 3  # d1 serves
