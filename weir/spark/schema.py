"""The fixed schema of the ``weir`` data source: the one of Spark's Kafka source."""

from __future__ import annotations

from functools import cache
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADER_TYPE = ArrayType(StructType([StructField("key", StringType()),
                                    StructField("value", BinaryType())]))


def kafka_schema(include_headers: bool = False) -> StructType:
    """key, value, topic, partition, offset, timestamp, timestampType [, headers]."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADER_TYPE))
    return StructType(fields)


@cache
def arrow_schema(include_headers: bool = False) -> Any:
    """The Arrow schema Spark expects for :func:`kafka_schema` (a ``pyarrow.Schema``)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(kafka_schema(include_headers), timezone="UTC")


def check_user_schema(given: Any, include_headers: bool) -> None:
    """Refuse a schema given with ``.schema(...)`` unless it is :func:`kafka_schema`
    (a :class:`StructType`, a DDL string or a schema's JSON)."""
    import json

    from weir.spark.options import OptionError

    schema = given
    if isinstance(given, str):
        text = given.strip()
        if text.startswith("{"):
            schema = StructType.fromJson(json.loads(text))
        else:
            from pyspark.sql.types import DataType

            schema = DataType.fromDDL(text)
    if schema != kafka_schema(include_headers):
        raise OptionError("the weir source has a fixed schema (that of Spark's Kafka"
                          " source); do not give one with .schema()")
