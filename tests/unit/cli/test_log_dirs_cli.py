"""``weir log-dirs``'s JSON (kafka-log-dirs.sh's document) and ``weir up --log-dirs``."""

from __future__ import annotations

import pytest

from weir.cli.log_dirs import _table, describe_document
from weir.cli.main import main
from weir.ops.cluster import LocalCluster
from weir.protocol import codec
from weir.protocol.errors import ErrorCode


def _response(version: int, results: list[dict]):
    from kio.index import load_response_schema

    return codec.build(load_response_schema(35, version), results=results)


def test_document_follows_kafka_log_dirs_json():
    ok = {"log_dir": "/b", "error_code": 0, "total_bytes": 100, "usable_bytes": 40, "topics": [
        {"name": "t", "partitions": [
            {"partition_index": 10, "partition_size": 5, "offset_lag": 0,
             "is_future_key": False},
            {"partition_index": 2, "partition_size": 7, "offset_lag": 3,
             "is_future_key": True}]},
        {"name": "other", "partitions": [
            {"partition_index": 0, "partition_size": 1, "offset_lag": 0,
             "is_future_key": False}]}]}
    failed = {"log_dir": "/a", "error_code": int(ErrorCode.kafka_storage_error)}
    doc = describe_document({2: _response(4, [ok, failed]), 1: _response(1, [])}, {"t"})
    assert doc == {"version": 1, "brokers": [
        {"broker": 1, "logDirs": []},
        {"broker": 2, "logDirs": [
            {"logDir": "/a", "error": "KAFKA_STORAGE_ERROR", "partitions": [],
             "totalBytes": -1, "usableBytes": -1},
            {"logDir": "/b", "error": None, "totalBytes": 100, "usableBytes": 40,
             "partitions": [
                 {"partition": "t-2", "size": 7, "offsetLag": 3, "isFuture": True},
                 {"partition": "t-10", "size": 5, "offsetLag": 0, "isFuture": False}]}]}]}
    text = _table(doc)
    assert "broker 2  /a  KAFKA_STORAGE_ERROR" in text and "(future)" in text


def test_local_cluster_gives_each_broker_n_log_dirs(tmp_path):
    one = LocalCluster(tmp_path / "one", brokers=1)
    assert one.broker_log_dirs(1) == [one.broker_dir(1) / "logs"]
    two = LocalCluster(tmp_path / "two", brokers=1, log_dirs=2)
    assert two.broker_log_dirs(1) == [two.broker_dir(1) / "logs-1", two.broker_dir(1) / "logs-2"]
    with pytest.raises(ValueError):
        LocalCluster(tmp_path / "none", brokers=1, log_dirs=0)


def test_weir_up_refuses_zero_log_dirs(tmp_path, capsys):
    assert main(["up", "--data-dir", str(tmp_path), "--log-dirs", "0"]) != 0
    assert "--log-dirs" in capsys.readouterr().err
