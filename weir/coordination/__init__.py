"""Coordination through ZooKeeper, in Kafka's layout.

- :mod:`~weir.coordination.paths`: Kafka's znode paths.
- :mod:`~weir.coordination.codecs`: pure JSON codecs and the value types
  (:class:`BrokerInfo`, :class:`TopicAssignment`, :class:`LeaderIsr`).
- :mod:`~weir.coordination.errors`: the layer's errors, each with its Kafka error code.
- :mod:`~weir.coordination.zk`: :class:`ZkClient`, the kazoo adapter (Kafka's
  ``KafkaZkClient``: znode reads and writes, the session, watches; sync, thread-safe).
- :mod:`~weir.coordination.controller_writes` / :mod:`~weir.coordination.fenced`: controller
  writes fenced by ``/controller_epoch``.
- :mod:`~weir.coordination.multi_read`: ZooKeeper ``multiRead`` on kazoo.
- :mod:`~weir.coordination.zkserver`: a managed local ZooKeeper for tests and the CLI.

This package's ``__init__`` imports no I/O (no kazoo, no subprocess): importing the codecs or
paths does not load the ZooKeeper client (an import-linter contract in ``.importlinter``
checks it).  Import :class:`ZkClient` from :mod:`weir.coordination.zk`.  The topic-administration
rules over these znodes (Kafka's ``AdminZkClient``) are the broker's: :mod:`weir.server.topic_admin`
(they need the controller's replica placement and the coordinators' internal topics, which sit
above this package).
"""

from weir.coordination.codecs import (
    BrokerInfo,
    LeaderIsr,
    ProducerIdBlock,
    TopicAssignment,
    topic_id_from_str,
    topic_id_to_str,
)
from weir.coordination.errors import (
    BrokerIdInUseError,
    ControllerMovedError,
    ZkNodeExistsError,
    ZkNoNodeError,
    ZkVersionMismatchError,
)

__all__ = [
    "BrokerIdInUseError",
    "BrokerInfo",
    "ControllerMovedError",
    "LeaderIsr",
    "ProducerIdBlock",
    "TopicAssignment",
    "ZkNoNodeError",
    "ZkNodeExistsError",
    "ZkVersionMismatchError",
    "topic_id_from_str",
    "topic_id_to_str",
]
