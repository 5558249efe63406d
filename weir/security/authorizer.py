"""The decision half of Kafka's ``AclAuthorizer`` (sans-I/O): an ACL cache per resource
pattern and ``authorize(principal, host, operation, resource)``.

Rules, as Kafka's AclAuthorizer.authorizeAction:
- a super user (``super.users``) is allowed everything;
- the ACLs that apply to a resource are those on its literal name, on the literal wildcard
  ``*`` and on every prefixed pattern its name starts with;
- no applicable ACL at all: allowed only if ``allow.everyone.if.no.acl.found``;
- a matching DENY (principal or ``User:*``, host or ``*``, operation or ``All``) refuses;
  otherwise a matching ALLOW is needed; DESCRIBE is implied by READ, WRITE, DELETE and
  ALTER, DESCRIBE_CONFIGS by ALTER_CONFIGS.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from weir.security.acls import (
    IMPLIED_BY,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    parse_principal,
)


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:broker``)."""
    if not value:
        return frozenset()
    return frozenset(parse_principal(p.strip()) for p in value.split(";") if p.strip())


@dataclass(frozen=True, slots=True)
class Session:
    """Who asks: the principal (``User:alice``) and the client's address."""

    principal: str
    host: str


class AclCache:
    """The ACLs known to this broker, by resource pattern."""

    def __init__(self) -> None:
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        # (resource type, prefix) -> entries of the PREFIXED pattern, for the lookups.
        self._prefixed: dict[tuple[ResourceType, str], frozenset[AccessControlEntry]] = {}
        self._longest_prefix: dict[ResourceType, int] = {}

    def __len__(self) -> int:
        return sum(len(v) for v in self._acls.values())

    def get(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        return self._acls.get(pattern, frozenset())

    def patterns(self) -> list[ResourcePattern]:
        return sorted(self._acls)

    def replace(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Set the ACLs of one pattern (none: forget it)."""
        entries = frozenset(entries)
        key = (pattern.resource_type, pattern.name)
        if entries:
            self._acls[pattern] = entries
        else:
            self._acls.pop(pattern, None)
        if pattern.pattern_type == PatternType.PREFIXED:
            if entries:
                self._prefixed[key] = entries
            else:
                self._prefixed.pop(key, None)
            self._longest_prefix[pattern.resource_type] = max(
                (len(n) for (t, n) in self._prefixed if t == pattern.resource_type), default=0)

    def applicable(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """Kafka's ``matchingAcls``: literal name, literal ``*``, and every prefix of name."""
        out: list[AccessControlEntry] = []
        out.extend(self._acls.get(ResourcePattern(resource_type, name, PatternType.LITERAL), ()))
        if name != WILDCARD_RESOURCE:
            out.extend(self._acls.get(
                ResourcePattern(resource_type, WILDCARD_RESOURCE, PatternType.LITERAL), ()))
        longest = min(self._longest_prefix.get(resource_type, 0), len(name))
        for end in range(1, longest + 1):
            out.extend(self._prefixed.get((resource_type, name[:end]), ()))
        return out

    def bindings(self, flt: AclBindingFilter | None = None) -> list[AclBinding]:
        out = []
        for pattern in sorted(self._acls):
            for entry in sorted(self._acls[pattern]):
                binding = AclBinding(pattern, entry)
                if flt is None or flt.matches(binding):
                    out.append(binding)
        return out


def _matches(entry: AccessControlEntry, session: Session, operation: AclOperation,
             permission: PermissionType) -> bool:
    return (entry.permission == permission
            and entry.principal in (session.principal, WILDCARD_PRINCIPAL)
            and entry.operation in (operation, AclOperation.ALL)
            and entry.host in (session.host, WILDCARD_HOST))


class Authorizer:
    """Kafka's AclAuthorizer decisions over an :class:`AclCache`."""

    def __init__(self, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.cache = AclCache()

    def is_super_user(self, principal: str) -> bool:
        return principal in self.super_users

    def authorize(self, session: Session, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        if self.is_super_user(session.principal):
            return True
        acls = self.cache.applicable(resource_type, name)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        if any(_matches(a, session, operation, PermissionType.DENY) for a in acls):
            return False
        allowing = IMPLIED_BY.get(operation, frozenset({operation}))
        return any(_matches(a, session, op, PermissionType.ALLOW)
                   for a in acls for op in allowing)

    def authorized_operations(self, session: Session, resource_type: ResourceType,
                              name: str) -> int:
        """KIP-430's bit field: bit ``op`` set for each supported operation allowed."""
        bits = 0
        for op in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(session, op, resource_type, name):
                bits |= 1 << int(op)
        return bits

    def authorize_by_resource_type(self, session: Session, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Kafka's ``authorizeByResourceType`` (KIP-679): may ``session`` do ``operation``
        on at least one resource of this type? A literal DENY on ``*`` refuses; otherwise an
        ALLOW on some literal or prefixed resource that no DENY dominates (a DENY on the
        same literal name, or on a prefix of the allowed name) allows."""
        if self.is_super_user(session.principal):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[ResourcePattern] = []
        for pattern in self.cache.patterns():
            if pattern.resource_type != resource_type:
                continue
            for entry in self.cache.get(pattern):
                if _matches(entry, session, operation, PermissionType.DENY):
                    (deny_literal if pattern.pattern_type == PatternType.LITERAL
                     else deny_prefixed).add(pattern.name)
                elif _matches(entry, session, operation, PermissionType.ALLOW):
                    allow.append(pattern)
        if WILDCARD_RESOURCE in deny_literal:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True

        def dominated(name: str) -> bool:
            return any(name[:end] in deny_prefixed for end in range(1, len(name) + 1))

        for pattern in allow:
            if pattern.pattern_type == PatternType.PREFIXED:
                if not dominated(pattern.name):
                    return True
            elif pattern.name == WILDCARD_RESOURCE or (
                    pattern.name not in deny_literal and not dominated(pattern.name)):
                return True
        return False
