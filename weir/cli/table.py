"""``weir table describe TOPIC`` and ``weir table list``: a topic's Iceberg table (written by
the brokers, docs/tables.md) as a reader sees it.

The catalog is found as any reader finds it: DescribeConfigs of a broker gives
``weir.iceberg.catalog.*``, ``weir.iceberg.warehouse`` and ``weir.iceberg.namespace``; the
table is then loaded with PyIceberg.  ``describe`` prints the identifier, the catalog, the
``metadata_location``, the committed offsets (the next offset per partition, from the current
snapshot's ``weir.next-offsets``) and the lag: the log's last stable offset (a read_committed
consumer's end) minus the table's offset.

``weir table catalog-server`` serves a Weir SQL catalog (by default the embedded one of a
``weir up`` data directory) as an Apache Iceberg REST catalog, for Trino, Spark, DuckDB,
PyIceberg and brokers with ``weir.iceberg.catalog.type=rest`` (weir/tables/rest_server.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

from weir.cli import DEFAULT_DATA_DIR
from weir.cli.admin_common import (
    AdminCliError,
    _common,
    admin_client,
    bootstrap_of,
    client_settings,
    kafka_error_text,
    wait,
)
from weir.tables.settings import (
    CATALOG_KEYS,
    CatalogSettings,
    catalog_settings,
    default_catalog_properties,
)

DEFAULT_REST_PORT = 8181
"""The port Iceberg's REST catalogs conventionally use (Iceberg's REST fixture, Polaris)."""


def add_parser(sub: Any) -> None:
    table = sub.add_parser("table", help="describe and list the topics' Iceberg tables")
    tsub = table.add_subparsers(dest="table_command", required=True, metavar="ACTION")
    p = _common(tsub.add_parser("describe", help="a topic's table: location, offsets, lag"))
    p.add_argument("topic", help="the topic whose table to describe")
    _common(tsub.add_parser("list", help="the tables in the catalog's namespace"))
    server = tsub.add_parser(
        "catalog-server", help="serve the SQL catalog as an Iceberg REST catalog",
        description="Serve Weir's SQL catalog (the embedded one of a weir up data directory, "
                    "or --catalog-uri) over the Apache Iceberg REST Catalog API, for Trino, "
                    "Spark, DuckDB, PyIceberg and brokers with weir.iceberg.catalog.type=rest.")
    server.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                        help="the weir up data directory whose embedded catalog to serve "
                             "(DIR/iceberg/catalog.db, warehouse DIR/iceberg/warehouse; "
                             f"default {DEFAULT_DATA_DIR})")
    server.add_argument("--catalog-uri", default=None, metavar="URL",
                        help="an SQLAlchemy URL of the SQL catalog to serve instead "
                             "(sqlite:////abs/catalog.db, postgresql+psycopg2://...); "
                             "needs --warehouse")
    server.add_argument("--warehouse", default=None, metavar="PATH|URL",
                        help="where new tables' files go, with --catalog-uri")
    server.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; there is no "
                             "authentication)")
    server.add_argument("--port", type=int, default=DEFAULT_REST_PORT,
                        help=f"port to listen on (default {DEFAULT_REST_PORT}; 0: any free "
                             f"port)")


def _broker_configs(args: argparse.Namespace) -> tuple[Any, dict[str, str | None]]:
    from confluent_kafka.admin import ConfigResource

    admin = admin_client(args)
    try:
        brokers = admin.list_topics(timeout=args.timeout).brokers
    except Exception as exc:  # noqa: BLE001 - librdkafka's KafkaException, named below
        raise AdminCliError(f"no broker answered: {kafka_error_text(exc)}") from None
    if not brokers:
        raise AdminCliError("no broker in the cluster's metadata")
    resource = ConfigResource(ConfigResource.Type.BROKER, str(min(brokers)))
    entries = wait(admin.describe_configs([resource])[resource], args, "DescribeConfigs")
    return admin, {key: (entries[key].value if key in entries else None)
                   for key in CATALOG_KEYS}


def _catalog(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    try:
        from weir.tables.catalog import load_catalog
    except ImportError as exc:
        raise AdminCliError(f"pyiceberg is needed for this command: {exc}") from None
    admin, configs = _broker_configs(args)
    try:
        settings = catalog_settings(configs)
        return admin, settings, load_catalog(settings)
    except ValueError as exc:
        raise AdminCliError(str(exc)) from None


def _last_stable_offsets(args: argparse.Namespace, topic: str, partitions: list[int]
                         ) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap_of(args), "group.id": "weir-table",
                         "isolation.level": "read_committed", "log_level": 2,
                         **client_settings(args)})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                  timeout=args.timeout, cached=False)[1]
                for p in partitions}
    except Exception as exc:  # noqa: BLE001 - librdkafka's KafkaException, named below
        raise AdminCliError(f"{topic}: offsets not read: {kafka_error_text(exc)}") from None
    finally:
        consumer.close()


def describe(args: argparse.Namespace) -> dict[str, Any]:
    from pyiceberg.exceptions import NoSuchTableError

    from weir.tables.catalog import committed_offsets, table_identifier

    admin, settings, catalog = _catalog(args)
    identifier = table_identifier(settings, args.topic)
    try:
        table = catalog.load_table(identifier)
    except NoSuchTableError:
        raise AdminCliError(f"no table {'.'.join(identifier)} in the {settings.describe()} "
                            f"(is weir.iceberg.mode=key_value set on {args.topic}?)") from None
    offsets = committed_offsets(table)
    metadata = admin.list_topics(args.topic, timeout=args.timeout).topics.get(args.topic)
    partitions = sorted(metadata.partitions) if metadata is not None and not metadata.error \
        else []
    ends = _last_stable_offsets(args, args.topic, partitions) if partitions else {}
    snapshot = table.current_snapshot()
    return {
        "table": ".".join(identifier),
        "catalog": {"type": settings.type, "uri": settings.uri,
                    "warehouse": settings.warehouse},
        "metadata_location": table.metadata_location,
        "snapshot_id": snapshot.snapshot_id if snapshot else None,
        # every partition of the topic (a partition the marker lacks is at 0)
        "offsets": {str(p): o for p, o in sorted({**dict.fromkeys(partitions, 0),
                                                   **offsets}.items())},
        "lag": {str(p): max(0, end - offsets.get(p, 0)) for p, end in sorted(ends.items())},
        "topic_exists": bool(partitions),
    }


def server_settings(args: argparse.Namespace) -> CatalogSettings:
    """The SQL catalog ``catalog-server`` serves: ``--catalog-uri`` and ``--warehouse``, or
    the embedded default of ``--data-dir``."""
    if args.catalog_uri is None:
        if args.warehouse is not None:
            raise AdminCliError("--warehouse goes with --catalog-uri (a data directory's "
                                "warehouse is DIR/iceberg/warehouse)")
        return catalog_settings(default_catalog_properties(Path(args.data_dir)))
    if "://" not in args.catalog_uri or args.catalog_uri.startswith(("http://", "https://")):
        raise AdminCliError(f"--catalog-uri {args.catalog_uri!r}: an SQLAlchemy URL of an SQL "
                            f"catalog (sqlite:////abs/catalog.db, postgresql+psycopg2://...)")
    if not args.warehouse:
        raise AdminCliError("--catalog-uri needs --warehouse (where new tables' files go)")
    return CatalogSettings("sql", args.catalog_uri, args.warehouse)


def cmd_catalog_server(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise AdminCliError(f"--port {args.port}: not a port (0 to 65535)")
    settings = server_settings(args)
    try:
        from weir.tables.rest_server import serve
    except ImportError as exc:
        raise AdminCliError(f"pyiceberg is needed for this command: {exc}") from None
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    def ready(port: int) -> None:
        print(f"Iceberg REST catalog on http://{args.host}:{port} ({settings.describe()}; "
              f"Ctrl-C stops it)", flush=True)

    try:
        asyncio.run(serve(settings, args.host, args.port, ready))
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        raise AdminCliError(f"cannot serve on {args.host}:{args.port}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the catalog could not be opened: say which
        raise AdminCliError(f"cannot open the {settings.describe()}: "
                            f"{type(exc).__name__}: {exc}") from None
    print("Iceberg REST catalog stopped", file=sys.stderr)
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    if args.table_command == "catalog-server":
        return cmd_catalog_server(args)
    if args.table_command == "list":
        _admin, settings, catalog = _catalog(args)
        names = sorted(".".join(i) for i in catalog.list_tables(settings.namespace)) \
            if (settings.namespace,) in catalog.list_namespaces() else []
        if args.json:
            print(json.dumps({"catalog": settings.describe(), "tables": names}))
        else:
            print("\n".join(names) if names else f"(no tables in {settings.namespace})")
        return 0
    doc = describe(args)
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(f"Table: {doc['table']}")
    print(f"Catalog: {doc['catalog']['type']} {doc['catalog']['uri']} "
          f"(warehouse {doc['catalog']['warehouse']})")
    print(f"Metadata location: {doc['metadata_location']}")
    if not doc["topic_exists"]:
        print("Topic: deleted (the table keeps its history)")
    print(f"{'PARTITION':>9}  {'NEXT OFFSET':>11}  {'LAG':>8}")
    for p in sorted({*doc["offsets"], *doc["lag"]}, key=int):
        print(f"{p:>9}  {doc['offsets'].get(p, 0):>11}  {doc['lag'].get(p, '-'):>8}")
    return 0
