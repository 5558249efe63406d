"""``kafka-acls.sh``: Kafka's AclCommand (``--add``, ``--remove``, ``--list``) over
CreateAcls, DeleteAcls and DescribeAcls, with the option checks of ``weir acl``
(:mod:`weir.cli.acls`: ``--producer``, ``--consumer``, ``--idempotent``, host defaults).

Lines are Kafka's: ``Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t,
patternType=LITERAL)`:`` followed by one ``<TAB>(principal=User:a, host=*, operation=READ,
permissionType=ALLOW)`` line per entry, and ``Current ACLs for resource `...`:`` blocks for
``--list`` and after a change. ``--remove`` asks before removing unless ``--force``.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Sequence
from typing import Any

from weir.cli.kafka_tools import common

PROG = "kafka-acls.sh"
_FROM_CK = {"BROKER": "CLUSTER"}


def build_parser() -> argparse.ArgumentParser:
    p = common.parser(PROG, "Add, remove and list ACLs.")
    p.add_argument("--add", action="store_true", help="Add ACLs.")
    p.add_argument("--remove", action="store_true", help="Remove ACLs.")
    p.add_argument("--list", action="store_true",
                   help="List ACLs of the resources given (default: every ACL).")
    p.add_argument("--topic", dest="topics", action="append", default=[], metavar="TOPIC",
                   help="A topic resource (repeatable)")
    p.add_argument("--group", dest="groups", action="append", default=[], metavar="GROUP",
                   help="A consumer group resource (repeatable)")
    p.add_argument("--transactional-id", dest="transactional_ids", action="append",
                   default=[], metavar="ID", help="A transactional id resource (repeatable)")
    p.add_argument("--cluster", action="store_true", help="The cluster resource")
    p.add_argument("--resource-pattern-type", default=None,
                   choices=("literal", "prefixed", "match", "any"),
                   help="literal or prefixed; --list and --remove also take match and any "
                        "(default: literal, and any for --list)")
    p.add_argument("--allow-principal", dest="allow_principals", action="append", default=[],
                   metavar="TYPE:NAME", help="A principal to allow, e.g. User:alice")
    p.add_argument("--deny-principal", dest="deny_principals", action="append", default=[],
                   metavar="TYPE:NAME", help="A principal to deny")
    p.add_argument("--allow-host", dest="allow_hosts", action="append", default=[],
                   metavar="HOST", help="A host the allowed principals may come from "
                                        "(default: * with --allow-principal)")
    p.add_argument("--deny-host", dest="deny_hosts", action="append", default=[],
                   metavar="HOST", help="A host the denied principals are refused from "
                                        "(default: * with --deny-principal)")
    p.add_argument("--operation", dest="operations", action="append", default=[],
                   metavar="OP", help="Read, Write, Create, Delete, Alter, Describe, "
                                      "ClusterAction, DescribeConfigs, AlterConfigs, "
                                      "IdempotentWrite or All (repeatable)")
    p.add_argument("--producer", action="store_true",
                   help="The ACLs of a producer: Write, Describe, Create on the topics")
    p.add_argument("--consumer", action="store_true",
                   help="The ACLs of a consumer: Read, Describe on the topics, Read on the "
                        "groups")
    p.add_argument("--idempotent", action="store_true",
                   help="With --producer: IdempotentWrite on the cluster")
    p.add_argument("--principal", default=None, metavar="TYPE:NAME",
                   help="--list: only this principal's ACLs")
    p.add_argument("--force", action="store_true", help="--remove without asking")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(PROG, "Error while executing ACL command: ", _main, argv)


def _main(argv: Sequence[str]) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    action = common.one_action(p, args, ("add", "remove", "list"))
    if args.resource_pattern_type is None:
        args.resource_pattern_type = "any" if action == "list" else "literal"
    return {"add": add, "remove": remove, "list": list_acls}[action](args)


def _pattern_text(rtype: str, name: str, pattern: str) -> str:
    return f"ResourcePattern(resourceType={rtype}, name={name}, patternType={pattern})"


def _entry_text(principal: str, host: str, operation: str, permission: str) -> str:
    return (f"(principal={principal}, host={host}, operation={operation}, "
            f"permissionType={permission})")


def _of_binding(binding: Any) -> tuple[str, str]:
    """(resource pattern text, entry text) of a confluent-kafka AclBinding."""
    rtype = _FROM_CK.get(binding.restype.name, binding.restype.name)
    return (_pattern_text(rtype, binding.name, binding.resource_pattern_type.name),
            _entry_text(binding.principal, binding.host, binding.operation.name,
                        binding.permission_type.name))


def _print_current(bindings: list[Any], principal: str | None = None) -> None:
    by_resource: dict[str, list[str]] = {}
    for b in bindings:
        if principal is not None and b.principal != principal:
            continue
        resource, entry = _of_binding(b)
        by_resource.setdefault(resource, []).append(entry)
    if principal is not None:
        print(f"ACLs for principal `{principal}`")
    for resource, entries in sorted(by_resource.items()):
        print(f"Current ACLs for resource `{resource}`:\n"
              + "\n".join(f"\t{e}" for e in sorted(entries)) + "\n")


def _admin_ns(args: argparse.Namespace) -> argparse.Namespace:
    ns = common.admin_args(args)
    for key, value in vars(args).items():
        ns.__dict__.setdefault(key, value)
    return ns


def _describe(args: argparse.Namespace, admin: Any, resources: list[tuple[Any, Any]],
              pattern: Any) -> list[Any]:
    from confluent_kafka.admin import AclBindingFilter

    from weir.cli import acls

    found: list[Any] = []
    for rtype, name in resources:
        flt = AclBindingFilter(acls._ck("resource", rtype), name, acls._ck("pattern", pattern),
                               None, None, acls._ck("operation", "ANY"),
                               acls._ck("permission", "ANY"))
        found.extend(common.wait(admin.describe_acls(flt, request_timeout=args.timeout),
                                 args, "listing ACLs"))
    return found


def add(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import AclBinding

    from weir.cli import acls

    ns = _admin_ns(args)
    plan = acls._plan(ns, ops_required=True)
    pattern = acls._pattern(ns, exact=True)
    specs = acls._entry_specs(ns, required=True)
    bindings = [AclBinding(acls._ck("resource", rtype), name, acls._ck("pattern", pattern),
                           principal, host, acls._ck("operation", op),
                           acls._ck("permission", perm))
                for (rtype, name, op), (principal, host, perm)
                in itertools.product(plan, specs)]
    admin = common.admin(args)
    by_resource: dict[str, list[str]] = {}
    for b in bindings:
        resource, entry = _of_binding(b)
        by_resource.setdefault(resource, []).append(entry)
    for resource, entries in by_resource.items():
        print(f"Adding ACLs for resource `{resource}`: \n "
              + "\n".join(f"\t{e}" for e in entries) + "\n")
    futures = admin.create_acls(bindings, request_timeout=args.timeout)
    for b in bindings:
        common.wait(futures[b], args, "adding ACLs")
    resources = list(dict.fromkeys((rtype, name) for rtype, name, _ in plan))
    _print_current(_describe(args, admin, resources, pattern))
    return 0


def remove(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import AclBindingFilter

    from weir.cli import acls

    ns = _admin_ns(args)
    plan = acls._plan(ns, ops_required=False)
    pattern = acls._pattern(ns, exact=False)
    specs: list[tuple[Any, Any, str]] = acls._entry_specs(ns, required=False) or [
        (None, None, "ANY")]
    resources = list(dict.fromkeys((rtype, name) for rtype, name, _ in plan))
    if not args.force:
        names = ", ".join(_pattern_text(r.name, n, pattern.name) for r, n in resources)
        print(f"Are you sure you want to delete ACLs for resource filter `{names}`? (y/n)",
              flush=True)
        if sys.stdin.readline().strip().lower() != "y":
            return 0
    filters = [AclBindingFilter(acls._ck("resource", rtype), name, acls._ck("pattern", pattern),
                                principal, host, acls._ck("operation", op or "ANY"),
                                acls._ck("permission", perm))
               for (rtype, name, op), (principal, host, perm)
               in itertools.product(plan, specs)]
    admin = common.admin(args)
    futures = admin.delete_acls(filters, request_timeout=args.timeout)
    for flt in filters:
        common.wait(futures[flt], args, "removing ACLs")
    _print_current(_describe(args, admin, resources, pattern))
    return 0


def list_acls(args: argparse.Namespace) -> int:
    from weir.cli import acls
    from weir.security.acls import ResourceType

    ns = _admin_ns(args)
    resources = acls._named_resources(ns, required=False) or [(ResourceType.ANY, None)]
    pattern = acls._pattern(ns, exact=False)
    principal = acls._principals([args.principal])[0] if args.principal else None
    admin = common.admin(args)
    found = _describe(args, admin, resources, pattern)
    if not found and not acls.client_settings(ns):
        acls._check_authorizer(ns)  # librdkafka drops DescribeAcls' SECURITY_DISABLED
    _print_current(found, principal)
    return 0


if __name__ == "__main__":
    sys.exit(main())
