"""Kafka's ACL model: resource patterns, access control entries, bindings, filters, and the
JSON that Kafka's ``AclAuthorizer`` keeps in ZooKeeper (sans-I/O).

Codes and names are Kafka's (``org.apache.kafka.common.acl`` / ``common.resource``): the
wire uses the int8 codes, ZooKeeper the Pascal-case names (``"ClusterAction"``,
``"TransactionalId"``) as ``SecurityUtils.operationName`` / ``resourceTypeName`` write them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import IntEnum

CLUSTER_NAME = "kafka-cluster"
WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
ACL_JSON_VERSION = 1


class AclError(ValueError):
    """An ACL, filter or stored ACL document that Kafka would refuse; the message says why."""


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_CONCRETE_RESOURCES = frozenset(ResourceType) - {ResourceType.UNKNOWN, ResourceType.ANY}
_CONCRETE_OPERATIONS = frozenset(AclOperation) - {AclOperation.UNKNOWN, AclOperation.ANY}

# Operations an operation implies (Kafka's AclAuthorizer: READ, WRITE, DELETE or ALTER imply
# DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS).
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ,
                                      AclOperation.WRITE, AclOperation.DELETE,
                                      AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS,
                                              AclOperation.ALTER_CONFIGS}),
}

# Kafka's AclEntry.supportedOperations: the operations an ACL on each resource type can name
# (used for authorized-operations bit fields and by the CLI).
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
        AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS}),
    # Kafka 3.9 (ZooKeeper mode): a group's operations are Read, Describe and Delete.
    # DescribeConfigs/AlterConfigs on groups came with KIP-848's group configs (Kafka 4.0,
    # KRaft only); librdkafka's 0081_admin expects three below 4.0 and five from 4.0.
    ResourceType.GROUP: frozenset({
        AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}),
    ResourceType.CLUSTER: frozenset({
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
        AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}


def pascal_name(member: IntEnum) -> str:
    """Kafka's ``SecurityUtils.toPascalCase``: ``CLUSTER_ACTION`` → ``ClusterAction``."""
    return "".join(part.capitalize() for part in member.name.split("_"))


def parse_enum(enum: type[IntEnum], text: str) -> IntEnum:
    """A member by name, in any case, with or without underscores (``clusteraction``,
    ``ClusterAction``, ``CLUSTER_ACTION``); AclError if there is none."""
    wanted = text.replace("_", "").replace("-", "").upper()
    for member in enum:
        if member.name.replace("_", "") == wanted:
            return member
    raise AclError(f"unknown {enum.__name__} {text!r}")


def from_code(enum: type[IntEnum], code: int) -> IntEnum:
    """A member from its wire code; a code Kafka does not know reads as UNKNOWN."""
    try:
        return enum(int(code))
    except ValueError:
        return enum(0)


def parse_principal(text: str) -> str:
    """Kafka's ``SecurityUtils.parseKafkaPrincipal``: ``Type:name`` with both parts set."""
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise AclError(f"principal {text!r} is not of the form Type:name (e.g. User:alice)")
    return text


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return f"{pascal_name(self.resource_type)}:{self.pattern_type.name}:{self.name}"


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


def validate_binding(binding: AclBinding) -> None:
    """The checks Kafka's AclApis.handleCreateAcls and AclAuthorizer make before storing."""
    p, e = binding.pattern, binding.entry
    if p.resource_type not in _CONCRETE_RESOURCES:
        raise AclError(f"invalid resource type {p.resource_type.name}")
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclError(f"invalid resource pattern type {p.pattern_type.name}: "
                       "must be LITERAL or PREFIXED")
    if e.operation not in _CONCRETE_OPERATIONS:
        raise AclError(f"invalid operation {e.operation.name}")
    if e.permission not in (PermissionType.ALLOW, PermissionType.DENY):
        raise AclError(f"invalid permission type {e.permission.name}")
    if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        raise AclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not p.name:
        raise AclError("Invalid empty resource name")
    if not storable_name(p.name):
        raise AclError(f"ACL binding contains invalid resource name: {p.name}")
    if not e.host:
        raise AclError("Invalid empty host")
    parse_principal(e.principal)


