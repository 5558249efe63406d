"""ACLs in ZooKeeper, in Kafka's layout (kafka.zk.ZkData: ZkAclStore, ZkAclChangeStore).

- literal patterns: ``/kafka-acl/<ResourceType>/<name>``; other patterns:
  ``/kafka-acl-extended/<patterntype>/<ResourceType>/<name>`` (``prefixed``);
- each znode holds ``{"version":1,"acls":[...]}`` (Kafka's AclEntry JSON); a resource with
  no ACL left has no znode;
- every change is announced by a sequential node ``acl_changes_<n>`` under
  ``/kafka-acl-changes`` (data ``TOPIC:name``) or ``/kafka-acl-extended-changes`` (a JSON
  event); every broker watches both and re-reads the named resource. Notifications older
  than 15 minutes are purged (Kafka's ZkNodeChangeNotificationListener).

Synchronous (kazoo): call from asyncio through ``asyncio.to_thread``.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from weir.coordination.zk import ZkClient
from weir.security.acls import (
    AccessControlEntry,
    AclError,
    PatternType,
    ResourcePattern,
    ResourceType,
    decode_change,
    decode_entries,
    encode_change,
    encode_entries,
    parse_enum,
    pascal_name,
)

log = logging.getLogger(__name__)

LITERAL_ROOT = "/kafka-acl"
EXTENDED_ROOT = "/kafka-acl-extended"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
MAX_UPDATE_RETRIES = 10

_STORED_TYPES = [t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY)]
_STORED_PATTERNS = (PatternType.LITERAL, PatternType.PREFIXED)


def pattern_root(pattern_type: PatternType) -> str:
    if pattern_type == PatternType.LITERAL:
        return LITERAL_ROOT
    return f"{EXTENDED_ROOT}/{pattern_type.name.lower()}"


def resource_path(pattern: ResourcePattern) -> str:
    return (f"{pattern_root(pattern.pattern_type)}/{pascal_name(pattern.resource_type)}/"
            f"{pattern.name}")


def change_root(pattern_type: PatternType) -> str:
    return LITERAL_CHANGES if pattern_type == PatternType.LITERAL else EXTENDED_CHANGES


@dataclass(frozen=True, slots=True)
class VersionedAcls:
    entries: frozenset[AccessControlEntry]
    zk_version: int  # -1: no znode

    @property
    def exists(self) -> bool:
        return self.zk_version >= 0


class ZkAclStore:
    def __init__(self, zk: ZkClient) -> None:
        self._zk = zk
        self._kazoo = zk.kazoo

    def ensure_paths(self) -> None:
        """Kafka's ``createAclPaths``: each store's root, its per-type folders, the change
        folders."""
        for pattern_type in _STORED_PATTERNS:
            for rtype in _STORED_TYPES:
                self._kazoo.ensure_path(f"{pattern_root(pattern_type)}/{pascal_name(rtype)}")
        for root in (LITERAL_CHANGES, EXTENDED_CHANGES):
            self._kazoo.ensure_path(root)

    # -- reads -------------------------------------------------------------------------------

    def read(self, pattern: ResourcePattern) -> VersionedAcls:
        """A resource's ACLs; a corrupt znode reads as none (logged), as Kafka's decoder
        failing would leave the resource without ACLs in the cache."""
        path = resource_path(pattern)
        try:
            data, stat = self._kazoo.get(path)
        except NoNodeError:
            return VersionedAcls(frozenset(), -1)
        try:
            return VersionedAcls(decode_entries(data), stat.version)
        except AclError as exc:
            log.error("ACL znode %s is not valid (%s); treating it as having no ACLs", path, exc)
            return VersionedAcls(frozenset(), stat.version)

    def load_all(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Kafka's ``loadAllAcls``: every stored pattern with its ACLs."""
        out: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        for pattern_type in _STORED_PATTERNS:
            root = pattern_root(pattern_type)
            for type_name in self._children(root):
                try:
                    rtype = ResourceType(parse_enum(ResourceType, type_name))
                except AclError:
                    log.warning("ignoring unknown ACL resource type folder %s/%s", root,
                                type_name)
                    continue
                for name in self._children(f"{root}/{type_name}"):
                    pattern = ResourcePattern(rtype, name, pattern_type)
                    acls = self.read(pattern)
                    if acls.entries:
                        out[pattern] = acls.entries
        return out

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self._kazoo.get_children(path))
        except NoNodeError:
            return []

    # -- writes ------------------------------------------------------------------------------

    def update(self, pattern: ResourcePattern,
               change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
               ) -> tuple[frozenset[AccessControlEntry], frozenset[AccessControlEntry]]:
        """Kafka's ``updateResourceAcls``: apply ``change`` to the stored ACLs with a
        conditional write, re-reading and retrying when another writer got there first; a
        real change is announced by a change notification. Returns (before, after)."""
        current = self.read(pattern)
        path = resource_path(pattern)
        for _attempt in range(MAX_UPDATE_RETRIES + 1):
            new = frozenset(change(current.entries))
            try:
                if new == current.entries and current.exists == bool(new):
                    break
                if new and current.exists:
                    self._kazoo.set(path, encode_entries(new), version=current.zk_version)
                elif new:
                    self._kazoo.create(path, encode_entries(new), makepath=True)
                else:
                    self._kazoo.delete(path, version=current.zk_version)
                break
            except (BadVersionError, NodeExistsError, NoNodeError):
                time.sleep((100 + random.randrange(50)) / 1000)
                current = self.read(pattern)
        else:
            raise RuntimeError(f"Failed to update ACLs for {pattern} after "
                               f"{MAX_UPDATE_RETRIES} retries")
        if new != current.entries:
            self._kazoo.create(f"{change_root(pattern.pattern_type)}/{CHANGE_PREFIX}",
                               encode_change(pattern), sequence=True)
        return current.entries, new

    # -- change notifications ----------------------------------------------------------------

    def changed_resources(self, root: str, after: int) -> tuple[list[ResourcePattern], int]:
        """The resources named by notifications under ``root`` with a sequence number above
        ``after``, and the highest sequence number seen; notifications older than 15 minutes
        are deleted on the way (Kafka's purgeObsoleteNotifications)."""
        extended = root == EXTENDED_CHANGES
        out: list[ResourcePattern] = []
        last = after
        now_ms = time.time() * 1000
        for child in self._children(root):
            if not child.startswith(CHANGE_PREFIX):
                continue
            try:
                seq = int(child[len(CHANGE_PREFIX):])
            except ValueError:
                continue
            path = f"{root}/{child}"
            try:
                data, stat = self._kazoo.get(path)
            except NoNodeError:
                continue
            if seq > after:
                last = max(last, seq)
                try:
                    out.append(decode_change(data, extended))
                except AclError as exc:
                    log.error("ignoring ACL change notification %s: %s", path, exc)
            if now_ms - stat.ctime > CHANGE_EXPIRATION_MS:
                try:
                    self._kazoo.delete(path)
                except NoNodeError:
                    pass
        return out, last
