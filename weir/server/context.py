"""What a handler sees of one request: the broker's parts it may use (typed collaborators, as
Kafka's KafkaApis receives them in its constructor), the parsed header, the response class.

Handlers never see the ``Broker`` itself: they read ``ctx.metadata``, ``ctx.replica_manager``,
``ctx.group_coordinator``... each of which is one named part of :class:`BrokerServices`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from weir.protocol import codec
from weir.protocol.errors import ErrorCode
from weir.protocol.fetch_response import FileRegion

if TYPE_CHECKING:
    from weir.config import BrokerConfig
    from weir.coordination.zk import ZkClient
    from weir.groups.coordinator import GroupCoordinator
    from weir.replication.log_dir_mover import LogDirMover
    from weir.replication.replica_manager import ReplicaManager
    from weir.security.credentials import ScramCredentialStore
    from weir.server.authz import AclAuthorizerService
    from weir.server.dynamic_config import DynamicBrokerConfigs
    from weir.server.fetch_session import FetchSessionCache
    from weir.server.metadata_cache import MetadataCache
    from weir.server.producer_ids import ProducerIdManager
    from weir.server.registration import BrokerRegistration
    from weir.server.topic_configs import TopicConfigs
    from weir.server.txn_verification import TxnVerifier
    from weir.storage.log_manager import LogManager
    from weir.transactions.coordinator import TransactionCoordinator


@dataclass(frozen=True, slots=True)
class RawResponse:
    """A response body already encoded by the handler (hot paths skip kio's encoder).

    ``body`` is bytes, or chunks of bytes and file regions (sent with sendfile)."""

    body: bytes | list[bytes | FileRegion]


@dataclass(eq=False)
class BrokerServices:
    """The broker's parts request handlers use, one field each (Kafka's KafkaApis
    constructor arguments).  The broker builds it once; ``controller`` and ``cluster_id``
    are filled in when the broker starts.  ``config`` is the live configuration: dynamic
    broker configs replace it, so it is read through ``config_source`` at every access."""

    broker_id: int
    config_source: Callable[[], BrokerConfig]
    metadata: MetadataCache
    replica_manager: ReplicaManager
    log_manager: LogManager
    log_dir_mover: LogDirMover
    topic_configs: TopicConfigs
    dynamic_configs: DynamicBrokerConfigs
    group_coordinator: GroupCoordinator
    txn_coordinator: TransactionCoordinator
    txn_verifier: TxnVerifier
    producer_ids: ProducerIdManager
    fetch_sessions: FetchSessionCache
    scram_credentials: ScramCredentialStore
    authorizer: AclAuthorizerService | None
    registration: BrokerRegistration
    # ZooKeeper reads and writes of the admin requests (topic administration, configs).
    zk: ZkClient
    controller: Any = None  # weir.controller.service.ControllerService once started
    cluster_id: str = ""

    @property
    def config(self) -> BrokerConfig:
        return self.config_source()


@dataclass(slots=True)
class RequestContext:
    services: BrokerServices
    header: codec.RequestHeader
    request_cls: type
    response_cls: type
    peer: str
    # Who sent the request (Kafka's KafkaPrincipal as "User:<name>") and on which listener.
    # Set by the socket server once the connection has authenticated; an unauthenticated
    # PLAINTEXT connection is User:ANONYMOUS, as in Kafka.
    principal: str = "User:ANONYMOUS"
    listener: str = "PLAINTEXT"
    # The connection's authentication state (weir.security.session.ConnectionSecurity):
    # what SaslHandshake and SaslAuthenticate advance.
    security: Any = None

    # -- the broker's parts (see BrokerServices) -------------------------------------------

    @property
    def broker_id(self) -> int:
        return self.services.broker_id

    @property
    def config(self) -> BrokerConfig:
        return self.services.config

    @property
    def metadata(self) -> MetadataCache:
        return self.services.metadata

    @property
    def replica_manager(self) -> ReplicaManager:
        return self.services.replica_manager

    @property
    def log_manager(self) -> LogManager:
        return self.services.log_manager

    @property
    def log_dir_mover(self) -> LogDirMover:
        return self.services.log_dir_mover

    @property
    def topic_configs(self) -> TopicConfigs:
        return self.services.topic_configs

    @property
    def dynamic_configs(self) -> DynamicBrokerConfigs:
        return self.services.dynamic_configs

    @property
    def group_coordinator(self) -> GroupCoordinator:
        return self.services.group_coordinator

    @property
    def txn_coordinator(self) -> TransactionCoordinator:
        return self.services.txn_coordinator

    @property
    def txn_verifier(self) -> TxnVerifier:
        return self.services.txn_verifier

    @property
    def producer_ids(self) -> ProducerIdManager:
        return self.services.producer_ids

    @property
    def fetch_sessions(self) -> FetchSessionCache:
        return self.services.fetch_sessions

    @property
    def scram_credentials(self) -> ScramCredentialStore:
        return self.services.scram_credentials

    @property
    def authorizer(self) -> AclAuthorizerService | None:
        return self.services.authorizer

    @property
    def registration(self) -> BrokerRegistration:
        return self.services.registration

    @property
    def zk(self) -> ZkClient:
        return self.services.zk

    @property
    def controller(self) -> Any:
        return self.services.controller

    @property
    def cluster_id(self) -> str:
        return self.services.cluster_id

    # -- the request ---------------------------------------------------------------------------

    @property
    def client_host(self) -> str:
        """The client's address without its port (the ``host`` of an ACL)."""
        host = self.peer.rsplit(":", 1)[0] if ":" in self.peer else self.peer
        return host.strip("[]")

    @property
    def version(self) -> int:
        return self.header.api_version

    def respond(self, data: dict[str, Any] | None = None, /, **kwargs: Any) -> Any:
        """Build this request's response at the request's version from plain values."""
        return codec.build(self.response_cls, data, **kwargs)

    def partition_error(self, tp: Any, code: ErrorCode) -> ErrorCode:
        """A partition not hosted here but known to the cluster is NOT_LEADER_OR_FOLLOWER
        (the client's metadata is stale); one unknown everywhere stays UNKNOWN_TOPIC_OR_PARTITION."""
        if (code == ErrorCode.unknown_topic_or_partition
                and self.metadata.partition(tp) is not None):
            return ErrorCode.not_leader_or_follower
        return code

    def nested(self, name: str) -> type:
        """The response's nested entity class called ``name`` (e.g. ``"MetadataResponseTopic"``)."""
        module = __import__(self.response_cls.__module__, fromlist=[name])
        return getattr(module, name)