def storable_name(name: str) -> bool:
    """Can ``name`` be a znode name under ``/kafka-acl/<type>/``? (ZooKeeper refuses ``/``,
    ``.``, ``..``, NUL, and text that is not UTF-8.)"""
    if not name or "/" in name or name in (".", "..") or "\x00" in name:
        return False
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter: ``None`` name/principal/host match anything, ANY matches
    any type, pattern type MATCH matches the patterns that would apply to ``name``."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: PermissionType = PermissionType.ANY

    def validate(self) -> None:
        for member in (self.resource_type, self.pattern_type, self.operation, self.permission):
            if member.name == "UNKNOWN":
                raise AclError(f"filter contains an unknown {type(member).__name__}")

    def matches_pattern(self, p: ResourcePattern) -> bool:
        """Kafka's ResourcePatternFilter.matches."""
        if self.resource_type not in (ResourceType.ANY, p.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, p.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, p.pattern_type):
            return self.name == p.name
        if p.pattern_type == PatternType.LITERAL:  # MATCH
            return self.name == p.name or p.name == WILDCARD_RESOURCE
        return self.name.startswith(p.name)

    def matches_entry(self, e: AccessControlEntry) -> bool:
        """Kafka's AccessControlEntryFilter.matches."""
        return ((self.principal is None or self.principal == e.principal)
                and (self.host is None or self.host == e.host)
                and self.operation in (AclOperation.ANY, e.operation)
                and self.permission in (PermissionType.ANY, e.permission))

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)

    def exact_patterns(self) -> list[ResourcePattern]:
        """The patterns a filter names exactly (Kafka's ``matchesAtMostOne`` filters), so
        that a delete also reaches ACLs stored but not yet in this broker's cache."""
        if (self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN)
                or self.name is None or not storable_name(self.name)):
            return []
        if self.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            return [ResourcePattern(self.resource_type, self.name, self.pattern_type)]
        if self.pattern_type == PatternType.ANY:
            return [ResourcePattern(self.resource_type, self.name, PatternType.LITERAL),
                    ResourcePattern(self.resource_type, self.name, PatternType.PREFIXED)]
        return []


# -- ZooKeeper documents (Kafka's AclEntry JSON and ZkAclChangeStore events) -----------------

def encode_entries(entries: frozenset[AccessControlEntry] | set[AccessControlEntry]) -> bytes:
    """``{"version":1,"acls":[{"principal","permissionType","operation","host"}]}``."""
    acls = [{"principal": e.principal, "permissionType": pascal_name(e.permission),
             "operation": pascal_name(e.operation), "host": e.host}
            for e in sorted(entries)]
    return json.dumps({"version": ACL_JSON_VERSION, "acls": acls},
                      separators=(",", ":")).encode()


def decode_entries(data: bytes | None) -> frozenset[AccessControlEntry]:
    """The entries of a resource znode (empty data: none); AclError if malformed."""
    if not data:
        return frozenset()
    try:
        doc = json.loads(data)
        if doc.get("version") != ACL_JSON_VERSION:
            raise AclError(f"unsupported ACL document version {doc.get('version')!r}")
        out = set()
        for item in doc["acls"]:
            out.add(AccessControlEntry(
                principal=parse_principal(str(item["principal"])),
                host=str(item["host"]),
                operation=AclOperation(parse_enum(AclOperation, str(item["operation"]))),
                permission=PermissionType(parse_enum(PermissionType,
                                                     str(item["permissionType"]))),
            ))
    except AclError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise AclError(f"malformed ACL document: {exc!r}") from exc
    return frozenset(out)


def encode_change(pattern: ResourcePattern) -> bytes:
    """A change notification's data: ``TOPIC:name`` for literal patterns (Kafka's
    LiteralAclChangeStore), a JSON event for the others (ExtendedAclChangeStore)."""
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    return json.dumps({"version": 1, "resourceType": pattern.resource_type.name,
                       "name": pattern.name, "patternType": pattern.pattern_type.name},
                      separators=(",", ":")).encode()


def decode_change(data: bytes, extended: bool) -> ResourcePattern:
    """The resource a change notification names; AclError if malformed."""
    try:
        if not extended:
            kind, sep, name = data.decode().partition(":")
            if not sep:
                raise AclError(f"expected ResourceType:ResourceName, got {data!r}")
            return ResourcePattern(ResourceType(parse_enum(ResourceType, kind)), name,
                                   PatternType.LITERAL)
        doc = json.loads(data)
        if int(doc.get("version", 1)) > 1:
            raise AclError(f"unsupported ACL change event version {doc['version']}")
        return ResourcePattern(ResourceType(parse_enum(ResourceType, str(doc["resourceType"]))),
                               str(doc["name"]),
                               PatternType(parse_enum(PatternType, str(doc["patternType"]))))
    except AclError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise AclError(f"malformed ACL change event {data!r}: {exc!r}") from exc
