"""Readers of a topic and of its Iceberg table that the table tests compare: a read_committed
consumer (the expected rows) and DuckDB's iceberg extension (an independent reader)."""

from __future__ import annotations

import glob
import os

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from tests.conftest import wait_for


def committed_ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's last stable offset, as a read_committed consumer sees it."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tables-ends",
                         "isolation.level": "read_committed"})
    try:
        return {p: consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=10,
                                                  cached=False)[1]
                for p in range(partitions)}
    finally:
        consumer.close()


def consume_committed(bootstrap: str, topic: str, ends: dict[int, int]) -> list[tuple]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tables-read",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([KafkaTopicPartition(topic, p, 0) for p in ends])
    rows, done = [], {p for p, end in ends.items() if end == 0}
    try:
        def more() -> bool:
            for msg in consumer.consume(500, 1.0):
                if msg.error() is None:
                    rows.append((msg.partition(), msg.offset(), msg.key(), msg.value(),
                                 [(k, v) for k, v in (msg.headers() or [])]))
                    if msg.offset() + 1 >= ends[msg.partition()]:
                        done.add(msg.partition())
                elif msg.error().code() == -191:  # partition EOF
                    done.add(msg.partition())
            return len(done) == len(ends) or all(
                consumer.position([KafkaTopicPartition(topic, p)])[0].offset >= ends[p]
                for p in ends)
        wait_for(more, 60, interval_s=0, what="the read_committed consumer at the ends")
    finally:
        consumer.close()
    return sorted(rows, key=lambda r: (r[0], r[1]))


def duckdb_connect(*, http: bool = False):
    """A DuckDB connection with the iceberg extension (and its avro and parquet) loaded from
    the PyPI packages' files; ``http``: httpfs too, which ATTACH ... (TYPE iceberg) to a REST
    catalog needs (ImportError when its package is not installed)."""
    import duckdb
    import duckdb_extension_avro
    import duckdb_extension_iceberg
    import duckdb_extension_parquet

    modules = [duckdb_extension_parquet, duckdb_extension_avro]
    if http:
        import duckdb_extension_httpfs

        modules.append(duckdb_extension_httpfs)
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    for module in (*modules, duckdb_extension_iceberg):
        path = glob.glob(os.path.join(os.path.dirname(module.__file__), "extensions", "*",
                                      "*.duckdb_extension"))[0]
        con.execute(f"LOAD '{path}'")
    return con


def duckdb_rows(metadata_location: str) -> list[tuple]:
    return duckdb_connect().execute(
        "SELECT \"partition\", \"offset\", key, value FROM iceberg_scan(?) "
        "ORDER BY \"partition\", \"offset\"", [metadata_location]).fetchall()
