"""``weir acl add|list|remove``: ACLs through CreateAcls, DescribeAcls and DeleteAcls, as
Kafka's ``kafka-acls.sh --bootstrap-server`` does (confluent-kafka's AdminClient).

``add`` makes one ACL for every resource × principal × host × operation given:
``--allow-principal`` with ``--allow-host`` (default ``*``) and ``--deny-principal`` with
``--deny-host`` (default ``*``). ``remove`` takes the same options and removes exactly those
ACLs; without principals or operations it removes every ACL on the resources named (a
filter, as kafka-acls.sh --remove). ``--producer`` and ``--consumer`` stand for the
operations a producer or a consumer needs, as in kafka-acls.sh. ``list`` shows the ACLs on
the resources named (all of them by default), ``--principal`` narrowing them to one
principal.
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from weir.cli.admin_common import (
    AdminCliError,
    _common,
    admin_client,
    client_settings,
    emit,
    table,
    wait,
)
from weir.security.acls import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclError,
    AclOperation,
    PatternType,
    ResourceType,
    parse_enum,
    parse_principal,
    pascal_name,
)

_PATTERN_CHOICES = ("literal", "prefixed", "match", "any")


def add_parser(sub: Any) -> None:
    acl = sub.add_parser("acl", help="add, list and remove ACLs (kafka-acls.sh)")
    asub = acl.add_subparsers(dest="acl_command", required=True, metavar="ACTION")
    p = _common(asub.add_parser("add", help="add ACLs"))
    _resources(p)
    _entries(p)
    p = _common(asub.add_parser("list", help="ACLs on resources (default: every ACL)"))
    _resources(p, list_default=True)
    p.add_argument("--principal", default=None, help="only this principal's ACLs")
    p = _common(asub.add_parser("remove", help="remove ACLs"))
    _resources(p)
    _entries(p)


def _resources(p: argparse.ArgumentParser, list_default: bool = False) -> None:
    p.add_argument("--topic", dest="topics", action="append", default=[], metavar="T",
                   help="a topic resource (repeatable)")
    p.add_argument("--group", dest="groups", action="append", default=[], metavar="G",
                   help="a consumer group resource (repeatable)")
    p.add_argument("--transactional-id", dest="transactional_ids", action="append",
                   default=[], metavar="ID", help="a transactional id resource (repeatable)")
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument("--resource-pattern-type", choices=_PATTERN_CHOICES,
                   default="any" if list_default else "literal",
                   help="literal or prefixed names; list and remove also take match and any "
                        f"(default {'any' if list_default else 'literal'})")


def _entries(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allow-principal", dest="allow_principals", action="append", default=[],
                   metavar="TYPE:NAME", help="e.g. User:alice (repeatable)")
    p.add_argument("--deny-principal", dest="deny_principals", action="append", default=[],
                   metavar="TYPE:NAME", help="e.g. User:mallory (repeatable)")
    p.add_argument("--allow-host", dest="allow_hosts", action="append", default=[],
                   metavar="HOST", help="default: * (any host)")
    p.add_argument("--deny-host", dest="deny_hosts", action="append", default=[],
                   metavar="HOST", help="default: *")
    p.add_argument("--operation", dest="operations", action="append", default=[],
                   metavar="OP", help="Read, Write, Create, Delete, Alter, Describe, "
                                      "ClusterAction, DescribeConfigs, AlterConfigs, "
                                      "IdempotentWrite or All (repeatable)")
    p.add_argument("--producer", action="store_true",
                   help="a producer's ACLs: Write, Describe, Create on the topics (Write, "
                        "Describe on --transactional-id; --idempotent: IdempotentWrite on "
                        "the cluster)")
    p.add_argument("--idempotent", action="store_true", help="with --producer")
    p.add_argument("--consumer", action="store_true",
                   help="a consumer's ACLs: Read, Describe on the topics, Read on the groups")


def cmd_acl(args: argparse.Namespace) -> int:
    return {"add": acl_add, "list": acl_list, "remove": acl_remove}[args.acl_command](args)


# -- argument checks (kafka-acls.sh's AclCommand) -------------------------------------------------


def _plan(args: argparse.Namespace, ops_required: bool
          ) -> list[tuple[ResourceType, str, AclOperation | None]]:
    """(resource type, name, operation) of every ACL the options name; operation None: any
    (``remove`` without ``--operation``). kafka-acls.sh's --producer and --consumer expand
    to their fixed operations per resource type."""
    resources = _named_resources(args, required=True)
    if not (getattr(args, "producer", False) or getattr(args, "consumer", False)):
        if getattr(args, "idempotent", False):
            raise AdminCliError("--idempotent needs --producer")
        ops: list[AclOperation | None] = list(
            _operations(args, resources, required=ops_required)) or [None]
        return [(rtype, name, op) for rtype, name in resources for op in ops]
    if args.operations or args.cluster:
        raise AdminCliError("--producer/--consumer name their own operations: leave out "
                            "--operation and --cluster")
    if args.consumer and not args.groups:
        raise AdminCliError("--consumer needs --group")
    if not args.topics:
        raise AdminCliError("--producer/--consumer need --topic")
    wanted: dict[ResourceType, list[AclOperation]] = {}
    if args.producer:
        wanted[ResourceType.TOPIC] = [AclOperation.WRITE, AclOperation.DESCRIBE,
                                      AclOperation.CREATE]
        wanted[ResourceType.TRANSACTIONAL_ID] = [AclOperation.WRITE, AclOperation.DESCRIBE]
        if args.idempotent:
            wanted[ResourceType.CLUSTER] = [AclOperation.IDEMPOTENT_WRITE]
    if args.consumer:
        topic_ops = wanted.setdefault(ResourceType.TOPIC, [])
        topic_ops += [op for op in (AclOperation.READ, AclOperation.DESCRIBE)
                      if op not in topic_ops]
        wanted[ResourceType.GROUP] = [AclOperation.READ]
    if args.idempotent:
        resources = [*resources, (ResourceType.CLUSTER, CLUSTER_NAME)]
    return [(rtype, name, op) for rtype, name in resources for op in wanted.get(rtype, [])]


def _named_resources(args: argparse.Namespace, required: bool) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in args.topics]
    out += [(ResourceType.GROUP, g) for g in args.groups]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_ids]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    if required and not out:
        raise AdminCliError("name a resource: --topic, --group, --transactional-id or "
                            "--cluster")
    return out


def _operations(args: argparse.Namespace, resources: list[tuple[ResourceType, str]],
                required: bool) -> list[AclOperation]:
    """The ``--operation`` values, each checked against the resource types named."""
    if not args.operations:
        if required:
            raise AdminCliError("give at least one --operation")
        return []
    ops = []
    for text in args.operations:
        try:
            op = AclOperation(parse_enum(AclOperation, text))
        except AclError:
            raise AdminCliError(f"unknown operation {text!r}") from None
        if op in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise AdminCliError(f"unknown operation {text!r}")
        for rtype, _ in resources:
            if op != AclOperation.ALL and op not in SUPPORTED_OPERATIONS[rtype]:
                allowed = ", ".join(sorted(pascal_name(o) for o in SUPPORTED_OPERATIONS[rtype]))
                raise AdminCliError(f"operation {pascal_name(op)} does not apply to "
                                    f"{pascal_name(rtype)} resources (allowed: {allowed}, All)")
        ops.append(op)
    return ops


def _principals(texts: list[str]) -> list[str]:
    try:
        return [parse_principal(t) for t in texts]
    except AclError as exc:
        raise AdminCliError(str(exc)) from None


def _pattern(args: argparse.Namespace, exact: bool) -> PatternType:
    pattern = PatternType(parse_enum(PatternType, args.resource_pattern_type))
    if exact and pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AdminCliError("--resource-pattern-type must be literal or prefixed to add ACLs")
    return pattern


def _entry_specs(args: argparse.Namespace, required: bool) -> list[tuple[str, str, str]]:
    """(principal, host, "ALLOW"|"DENY") for the entries the options describe."""
    allow = _principals(args.allow_principals)
    deny = _principals(args.deny_principals)
    if required and not allow and not deny:
        raise AdminCliError("give --allow-principal or --deny-principal")
    if args.allow_hosts and not allow:
        raise AdminCliError("--allow-host needs --allow-principal")
    if args.deny_hosts and not deny:
        raise AdminCliError("--deny-host needs --deny-principal")
    specs = [(p, h, "ALLOW") for p in allow for h in (args.allow_hosts or ["*"])]
    specs += [(p, h, "DENY") for p in deny for h in (args.deny_hosts or ["*"])]
    return specs


# -- confluent-kafka objects -----------------------------------------------------------------------


def _ck(kind: str, member: Any) -> Any:
    import confluent_kafka.admin as ck

    enum = {"resource": ck.ResourceType, "pattern": ck.ResourcePatternType,
            "operation": ck.AclOperation, "permission": ck.AclPermissionType}[kind]
    name = member if isinstance(member, str) else member.name
    return enum[_CK_NAMES.get(name, name) if kind == "resource" else name]


# librdkafka calls the cluster resource (code 4) BROKER.
_CK_NAMES = {"CLUSTER": "BROKER"}
_FROM_CK = {"BROKER": "CLUSTER"}


def _row(binding: Any) -> dict[str, str]:
    rtype = ResourceType[_FROM_CK.get(binding.restype.name, binding.restype.name)]
    return {"resource_type": pascal_name(rtype),
            "name": binding.name,
            "pattern_type": binding.resource_pattern_type.name,
            "principal": binding.principal, "host": binding.host,
            "operation": pascal_name(AclOperation[binding.operation.name]),
            "permission": binding.permission_type.name.capitalize()}


def _table(rows: list[dict[str, str]]) -> str:
    if not rows:
        return "No ACLs."
    return table(("RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION",
                  "PERMISSION"),
                 [(r["resource_type"], r["name"], r["pattern_type"], r["principal"],
                   r["host"], r["operation"], r["permission"]) for r in rows])


def _sorted(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    return sorted(rows, key=lambda r: tuple(r.values()))


# -- commands ------------------------------------------------------------------------------------


def acl_add(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import AclBinding

    plan = _plan(args, ops_required=True)
    pattern = _pattern(args, exact=True)
    specs = _entry_specs(args, required=True)
    bindings = [AclBinding(_ck("resource", rtype), name, _ck("pattern", pattern), principal,
                           host, _ck("operation", op), _ck("permission", perm))
                for (rtype, name, op), (principal, host, perm)
                in itertools.product(plan, specs)]
    admin = admin_client(args)
    futures = admin.create_acls(bindings, request_timeout=args.timeout)
    rows = []
    for binding in bindings:
        wait(futures[binding], args, "adding ACLs")
        rows.append(_row(binding))
    rows = _sorted(rows)
    return emit(args, {"added": rows}, lambda: f"Added {len(rows)} ACLs:\n{_table(rows)}")


def acl_list(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import AclBindingFilter

    resources = _named_resources(args, required=False) or [(ResourceType.ANY, None)]
    pattern = _pattern(args, exact=False)
    principal = _principals([args.principal])[0] if args.principal else None
    admin = admin_client(args)
    rows = []
    for rtype, name in resources:
        flt = AclBindingFilter(_ck("resource", rtype), name, _ck("pattern", pattern),
                               principal, None, _ck("operation", "ANY"),
                               _ck("permission", "ANY"))
        found = wait(admin.describe_acls(flt, request_timeout=args.timeout), args,
                     "listing ACLs")
        rows.extend(_row(b) for b in found)
    if not rows and not client_settings(args):
        _check_authorizer(args)
    rows = _sorted(rows)
    return emit(args, {"acls": rows}, lambda: _table(rows))


def _check_authorizer(args: argparse.Namespace) -> None:
    """SECURITY_DISABLED when the cluster has no authorizer. The broker answers DescribeAcls
    with that error (Kafka's AclApis), but librdkafka gives an empty list for it, so an empty
    answer is checked with one DescribeAcls v1 through Weir's own client (plaintext
    clusters: a secured one has an authorizer)."""
    from kio.index import load_request_schema

    from weir.cli.admin_configs import _broker_request, _check
    from weir.protocol import codec

    payload = codec.build(load_request_schema(29, 1), resource_type_filter=int(
        ResourceType.ANY), resource_name_filter=None, pattern_type_filter=int(PatternType.ANY),
        principal_filter=None, host_filter=None, operation=int(AclOperation.ANY),
        permission_type=1)
    answer = _broker_request(args, None, payload)
    _check(answer.error_code, answer.error_message, "listing ACLs")


def acl_remove(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import AclBindingFilter

    plan = _plan(args, ops_required=False)
    pattern = _pattern(args, exact=False)
    specs: list[tuple[Any, Any, str]] = _entry_specs(args, required=False) or [
        (None, None, "ANY")]
    filters = [AclBindingFilter(_ck("resource", rtype), name, _ck("pattern", pattern),
                                principal, host, _ck("operation", op or "ANY"),
                                _ck("permission", perm))
               for (rtype, name, op), (principal, host, perm)
               in itertools.product(plan, specs)]
    admin = admin_client(args)
    futures = admin.delete_acls(filters, request_timeout=args.timeout)
    rows = []
    for flt in filters:
        rows.extend(_row(b) for b in wait(futures[flt], args, "removing ACLs"))
    rows = _sorted(rows)
    return emit(args, {"removed": rows}, lambda: f"Removed {len(rows)} ACLs"
                + (f":\n{_table(rows)}" if rows else "."))
