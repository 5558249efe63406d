"""``weir.spark.register``: ``format("weir")`` in a registered session, and the lazy source.

A Python data source can only hand Spark rows from Python workers; it cannot hand back
another relation such as a Parquet scan.  So, in the sessions given to
:func:`register`, a **batch** ``spark.read.format("weir")...load()`` is answered by
:func:`weir.spark.history.read` (``weir.spark.read``) instead of the Python data source:
the offsets a topic's Iceberg table holds are read by Spark's own Parquet reader, the rest
over the Kafka protocol, and a small read on the driver.  Everything else named ``weir``
(``readStream``, writes, SQL ``USING weir``) goes to the Python data source
(:class:`weir.spark.source.WeirDataSource`) as before.

How: PySpark's classic ``DataFrameReader`` keeps its format, options and schema in the
JVM reader only, so :func:`register` wraps its ``format``/``option``/``options``/``schema``
to remember them on the Python reader of a registered session, and its ``load`` to send a
weir read without a path to ``weir.spark.read``.  A reader of a session that was not
registered, or of another format, does exactly what it did.  The wrappers are installed once
per process (idempotent) and keep the original as ``__wrapped__``
(:func:`weir.spark.registration.load_source` calls it to reach the data source itself).
A Spark Connect session is not wrapped (its reader keeps ``_format``/``_options`` and could
be, but no Connect client is installed here to test it): there ``register`` registers the
data source at once, and ``format("weir")`` reads the log.

The data source is registered with Spark's ``DataSourceManager`` lazily, by
:func:`ensure_source`, the first time a session needs it: a read that goes through it, or
``format("weir")`` on a stream reader or a writer, ``using("weir")``, or ``weir`` in the
text of ``spark.sql``.  Registering a Python data source makes the JVM look up the installed
ones first (``pyspark.sql.worker.lookup_data_sources``: a Python daemon and worker, about a
CPU-second once per JVM), which a read from the table or on the driver never needs.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

from weir.spark.registration import SHORT_NAME, ensure_source, member

# Sessions given to register().
_REGISTERED: weakref.WeakSet[Any] = weakref.WeakSet()
_STATE = "_weir_read"  # attribute of a classic reader of a registered session


def register(spark: Any) -> None:
    """Make ``spark.read.format("weir")`` in ``spark`` read as ``weir.spark.read`` does;
    the Python data source is registered with Spark when first needed (idempotent)."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        # Spark Connect: its reader is not wrapped (not tested here: this project installs
        # no Connect client); format("weir") is the Python data source, read over the log.
        ensure_source(spark)
        return
    _install(spark)
    _REGISTERED.add(spark)


def is_registered(spark: Any) -> bool:
    return member(_REGISTERED, spark)


def _is_weir(source: Any) -> bool:
    return isinstance(source, str) and source.lower() == SHORT_NAME  # as Spark normalises


# -- the wrappers ----------------------------------------------------------------------------

def _install(spark: Any) -> None:
    from pyspark.sql import readwriter as rw
    from pyspark.sql.session import SparkSession
    from pyspark.sql.streaming import readwriter as stream

    _wrap_classic_reader(rw.DataFrameReader)
    _wrap_session_sql(SparkSession)
    for cls in (stream.DataStreamReader, rw.DataFrameWriter, stream.DataStreamWriter):
        _wrap_format(cls, "format", "_spark")
    _wrap_format(rw.DataFrameWriterV2, "using", "_spark")


def _installed(cls: type, name: str) -> bool:
    return getattr(cls.__dict__.get(name), "_weir", False)


def _mark(wrapper: Any) -> Any:
    wrapper._weir = True
    return wrapper


def _wrap_format(cls: type, name: str, session_attr: str) -> None:
    """``format("weir")`` (``using("weir")``) of a registered session registers the source."""
    if _installed(cls, name):
        return
    original = getattr(cls, name)

    @functools.wraps(original)
    def wrapper(self: Any, source: str, *args: Any, **kwargs: Any) -> Any:
        if _is_weir(source):
            spark = getattr(self, session_attr, None)
            if spark is not None and is_registered(spark):
                ensure_source(spark)
        return original(self, source, *args, **kwargs)

    setattr(cls, name, _mark(wrapper))


def _wrap_session_sql(cls: type) -> None:
    """``spark.sql`` naming weir (``CREATE TABLE ... USING weir``) registers the source."""
    if _installed(cls, "sql"):
        return
    original = cls.sql

    @functools.wraps(original)
    def sql(self: Any, sqlQuery: Any, *args: Any, **kwargs: Any) -> Any:
        if (isinstance(sqlQuery, str) and SHORT_NAME in sqlQuery.lower()
                and is_registered(self)):
            ensure_source(self)
        return original(self, sqlQuery, *args, **kwargs)

    cls.sql = _mark(sql)  # type: ignore[method-assign]


class _ReadState:
    """What a classic reader of a registered session was told (the JVM reader keeps it too,
    but out of Python's reach)."""

    __slots__ = ("format", "options", "schema")

    def __init__(self) -> None:
        self.format: str | None = None
        self.options: dict[str, str] = {}
        self.schema: Any = None


def _state(reader: Any) -> _ReadState | None:
    state = reader.__dict__.get(_STATE)
    if state is None and is_registered(reader._spark):
        state = _ReadState()
        reader.__dict__[_STATE] = state
    return state


def _wrap_classic_reader(cls: type) -> None:
    if _installed(cls, "load"):
        return
    from pyspark.sql.utils import to_str

    original_format, original_option = cls.format, cls.option
    original_options, original_schema, original_load = cls.options, cls.schema, cls.load

    @functools.wraps(original_format)
    def format(self: Any, source: str) -> Any:
        result = original_format(self, source)
        state = _state(self)
        if state is not None:
            state.format = source
        return result

    @functools.wraps(original_option)
    def option(self: Any, key: str, value: Any) -> Any:
        result = original_option(self, key, value)
        state = _state(self)
        if state is not None and value is not None:
            state.options[key] = to_str(value)
        return result

    @functools.wraps(original_options)
    def options(self: Any, **opts: Any) -> Any:
        result = original_options(self, **opts)
        state = _state(self)
        if state is not None:
            state.options.update({k: to_str(v) for k, v in opts.items() if v is not None})
        return result

    @functools.wraps(original_schema)
    def schema(self: Any, value: Any) -> Any:
        result = original_schema(self, value)
        state = _state(self)
        if state is not None:
            state.schema = value
        return result

    @functools.wraps(original_load)
    def load(self: Any, path: Any = None, format: Any = None,
             schema: Any = None, **opts: Any) -> Any:
        if not is_registered(self._spark):
            return original_load(self, path, format, schema, **opts)
        if format is not None:
            self.format(format)
        if schema is not None:
            self.schema(schema)
        self.options(**opts)
        state = _state(self)
        if path is None and state is not None and _is_weir(state.format):
            return _read(self._spark, state.options, state.schema)
        return original_load(self, path)

    for name, wrapper in (("format", format), ("option", option), ("options", options),
                          ("schema", schema), ("load", load)):
        setattr(cls, name, _mark(wrapper))


def _read(spark: Any, options: dict[str, str], schema: Any) -> Any:
    from weir.spark.history import read
    from weir.spark.options import parse_read_options
    from weir.spark.schema import check_user_schema

    if schema is not None:
        check_user_schema(schema, parse_read_options(options, streaming=False).include_headers)
    return read(spark, options)
