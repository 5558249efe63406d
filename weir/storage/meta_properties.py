"""``meta.properties``: which broker and which cluster a log dir belongs to.

Kafka in ZooKeeper mode keeps, in every log dir, a properties file (its
``BrokerMetadataCheckpoint``, ``ZkMetaProperties``)::

    #
    #<date>
    version=0
    broker.id=1
    cluster.id=Xm2c0AVnQZe8hPyAIjRsAw

and at start (``KafkaServer.startup``, ``getOrGenerateBrokerId``) refuses to run on dirs
that belong to someone else:

* the dirs name different broker ids or cluster ids: they were shared by two brokers, or
  data was copied from another broker (``InconsistentBrokerMetadataException``);
* the stored cluster id is not the cluster id in ZooKeeper (``/cluster/id``): the broker is
  pointed at the wrong ZooKeeper (``InconsistentClusterIdException``);
* the stored broker id is not the configured ``broker.id`` (``InconsistentBrokerIdException``).

Either would otherwise have a broker serve another broker's replicas under its own id, or
join a cluster whose metadata does not describe its logs. Once the logs are loaded the file
is written to every online dir that lacks it (atomically: temp file, fsync, rename).

Weir does not generate broker ids (``broker.id`` is required), so a stored id is only
compared, never adopted.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from weir.config.properties import parse_properties
from weir.storage.checkpoints import atomic_write

META_PROPERTIES = "meta.properties"


class InconsistentMetadataError(Exception):
    """A log dir's ``meta.properties`` does not fit this broker (the message says how)."""


@dataclass(frozen=True, slots=True)
class MetaProperties:
    broker_id: int
    cluster_id: str | None  # files of Kafka 0.10.0 and before have none


def read(log_dir: Path) -> MetaProperties | None:
    """The dir's ``meta.properties``; None when there is none.  A file that is not a
    version 0 (ZooKeeper mode) file with a broker id raises InconsistentMetadataError; an
    unreadable one raises OSError (the dir is failing)."""
    path = log_dir / META_PROPERTIES
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        props = parse_properties(text)
    except Exception as exc:  # noqa: BLE001 - any parse failure: a file we cannot trust
        raise InconsistentMetadataError(f"{path} is not a properties file: {exc}") from None
    version = props.get("version")
    if version != "0":
        raise InconsistentMetadataError(
            f"{path} has version {version!r}; a broker in ZooKeeper mode reads version 0 "
            "(version 1 is written by KRaft nodes)")
    try:
        broker_id = int(props["broker.id"])
    except (KeyError, ValueError):
        raise InconsistentMetadataError(
            f"{path} has no valid broker.id ({props.get('broker.id')!r})") from None
    return MetaProperties(broker_id, props.get("cluster.id") or None)


def check(found: dict[Path, MetaProperties], broker_id: int, cluster_id: str) -> None:
    """Kafka's checks of the dirs' files (``found``: those that have one) against each
    other, the configured ``broker.id`` and ZooKeeper's cluster id."""
    if len({m.broker_id for m in found.values()}) > 1 or \
            len({m.cluster_id for m in found.values() if m.cluster_id}) > 1:
        listing = ", ".join(f"{d}: broker.id={m.broker_id} cluster.id={m.cluster_id}"
                            for d, m in sorted(found.items()))
        raise InconsistentMetadataError(
            "meta.properties is not consistent across log.dirs. This could happen if "
            "multiple brokers shared a log directory (log.dirs) or partial data was manually "
            f"copied from another broker. Found: {listing}")
    for log_dir, meta in sorted(found.items()):
        if meta.cluster_id and meta.cluster_id != cluster_id:
            raise InconsistentMetadataError(
                f"The Cluster ID {cluster_id} doesn't match stored clusterId "
                f"{meta.cluster_id} in {log_dir / META_PROPERTIES}. The broker is trying to "
                "join the wrong cluster. Configured zookeeper.connect may be wrong.")
        if meta.broker_id != broker_id:
            raise InconsistentMetadataError(
                f"Configured broker.id {broker_id} doesn't match stored broker.id "
                f"{meta.broker_id} in {log_dir / META_PROPERTIES}. If you moved your data, "
                "make sure your configured broker.id matches. If you intend to create a new "
                "broker, you should remove all data in your data directories (log.dirs).")


def read_all(log_dirs: Iterable[Path]) -> dict[Path, MetaProperties]:
    """The files of ``log_dirs`` that have one.  A dir whose file cannot be read (an I/O
    error) is left out: the log manager finds the failing dir and takes it offline."""
    found: dict[Path, MetaProperties] = {}
    for log_dir in log_dirs:
        try:
            meta = read(Path(log_dir))
        except OSError:
            continue
        if meta is not None:
            found[Path(log_dir)] = meta
    return found


def text(broker_id: int, cluster_id: str, now: datetime.datetime | None = None) -> str:
    stamp = (now or datetime.datetime.now(datetime.UTC)).strftime("%a %b %d %H:%M:%S UTC %Y")
    return f"#\n#{stamp}\nversion=0\nbroker.id={broker_id}\ncluster.id={cluster_id}\n"


def write_missing(log_dirs: Iterable[Path], broker_id: int, cluster_id: str) -> list[Path]:
    """Write the file into each of ``log_dirs`` (the online ones) that has none, or one
    without a cluster id (a pre-0.10.1 file, as Kafka rewrites it); the dirs written."""
    written = []
    for log_dir in log_dirs:
        path = Path(log_dir)
        try:
            meta = read(path)
        except (OSError, InconsistentMetadataError):
            continue  # checked at start; a dir failing since is the log manager's
        if meta is None or meta.cluster_id is None:
            atomic_write(path / META_PROPERTIES, text(broker_id, cluster_id))
            written.append(path)
    return written
