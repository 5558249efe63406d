"""What a handler sees of one request: the broker, the parsed header, the response class."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from weir.protocol import codec
from weir.protocol.errors import ErrorCode
from weir.protocol.fetch_response import FileRegion

if TYPE_CHECKING:
    from weir.server.broker import Broker


@dataclass(frozen=True, slots=True)
class RawResponse:
    """A response body already encoded by the handler (hot paths skip kio's encoder).

    ``body`` is bytes, or chunks of bytes and file regions (sent with sendfile)."""

    body: bytes | list[bytes | FileRegion]


@dataclass(slots=True)
class RequestContext:
    broker: Broker
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
                and self.broker.metadata.partition(tp) is not None):
            return ErrorCode.not_leader_or_follower
        return code

    def nested(self, name: str) -> type:
        """The response's nested entity class called ``name`` (e.g. ``"MetadataResponseTopic"``)."""
        module = __import__(self.response_cls.__module__, fromlist=[name])
        return getattr(module, name)
