"""The console's pure shaping (records for the message browser, consumer assignments, offsets
and sizes, ACL and SCRAM rows, error names, client properties) and the promise that the
console process loads no native Kafka client library."""

from __future__ import annotations

import struct
import subprocess
import sys
from types import SimpleNamespace

import pytest

from weir.console import views
from weir.console.admin import config_source, error_name, parse_bootstrap, security_from_properties
from weir.records.batch import ATTRIBUTES_OFFSET, HEADER_SIZE
from weir.records.builder import build_batch, encode_varint


def _field(data: bytes | None) -> bytes:
    return encode_varint(-1) if data is None else encode_varint(len(data)) + data


def batch_of(records: list[tuple[bytes | None, bytes | None, list]], base_offset: int,
             timestamp_ms: int) -> bytes:
    """An uncompressed v2 batch whose records carry headers: build_batch's header with
    the records swapped for ones encoded here (batch length and CRC redone)."""
    import crc32c

    template = bytearray(build_batch([b""] * len(records), base_offset=base_offset,
                                     timestamp_ms=timestamp_ms))
    body = b""
    for i, (key, value, headers) in enumerate(records):
        rec = b"\x00" + encode_varint(0) + encode_varint(i) + _field(key) + _field(value)
        rec += encode_varint(len(headers)) + b"".join(
            _field(k.encode()) + _field(v) for k, v in headers)
        body += encode_varint(len(rec)) + rec
    batch = template[:HEADER_SIZE] + body
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return bytes(batch)


def test_the_console_process_loads_no_native_kafka_client():
    code = ("import sys, weir.console.cli, weir.console.server, weir.console.actions, "
            "weir.console.group_reset, weir.console.reader; "
            "print('confluent_kafka' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_decode_records_with_keys_values_and_headers():
    batch = batch_of([(b"k", b'{"a": 1}', [("h", b"v"), ("nul", None)]),
                      (None, b"\xff\xfe", [])], base_offset=10, timestamp_ms=1000)
    rows, next_offset = views.decode_records(batch, 11, partition=3)
    assert next_offset == 12
    assert [r["offset"] for r in rows] == [11]  # offset 10 is before the one asked
    rows, _ = views.decode_records(batch, 0, partition=3)
    first, second = rows
    assert first["key"]["text"] == "k" and first["value"]["text"] == '{"a": 1}'
    assert first["headers"] == [
        {"key": "h", "text": "v", "hex": "76", "size": 1, "truncated": False},
        {"key": "nul", "text": None, "hex": None, "size": None, "truncated": False}]
    assert second["key"]["size"] is None
    assert second["value"] == {"text": None, "hex": "fffe", "size": 2, "truncated": False}
    assert first["timestamp"] == 1000 and first["partition"] == 3
    # A partial batch at the end of a Fetch answer is left for the next read.
    rows, next_offset = views.decode_records(batch + batch[:30], 0, partition=3)
    assert len(rows) == 2 and next_offset == 12
    with pytest.raises(ValueError, match="CORRUPT_MESSAGE"):
        views.decode_records(batch[:HEADER_SIZE] + b"\xfe\x7f" + batch[HEADER_SIZE + 2:], 0,
                             partition=0)


def test_large_values_are_cut_for_the_page():
    big = b"x" * (views.MAX_SHOWN_BYTES + 5)
    shown = views._shown(big)
    assert shown["truncated"] and shown["size"] == len(big)
    assert len(shown["text"]) == views.MAX_SHOWN_BYTES


def consumer_assignment(parts: dict[str, list[int]]) -> bytes:
    out = struct.pack(">hi", 0, len(parts))
    for topic, ps in parts.items():
        out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(ps))
        out += b"".join(struct.pack(">i", p) for p in ps)
    return out + struct.pack(">i", -1)


