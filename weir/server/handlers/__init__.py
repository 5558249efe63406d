"""One module per Kafka API, and the registry that dispatch and ApiVersions are built from.

Each handler module declares ``API_KEY``, ``MIN_VERSION``, ``MAX_VERSION`` and
``async def handle(ctx, request) -> response | None`` (``None``: send no response, as for a
produce with ``acks=0``).  Adding an API is adding a module to ``_MODULES``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from types import ModuleType

from kio.index import KioIndexError, load_request_schema, load_response_schema

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

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

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
        handler = ApiHandler(mod.API_KEY, name, mod.MIN_VERSION, mod.MAX_VERSION, mod)
        assert handler.api_key not in registry, f"two handlers for API {handler.api_key}"
        registry[handler.api_key] = handler
    return registry


REGISTRY: dict[int, ApiHandler] = _load()
