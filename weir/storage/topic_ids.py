"""A log's topic id (KIP-516), kept in ``partition.metadata`` and checked against the
controller's.

A topic id tells two incarnations of a topic name apart.  Kafka writes it into each
partition directory when the log is created, reads it back when the log is loaded
(``UnifiedLog.initializeTopicId``), and from then on refuses a LeaderAndIsr or a Fetch
whose topic id differs from the log's with ``INCONSISTENT_TOPIC_ID``
(``ReplicaManager.becomeLeaderOrFollower``, ``ReplicaManager.readFromLog``,
``LogManager.getOrCreateLog``).  Without the check a broker holding the log of a deleted
topic would serve it as the partition of a new topic of the same name.  A log that has
no topic id yet (its file was never written, or a ZooKeeper cluster is moving to topic
ids) takes the first one a LeaderAndIsr names (``UnifiedLog.assignTopicId``) and writes it
on the storage thread, as Kafka's ``flush-metadata-file`` task does.

One difference from Kafka, in line with Weir's other small files (see
:mod:`weir.storage.checkpoints`): a malformed ``partition.metadata`` does not take the
log dir offline.  It is reported, naming the file, and the log is treated as having no
topic id, so the controller's next LeaderAndIsr writes the file again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weir.protocol.errors import ErrorCode, KafkaError
from weir.storage.checkpoints import read_partition_metadata
from weir.storage.deferred_writes import PartitionMetadataWrite

if TYPE_CHECKING:
    from weir.storage.log import Log

__all__ = ["assign_topic_id", "consistent", "load_topic_id"]

log = logging.getLogger(__name__)


def load_topic_id(partition_dir: Path) -> str | None:
    """The topic id in ``partition_dir``'s ``partition.metadata``; None when there is
    none, or when the file is malformed (reported, for the next LeaderAndIsr to rewrite)."""
    try:
        return read_partition_metadata(partition_dir)
    except KafkaError as exc:
        log.warning("%s; the log has no topic id until the controller's next LeaderAndIsr "
                    "writes the file again", exc.message)
        return None


def consistent(requested: str | None, held: str | None) -> bool:
    """Kafka's ``hasConsistentTopicId``: only two known ids that differ are inconsistent."""
    return requested is None or held is None or requested == held


def assign_topic_id(lg: Log, topic_id: str, submit: Callable[[list[Any]], None]) -> None:
    """Give ``lg`` the controller's ``topic_id`` if it has none, queueing its
    ``partition.metadata`` with ``submit`` (the storage thread); KafkaError
    (INCONSISTENT_TOPIC_ID) if it holds another."""
    if lg.topic_id is None:
        lg.topic_id = topic_id
        submit([PartitionMetadataWrite(lg.dir, topic_id)])
    elif lg.topic_id != topic_id:
        raise KafkaError(
            ErrorCode.inconsistent_topic_id,
            f"{lg.topic_partition}: the log holds topic id {lg.topic_id}, not {topic_id} "
            f"({lg.dir / 'partition.metadata'})")
