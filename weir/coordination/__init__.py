"""Coordination through ZooKeeper, in Kafka's layout.

- :mod:`~weir.coordination.paths`: Kafka's znode paths.
- :mod:`~weir.coordination.codecs`: pure JSON codecs and the value types
  (:class:`BrokerInfo`, :class:`TopicAssignment`, :class:`LeaderIsr`).
- :mod:`~weir.coordination.zk`: :class:`ZkClient`, the kazoo adapter (sync, thread-safe).
- :mod:`~weir.coordination.fenced`: controller writes fenced by ``/controller_epoch``.
- :mod:`~weir.coordination.zkserver`: a managed local ZooKeeper for tests and the CLI.
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
from weir.coordination.zk import Watch, ZkClient
from weir.coordination.zkserver import ZooKeeperServer, find_zookeeper_classpath

__all__ = [
    "BrokerIdInUseError",
    "BrokerInfo",
    "ControllerMovedError",
    "LeaderIsr",
    "ProducerIdBlock",
    "TopicAssignment",
    "Watch",
    "ZkClient",
    "ZkNoNodeError",
    "ZkNodeExistsError",
    "ZkVersionMismatchError",
    "ZooKeeperServer",
    "find_zookeeper_classpath",
    "topic_id_from_str",
    "topic_id_to_str",
]
