"""Errors of the ZooKeeper layer, each a KafkaError with the code a client would see."""

from weir.protocol.errors import ErrorCode, KafkaError


class ControllerMovedError(KafkaError):
    """A fenced write found ``/controller_epoch`` at another version: we are not controller."""

    def __init__(self, message: str = "controller epoch changed: this broker is not controller"):
        super().__init__(ErrorCode.not_controller, message)


class ZkVersionMismatchError(KafkaError):
    """A conditional write found the znode at another version (ZooKeeper BadVersion)."""

    def __init__(self, path: str, expected: int) -> None:
        super().__init__(
            ErrorCode.invalid_update_version, f"{path} is not at expected version {expected}"
        )
        self.path = path
        self.expected = expected


class ZkNodeExistsError(KafkaError):
    """A create found the znode already there."""

    def __init__(self, path: str) -> None:
        super().__init__(ErrorCode.unknown_server_error, f"{path} already exists")
        self.path = path


class ZkNoNodeError(KafkaError):
    """An update or delete found no znode (e.g. its topic was deleted)."""

    def __init__(self, path: str) -> None:
        super().__init__(ErrorCode.unknown_topic_or_partition, f"{path} does not exist")
        self.path = path


class BrokerIdInUseError(KafkaError):
    """``/brokers/ids/<id>`` is held by another live ZooKeeper session."""

    def __init__(self, broker_id: int, owner: int) -> None:
        super().__init__(
            ErrorCode.unknown_server_error,
            f"broker id {broker_id} is already registered by another live broker "
            f"(ZooKeeper session 0x{owner:x}); is broker.id unique?",
        )
        self.broker_id = broker_id


class ZnodeDataError(KafkaError, ValueError):
    """A znode holds data Weir cannot decode: not UTF-8, not JSON, a missing field or a
    field of the wrong type.  ``path`` names the znode.

    Readers in :class:`~weir.coordination.zk.ZkClient` log it and treat the node as absent
    where Kafka's ZooKeeper client does (or where a default is safe); where no safe default
    exists (``/cluster/id``, ``/latest_producer_id_block``) it reaches the caller.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(
            ErrorCode.unknown_server_error, f"invalid data in ZooKeeper node {path}: {reason}"
        )
        self.path = path
        self.reason = reason