def test_group_rows_from_a_described_group():
    desc = SimpleNamespace(group_id="g", group_state="Stable", protocol_type="consumer",
                           protocol_data="range", members=[SimpleNamespace(
                               member_id="m-1", client_id="c", client_host="/127.0.0.1",
                               group_instance_id=None,
                               member_assignment=consumer_assignment({"t": [1, 0]}))])
    row = views.group_row(desc, {("t", 0): 4}, {("t", 0): 10, ("t", 1): "NOT_LEADER"})
    assert row["state"] == "Stable" and row["total_lag"] == 6 and row["topics"] == ["t"]
    assert [(r["partition"], r["lag"], r["member"]) for r in row["partitions"]] == [
        (0, 6, "c"), (1, None, "c")]
    assert views.member_rows(desc)[0]["assignment"] == ["t-0", "t-1"]
    assert views.decode_assignment(b"\x00\x00\x00\x00\x00\x09") == []  # truncated


def test_offsets_and_sizes_per_partition_and_topic():
    topics = [{"name": "t", "partitions": [
        {"topic": "t", "partition": 0, "leader": 1, "replicas": [1, 2]},
        {"topic": "t", "partition": 1, "leader": 2, "replicas": [2, 1]}]}]
    log_dirs = {1: {"sizes": [["t", 0, 100, False], ["t", 1, 50, False], ["t", 1, 7, True]]},
                2: {"sizes": [["t", 0, 90, False], ["t", 1, 60, False]]}, 3: {"error": "x"}}
    views.add_offsets_and_sizes(topics, {("t", 0): 2, ("t", 1): "OFFSET_NOT_AVAILABLE"},
                                {("t", 0): 12, ("t", 1): 5}, log_dirs)
    p0, p1 = topics[0]["partitions"]
    assert p0["records"] == 10 and p0["size_bytes"] == 100
    assert p0["replica_bytes"] == {"1": 100, "2": 90}
    assert p1["records"] is None and p1["offsets_error"] == "OFFSET_NOT_AVAILABLE"
    assert topics[0]["records"] is None  # one partition unknown: no total
    assert topics[0]["size_bytes"] == 300 and topics[0]["replication_factor"] == 2


def test_acl_and_scram_rows_and_names():
    acls = SimpleNamespace(resources=[SimpleNamespace(
        resource_type=2, resource_name="orders", pattern_type=3, acls=[SimpleNamespace(
            principal="User:alice", host="*", operation=3, permission_type=3)])])
    assert views.acl_rows(acls) == [{"resource_type": "TOPIC", "resource_name": "orders",
                                     "pattern_type": "LITERAL", "principal": "User:alice",
                                     "host": "*", "operation": "READ",
                                     "permission": "ALLOW"}]
    users = SimpleNamespace(results=[SimpleNamespace(user="bob", error_code=0, credential_infos=[
        SimpleNamespace(mechanism=2, iterations=4096)])])
    assert views.scram_rows(users) == [{"user": "bob", "error": None, "mechanisms": [
        {"mechanism": "SCRAM-SHA-512", "iterations": 4096}]}]
    assert error_name(0) is None and error_name(6) == "NOT_LEADER_OR_FOLLOWER"
    assert error_name(9999) == "UNKNOWN_ERROR_CODE_9999"
    assert config_source(1) == "DYNAMIC_TOPIC_CONFIG" and config_source(5) == "DEFAULT_CONFIG"


def test_bootstrap_and_client_properties():
    assert parse_bootstrap("a:1, SASL_SSL://b:2") == [("a", 1), ("b", 2)]
    with pytest.raises(ValueError):
        parse_bootstrap("a")
    assert security_from_properties({}) is None
    sasl = security_from_properties({"security.protocol": "SASL_PLAINTEXT",
                                     "sasl.mechanism": "SCRAM-SHA-256",
                                     "sasl.jaas.config": 'org.apache.kafka.common.security.'
                                     'scram.ScramLoginModule required username="u" '
                                     'password="p";'})
    assert (sasl.mechanism, sasl.username, sasl.password) == ("SCRAM-SHA-256", "u", "p")
    assert sasl.ssl_context is None
    with pytest.raises(ValueError, match="sasl.username"):
        security_from_properties({"security.protocol": "SASL_SSL",
                                  "sasl.mechanism": "PLAIN"})
