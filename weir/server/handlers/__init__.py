"""One module per Kafka API, and the registry that dispatch and ApiVersions are built from.

The handler contract (Redpanda's two stages of ``handler_interface.h``: dispatched, then
the response).  Each handler module declares ``API_KEY``, ``MIN_VERSION``, ``MAX_VERSION``
and one function::

    def handle(ctx: RequestContext, request: <the API's request>) -> Answer

Calling it is the first stage: what must happen in request order happens in the call (a
Produce's append).  It returns the response now (a kio response, a ``RawResponse``, or
``None`` for no response at all, as for ``acks=0``), or an awaitable of it, the second
stage, which the socket server completes as a task; an ``async def handle`` is the case of
a handler that does all of its work in the second stage.  Optional module attributes:

- ``PIPELINED = True``: requests of this API that follow one another on a connection are
  handled without waiting for the responses before them (their first stages still run in
  request order); any other request waits until everything before it has completed.
- ``decode_request(frame, header_size, version)``: a hand decoder for the API's hot path,
  returning the request or None to leave the frame to kio's decoder.

Adding an API is adding a module to ``_MODULES``.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeAlias

from kio.index import KioIndexError, load_request_schema, load_response_schema

if TYPE_CHECKING:
    from weir.server.context import RequestContext

Response: TypeAlias = Any
"""A kio response entity, a ``weir.server.context.RawResponse``, or None (no response)."""
Answer: TypeAlias = "Response | Awaitable[Response]"
"""What ``handle`` returns: the response now, or an awaitable of it."""
Handler: TypeAlias = "Callable[[RequestContext, Any], Answer]"
Decoder: TypeAlias = Callable[[Any, int, int], Any]

_MODULES = (
    "produce",
    "fetch",
    "list_offsets",
    "metadata",
    "leader_and_isr",
    "stop_replica",
    "update_metadata",
    "controlled_shutdown",
    "api_versions",
    "create_topics",
    "delete_topics",
    "init_producer_id",
    "offset_for_leader_epoch",
    "describe_configs",
    "create_partitions",
    "alter_partition",
    "delete_records",
    "elect_leaders",
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "offset_commit",
    "offset_fetch",
    "list_groups",
    "describe_groups",
    "delete_groups",
    "offset_delete",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "alter_configs",
    "incremental_alter_configs",
    "describe_cluster",
    "describe_log_dirs",
    "alter_replica_log_dirs",
    "sasl_handshake",
    "sasl_authenticate",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
    "describe_acls",
    "create_acls",
    "delete_acls",
    # transactions, coordinator side (KIP-98, KIP-664)
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "txn_offset_commit",
    "describe_transactions",
    "list_transactions",
    # transactions, partition side (KIP-98, KIP-664)
    "write_txn_markers",
    "describe_producers",
)


@dataclass(frozen=True, slots=True)
class ApiHandler:
    api_key: int
    name: str
    min_version: int
    max_version: int
    module: ModuleType
    handle: Handler
    pipelined: bool = False
    decode_request: Decoder | None = None

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    async def answer(self, ctx: RequestContext, request: Any) -> Response:
        """Both stages: the response, once the handler has given it."""
        answer = self.handle(ctx, request)
        return await answer if inspect.isawaitable(answer) else answer

    def schemas(self, version: int) -> tuple[type, type]:
        return _schemas(self.api_key, version)


@cache
def _schemas(api_key: int, version: int) -> tuple[type, type]:
    try:
        return load_request_schema(api_key, version), load_response_schema(api_key, version)
    except KioIndexError:
        from weir.protocol.interbroker import INTERBROKER_SCHEMAS
        from weir.protocol.legacy import LEGACY_SCHEMAS

        legacy = LEGACY_SCHEMAS.get(api_key, {}).get(version)
        return legacy if legacy is not None else INTERBROKER_SCHEMAS[api_key][version]


def _load() -> dict[int, ApiHandler]:
    registry: dict[int, ApiHandler] = {}
    for name in _MODULES:
        try:
            mod = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{name}":
                continue  # not written yet
            raise
        handler = ApiHandler(mod.API_KEY, name, mod.MIN_VERSION, mod.MAX_VERSION, mod,
                             mod.handle, getattr(mod, "PIPELINED", False),
                             getattr(mod, "decode_request", None))
        assert handler.api_key not in registry, f"two handlers for API {handler.api_key}"
        registry[handler.api_key] = handler
    return registry


REGISTRY: dict[int, ApiHandler] = _load()
