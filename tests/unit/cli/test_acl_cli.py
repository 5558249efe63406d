"""``weir acl``'s argument handling (no broker needed): kafka-acls.sh's expansion of
principals, hosts, operations, --producer and --consumer, and its refusals."""

from __future__ import annotations

import argparse

import pytest

from weir.cli import acls
from weir.cli.admin import AdminCliError
from weir.security.acls import AclOperation as Op
from weir.security.acls import ResourceType as RT


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    acls.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["acl", *argv])


def test_one_acl_per_resource_operation_principal_and_host():
    args = _args("add", "--topic", "a", "--topic", "b", "--operation", "read",
                 "--operation", "DESCRIBE", "--allow-principal", "User:x",
                 "--allow-host", "10.0.0.1", "--allow-host", "10.0.0.2",
                 "--deny-principal", "User:y")
    plan = acls._plan(args, ops_required=True)
    assert plan == [(RT.TOPIC, "a", Op.READ), (RT.TOPIC, "a", Op.DESCRIBE),
                    (RT.TOPIC, "b", Op.READ), (RT.TOPIC, "b", Op.DESCRIBE)]
    assert acls._entry_specs(args, required=True) == [
        ("User:x", "10.0.0.1", "ALLOW"), ("User:x", "10.0.0.2", "ALLOW"),
        ("User:y", "*", "DENY")]


def test_producer_and_consumer_shorthands():
    args = _args("add", "--producer", "--idempotent", "--consumer", "--topic", "t",
                 "--group", "g", "--transactional-id", "tx", "--allow-principal", "User:app")
    assert sorted(acls._plan(args, ops_required=True)) == sorted([
        (RT.TOPIC, "t", Op.WRITE), (RT.TOPIC, "t", Op.DESCRIBE), (RT.TOPIC, "t", Op.CREATE),
        (RT.TOPIC, "t", Op.READ), (RT.GROUP, "g", Op.READ),
        (RT.TRANSACTIONAL_ID, "tx", Op.WRITE), (RT.TRANSACTIONAL_ID, "tx", Op.DESCRIBE),
        (RT.CLUSTER, "kafka-cluster", Op.IDEMPOTENT_WRITE)])


def test_remove_without_operations_or_principals_is_a_filter():
    args = _args("remove", "--group", "g")
    assert acls._plan(args, ops_required=False) == [(RT.GROUP, "g", None)]
    assert acls._entry_specs(args, required=False) == []


@pytest.mark.parametrize("argv,message", [
    (("add", "--allow-principal", "User:x", "--operation", "Read"), "name a resource"),
    (("add", "--topic", "t", "--allow-principal", "User:x"), "--operation"),
    (("add", "--topic", "t", "--operation", "Read"), "--allow-principal or --deny-principal"),
    (("add", "--group", "g", "--operation", "Write", "--allow-principal", "User:x"),
     "does not apply to Group"),
    (("add", "--cluster", "--operation", "Read", "--allow-principal", "User:x"),
     "does not apply to Cluster"),
    (("add", "--topic", "t", "--operation", "Fly", "--allow-principal", "User:x"),
     "unknown operation"),
    (("add", "--topic", "t", "--operation", "Read", "--allow-principal", "x"), "Type:name"),
    (("add", "--topic", "t", "--operation", "Read", "--allow-host", "h",
      "--deny-principal", "User:x"), "--allow-host needs --allow-principal"),
    (("add", "--consumer", "--topic", "t", "--allow-principal", "User:x"), "needs --group"),
    (("add", "--producer", "--topic", "t", "--operation", "Read",
      "--allow-principal", "User:x"), "leave out"),
    (("add", "--idempotent", "--topic", "t", "--operation", "Write",
      "--allow-principal", "User:x"), "--idempotent needs --producer"),
])
def test_refusals(argv, message):
    args = _args(*argv)
    with pytest.raises(AdminCliError, match=message):
        acls._plan(args, ops_required=True)
        acls._entry_specs(args, required=True)


def test_add_needs_an_exact_pattern_type():
    args = _args("add", "--topic", "t", "--resource-pattern-type", "match")
    with pytest.raises(AdminCliError, match="literal or prefixed"):
        acls._pattern(args, exact=True)
