"""Registering the ``weir`` Python data source with a Spark session, once, when needed.

Registering a Python data source (``spark.dataSource.register``) makes Spark's
``DataSourceManager`` look up the installed ones first (``pyspark.sql.worker
.lookup_data_sources``: a Python daemon and worker, about a CPU-second once per JVM).  A read
from a topic's table or on the driver never needs the source, so it is registered only by
what reads or writes through it (:func:`ensure_source`, :func:`load_source`).
"""

from __future__ import annotations

import weakref
from typing import Any

SHORT_NAME = "weir"

# Sessions whose JVM already knows the Python data source.
_SOURCE_KNOWN: weakref.WeakSet[Any] = weakref.WeakSet()


def ensure_source(spark: Any) -> None:
    """Register the ``weir`` Python data source with the session's Spark, once."""
    if member(_SOURCE_KNOWN, spark):
        return
    from weir.spark.source import WeirDataSource

    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:  # Spark Connect: the server's session is the one registered
        spark.dataSource.register(WeirDataSource)
    else:
        # Spark refuses to register a name that the JVM's *active* session already finds
        # (DATA_SOURCE_ALREADY_EXISTS): a second session (newSession) could not register
        # the source while the first, which knows it, is active.  Registered with this
        # session active, and the active one restored.
        jvm_session = spark._jvm.org.apache.spark.sql.SparkSession
        previous = jvm_session.getActiveSession()
        jvm_session.setActiveSession(jsession)
        try:
            spark.dataSource.register(WeirDataSource)
        finally:
            if previous.isDefined():
                jvm_session.setActiveSession(previous.get())
            else:
                jvm_session.clearActiveSession()
    try:
        _SOURCE_KNOWN.add(spark)
    except TypeError:  # not weakly referenceable: registered again next time, harmless
        pass


def load_source(spark: Any, options: dict[str, str]) -> Any:
    """``spark.read.format("weir").options(**options).load()`` through the Python data
    source itself (registered if need be), past the wrapper of :mod:`weir.spark.session`."""
    ensure_source(spark)
    reader = spark.read.format(SHORT_NAME).options(**options)
    load = type(reader).load
    return getattr(load, "__wrapped__", load)(reader)



def source_known(spark: Any) -> bool:
    """Whether :func:`ensure_source` registered the source with this session."""
    return member(_SOURCE_KNOWN, spark)


def member(sessions: weakref.WeakSet[Any], spark: Any) -> bool:
    try:
        return spark in sessions
    except TypeError:
        return False
