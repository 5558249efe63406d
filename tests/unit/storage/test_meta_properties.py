"""meta.properties (Kafka's BrokerMetadataCheckpoint, ZooKeeper mode): read, checked against
the configured broker.id and ZooKeeper's cluster id, written where missing."""

from __future__ import annotations

import datetime

import pytest

from weir.storage import meta_properties as mp
from weir.storage.meta_properties import InconsistentMetadataError, MetaProperties


def _write(d, text: str) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "meta.properties").write_text(text)


def test_kafkas_file_is_read(tmp_path):
    _write(tmp_path, "#\n#Tue Nov 24 09:00:00 UTC 2026\nversion=0\nbroker.id=3\n"
                     "cluster.id=Xm2c0AVnQZe8hPyAIjRsAw\n")
    assert mp.read(tmp_path) == MetaProperties(3, "Xm2c0AVnQZe8hPyAIjRsAw")
    assert mp.read(tmp_path / "none") is None


def test_written_file_reads_back_in_kafkas_shape(tmp_path):
    when = datetime.datetime(2026, 11, 24, 9, 0, tzinfo=datetime.UTC)
    assert mp.text(2, "cid", when) == (
        "#\n#Tue Nov 24 09:00:00 UTC 2026\nversion=0\nbroker.id=2\ncluster.id=cid\n")
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    d1.mkdir()
    d2.mkdir()
    _write(d2, "version=0\nbroker.id=2\ncluster.id=cid\n")
    assert mp.write_missing([d1, d2], 2, "cid") == [d1]  # d2 has one already
    assert mp.read(d1) == MetaProperties(2, "cid")


def test_a_file_without_cluster_id_is_rewritten(tmp_path):
    _write(tmp_path, "version=0\nbroker.id=2\n")  # Kafka 0.10.0 and before
    assert mp.read(tmp_path) == MetaProperties(2, None)
    mp.check({tmp_path: mp.read(tmp_path)}, 2, "cid")
    assert mp.write_missing([tmp_path], 2, "cid") == [tmp_path]
    assert mp.read(tmp_path) == MetaProperties(2, "cid")


@pytest.mark.parametrize("text, message", [
    ("version=1\nnode.id=2\ncluster.id=c\n", "version '1'"),
    ("version=0\ncluster.id=c\n", "no valid broker.id"),
    ("version=0\nbroker.id=two\n", "no valid broker.id"),
])
def test_files_a_zookeeper_broker_cannot_use_are_refused(tmp_path, text, message):
    _write(tmp_path, text)
    with pytest.raises(InconsistentMetadataError, match=message):
        mp.read(tmp_path)


def test_checks_match_kafkas(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    mp.check({}, 1, "cid")  # a new broker: nothing to compare
    mp.check({a: MetaProperties(1, "cid"), b: MetaProperties(1, "cid")}, 1, "cid")
    with pytest.raises(InconsistentMetadataError, match="not consistent across log.dirs"):
        mp.check({a: MetaProperties(1, "cid"), b: MetaProperties(2, "cid")}, 1, "cid")
    with pytest.raises(InconsistentMetadataError, match="not consistent across log.dirs"):
        mp.check({a: MetaProperties(1, "cid"), b: MetaProperties(1, "other")}, 1, "cid")
    with pytest.raises(InconsistentMetadataError,
                       match="Cluster ID cid doesn't match stored clusterId other"):
        mp.check({a: MetaProperties(1, "other")}, 1, "cid")
    with pytest.raises(InconsistentMetadataError,
                       match="Configured broker.id 1 doesn't match stored broker.id 2"):
        mp.check({a: MetaProperties(2, "cid")}, 1, "cid")


def test_an_unreadable_file_leaves_its_dir_to_the_log_manager(tmp_path):
    (tmp_path / "meta.properties").mkdir(parents=True)  # reading it fails with an OSError
    assert mp.read_all([tmp_path]) == {}
