"""Authorization in the broker: the ZooKeeper-backed ACL authorizer (Kafka's AclAuthorizer
with ``authorizer.class.name=kafka.security.authorizer.AclAuthorizer``) and the checks the
handlers call (Kafka's AuthHelper).

With no authorizer configured every check allows, as in Kafka. The decisions are made by
:class:`weir.security.authorizer.Authorizer` over a cache that this module keeps in step
with ZooKeeper: loaded at start, updated at once by this broker's own CreateAcls/DeleteAcls,
and refreshed from the change notifications that other brokers' updates leave under
``/kafka-acl-changes`` and ``/kafka-acl-extended-changes``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from weir.asyncutil import cancel_and_wait
from weir.protocol.errors import ErrorCode
from weir.security.acl_store import EXTENDED_CHANGES, LITERAL_CHANGES, ZkAclStore
from weir.security.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    ResourcePattern,
    ResourceType,
    pascal_name,
    validate_binding,
)
from weir.security.authorizer import Authorizer, Session, parse_super_users

if TYPE_CHECKING:
    from weir.config import BrokerConfig
    from weir.coordination.zk import ZkClient

log = logging.getLogger(__name__)
audit = logging.getLogger("kafka.authorizer.logger")

ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"

AUTHORIZATION_ERRORS = {
    ResourceType.TOPIC: ErrorCode.topic_authorization_failed,
    ResourceType.GROUP: ErrorCode.group_authorization_failed,
    ResourceType.CLUSTER: ErrorCode.cluster_authorization_failed,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.transactional_id_authorization_failed,
    ResourceType.DELEGATION_TOKEN: ErrorCode.delegation_token_authorization_failed,
}

_T = TypeVar("_T")
_RETRY_S = 1.0


class AclAuthorizerService:
    """The asyncio shell around the authorizer core and its ZooKeeper store."""

    def __init__(self, config: BrokerConfig, zk: ZkClient) -> None:
        self.core = Authorizer(parse_super_users(config.get("super.users")),
                               bool(config.get("allow.everyone.if.no.acl.found")))
        self.store = ZkAclStore(zk)
        self._zk = zk
        self._lock = asyncio.Lock()  # Kafka's AclAuthorizer ``lock``: one update at a time
        self._changed = asyncio.Event()
        self._last_seen = {LITERAL_CHANGES: -1, EXTENDED_CHANGES: -1}
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        """Watch the change notifications first, then load every ACL (Kafka's order: no
        change can fall between the load and the first notification read)."""
        loop = asyncio.get_running_loop()
        await asyncio.to_thread(self.store.ensure_paths)
        for root in (LITERAL_CHANGES, EXTENDED_CHANGES):
            # Watch callbacks run on kazoo's thread: they only wake the refresher.
            self._zk.watch_children(root, lambda _c: loop.call_soon_threadsafe(
                self._changed.set))
        async with self._lock:
            for root in self._last_seen:
                _, self._last_seen[root] = await asyncio.to_thread(
                    self.store.changed_resources, root, -1)
            loaded = await asyncio.to_thread(self.store.load_all)
            for pattern, entries in loaded.items():
                self.core.cache.replace(pattern, entries)
        log.info("ACL authorizer started: %d ACLs on %d resources, super users %s",
                 len(self.core.cache), len(loaded), sorted(self.core.super_users) or "none")
        self._task = asyncio.create_task(self._refresh_loop(), name="acl-changes")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)

    async def _refresh_loop(self) -> None:
        while True:
            await self._changed.wait()
            self._changed.clear()
            try:
                await self.process_notifications()
            except Exception:
                # ZooKeeper unreachable for now: try again shortly (a reconnect also fires
                # the watches); until then the cache keeps the last known ACLs.
                log.exception("processing ACL change notifications failed; retrying")
                await asyncio.sleep(_RETRY_S)
                self._changed.set()

    async def process_notifications(self) -> None:
        """Re-read the resources named by notifications not yet processed."""
        async with self._lock:
            for root in self._last_seen:
                changed, last = await asyncio.to_thread(
                    self.store.changed_resources, root, self._last_seen[root])
                for pattern in dict.fromkeys(changed):
                    acls = await asyncio.to_thread(self.store.read, pattern)
                    self.core.cache.replace(pattern, acls.entries)
                    log.info("ACLs of %s changed: %d entries", pattern, len(acls.entries))
                self._last_seen[root] = last

    # -- admin operations (CreateAcls / DeleteAcls / DescribeAcls) ---------------------------

    async def create_acls(self, bindings: list[AclBinding]
                          ) -> list[tuple[ErrorCode, str | None]]:
        """One (error, message) per binding, in order (Kafka's AclAuthorizer.createAcls)."""
        results: list[tuple[ErrorCode, str | None]] = [(ErrorCode.none, None)] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for i, binding in enumerate(bindings):
            try:
                validate_binding(binding)
            except AclError as exc:
                results[i] = (ErrorCode.invalid_request, str(exc))
                continue
            by_pattern.setdefault(binding.pattern, []).append(i)
        async with self._lock:
            for pattern, indexes in by_pattern.items():
                new = frozenset(bindings[i].entry for i in indexes)
                try:
                    _, after = await asyncio.to_thread(
                        self.store.update, pattern, lambda cur, new=new: cur | new)
                except Exception as exc:
                    log.exception("creating ACLs on %s failed", pattern)
                    for i in indexes:
                        results[i] = (ErrorCode.unknown_server_error, str(exc))
                    continue
                self.core.cache.replace(pattern, after)
                log.info("ACLs added to %s: %s", pattern, sorted(new))
        return results

    async def delete_acls(self, filters: list[AclBindingFilter]
                          ) -> list[tuple[ErrorCode, str | None, list[tuple[AclBinding,
                                                                           ErrorCode]]]]:
        """Per filter: (error, message, deleted bindings with their own error). A binding
        matched by several filters is reported under the first (Kafka's deleteAcls)."""
        out: list[tuple[ErrorCode, str | None, list[tuple[AclBinding, ErrorCode]]]] = []
        valid: list[tuple[int, AclBindingFilter]] = []
        for i, flt in enumerate(filters):
            try:
                flt.validate()
            except AclError as exc:
                out.append((ErrorCode.invalid_request, str(exc), []))
                continue
            out.append((ErrorCode.none, None, []))
            valid.append((i, flt))
        async with self._lock:
            candidates = set(self.core.cache.patterns())
            for _, flt in valid:
                candidates.update(flt.exact_patterns())
            for pattern in sorted(candidates):
                matching = [(i, f) for i, f in valid if f.matches_pattern(pattern)]
                if not matching:
                    continue
                removed: dict[AclBinding, int] = {}

                def change(current, pattern=pattern, matching=matching, removed=removed):
                    removed.clear()
                    keep = set()
                    for entry in current:
                        hit = next((i for i, f in matching if f.matches_entry(entry)), None)
                        if hit is None:
                            keep.add(entry)
                        else:
                            removed[AclBinding(pattern, entry)] = hit
                    return frozenset(keep)

                error = ErrorCode.none
                try:
                    _, after = await asyncio.to_thread(self.store.update, pattern, change)
                    self.core.cache.replace(pattern, after)
                except Exception:
                    log.exception("deleting ACLs of %s failed", pattern)
                    error = ErrorCode.unknown_server_error
                for binding, i in removed.items():
                    out[i][2].append((binding, error))
                if removed and error == ErrorCode.none:
                    log.info("ACLs removed from %s: %s", pattern,
                             sorted(b.entry for b in removed))
        return out

    def describe_acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        return self.core.cache.bindings(flt)


def create_authorizer(config: BrokerConfig, zk: ZkClient) -> AclAuthorizerService | None:
    name = config.get("authorizer.class.name") or ""
    if not name:
        return None
    if name != ACL_AUTHORIZER:  # the config validator allows nothing else
        raise ValueError(f"unsupported authorizer.class.name {name!r}")
    return AclAuthorizerService(config, zk)


# -- the checks handlers make (Kafka's AuthHelper) -------------------------------------------

def _service(ctx: Any) -> AclAuthorizerService | None:
    return getattr(ctx, "authorizer", None)


def enabled(ctx: Any) -> bool:
    return _service(ctx) is not None


def authorize(ctx: Any, operation: AclOperation, resource_type: ResourceType, name: str,
              *, log_if_denied: bool = True) -> bool:
    """May this request's principal do ``operation`` on the resource? Always, without an
    authorizer. Denials are logged on ``kafka.authorizer.logger`` (Kafka's audit log)."""
    service = _service(ctx)
    if service is None:
        return True
    session = Session(ctx.principal, ctx.client_host)
    allowed = service.core.authorize(session, operation, resource_type, name)
    if not allowed and log_if_denied:
        audit.info("Principal = %s is Denied Operation = %s from host = %s on resource = "
                   "%s:LITERAL:%s for request = %s", session.principal, pascal_name(operation),
                   session.host, pascal_name(resource_type), name,
                   ctx.request_cls.__name__.removesuffix("Request"))
    return allowed


def authorize_cluster(ctx: Any, operation: AclOperation, *, log_if_denied: bool = True
                      ) -> bool:
    return authorize(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME,
                     log_if_denied=log_if_denied)


def authorize_by_resource_type(ctx: Any, operation: AclOperation,
                               resource_type: ResourceType) -> bool:
    service = _service(ctx)
    if service is None:
        return True
    return service.core.authorize_by_resource_type(
        Session(ctx.principal, ctx.client_host), operation, resource_type)


def filter_authorized(ctx: Any, operation: AclOperation, resource_type: ResourceType,
                      items: Iterable[_T], name_of: Callable[[_T], str] = str,
                      *, log_if_denied: bool = True) -> tuple[list[_T], list[_T]]:
    """Kafka's ``partitionSeqByAuthorized``: (authorized, unauthorized), each name asked
    once."""
    decided: dict[str, bool] = {}
    yes: list[_T] = []
    no: list[_T] = []
    for item in items:
        name = name_of(item)
        if name not in decided:
            decided[name] = authorize(ctx, operation, resource_type, name,
                                      log_if_denied=log_if_denied)
        (yes if decided[name] else no).append(item)
    return yes, no


def authorized_operations(ctx: Any, resource_type: ResourceType, name: str) -> int:
    """KIP-430's bit field of what the principal may do on a resource (all supported
    operations without an authorizer)."""
    service = _service(ctx)
    if service is None:
        from weir.security.acls import SUPPORTED_OPERATIONS

        return sum(1 << int(op) for op in SUPPORTED_OPERATIONS[resource_type])
    return service.core.authorized_operations(Session(ctx.principal, ctx.client_host),
                                              resource_type, name)


# ConfigResource types of DescribeConfigs / AlterConfigs / IncrementalAlterConfigs.
_CONFIG_TOPIC, _CONFIG_BROKER, _CONFIG_BROKER_LOGGER = 2, 4, 8


def config_refusal(ctx: Any, resource_type: int, name: str, operation: AclOperation
                   ) -> tuple[ErrorCode, str] | None:
    """Kafka's checks for the config APIs (``operation`` DESCRIBE_CONFIGS or ALTER_CONFIGS):
    on the topic for a topic, on the cluster for a broker or its loggers; None: allowed."""
    if resource_type == _CONFIG_TOPIC:
        if not authorize(ctx, operation, ResourceType.TOPIC, name):
            return ErrorCode.topic_authorization_failed, "Topic authorization failed."
    elif resource_type in (_CONFIG_BROKER, _CONFIG_BROKER_LOGGER) and not authorize_cluster(
            ctx, operation):
        return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
    return None
