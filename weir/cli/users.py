"""``weir user add|list|remove``: SCRAM users through AlterUserScramCredentials and
DescribeUserScramCredentials (KIP-554), as ``kafka-configs.sh --entity-type users
--alter --add-config 'SCRAM-SHA-512=[password=...]'`` does.

The password is salted and hashed here (confluent-kafka's AdminClient); the broker stores
only the derived keys under ``/config/users/<user>``.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from typing import Any

from weir.cli.admin_common import AdminCliError, _common, admin_client, emit, table, wait
from weir.security.scram import DEFAULT_ITERATIONS, HASHES

MECHANISMS = tuple(HASHES)


def add_parser(sub: Any) -> None:
    user = sub.add_parser("user", help="add, list and remove SCRAM users")
    usub = user.add_subparsers(dest="user_command", required=True, metavar="ACTION")
    p = _common(usub.add_parser("add", help="add a user or change its password"))
    p.add_argument("name", help="the user")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--password", default=None, help="default: a random one, printed")
    how.add_argument("--password-stdin", action="store_true",
                     help="read the password from the first line of stdin")
    p.add_argument("--mechanism", dest="mechanisms", action="append", choices=MECHANISMS,
                   help="repeatable; default: both SCRAM mechanisms")
    p.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                   help=f"PBKDF2 iterations, 4096..16384 (default {DEFAULT_ITERATIONS})")
    p = _common(usub.add_parser("list", help="users with their mechanisms and iterations"))
    p.add_argument("names", nargs="*", metavar="NAME", help="default: every user")
    p = _common(usub.add_parser("remove", help="remove a user's SCRAM credentials"))
    p.add_argument("name", help="the user")
    p.add_argument("--mechanism", dest="mechanisms", action="append", choices=MECHANISMS,
                   help="repeatable; default: every mechanism the user has")


def cmd_user(args: argparse.Namespace) -> int:
    return {"add": user_add, "list": user_list, "remove": user_remove}[args.user_command](args)


def _mechanism(name: str) -> Any:
    from confluent_kafka.admin import ScramMechanism

    return {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
            "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}[name]


def _name(mechanism: Any) -> str:
    return str(mechanism.name).replace("_", "-")


def user_add(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import ScramCredentialInfo, UserScramCredentialUpsertion

    password = args.password
    generated = False
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    if password is None:
        password, generated = secrets.token_urlsafe(18), True
    if not password:
        raise AdminCliError("the password must not be empty")
    mechanisms = args.mechanisms or list(MECHANISMS)
    admin = admin_client(args)
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(args.name, ScramCredentialInfo(_mechanism(m),
                                                                    args.iterations),
                                     password.encode("utf-8"))
        for m in mechanisms])
    wait(futures[args.name], args, f"user {args.name}")
    doc = {"user": args.name, "mechanisms": mechanisms, "iterations": args.iterations,
           **({"password": password} if generated else {})}
    return emit(args, doc, lambda: f"user {args.name}: {', '.join(mechanisms)}"
                + (f"\npassword: {password}" if generated else ""))


def _describe(args: argparse.Namespace, names: list[str] | None) -> dict[str, list]:
    admin = admin_client(args)
    futures = admin.describe_user_scram_credentials(names or None)
    if not names:
        described = wait(futures, args, "users")
    else:
        described = {n: wait(f, args, f"user {n}") for n, f in futures.items()}
    return {user: sorted((_name(i.mechanism), i.iterations)
                         for i in d.scram_credential_infos)
            for user, d in sorted(described.items())}


def user_list(args: argparse.Namespace) -> int:
    users = _describe(args, list(args.names))
    doc = [{"user": u, "credentials": [{"mechanism": m, "iterations": i} for m, i in creds]}
           for u, creds in users.items()]
    return emit(args, doc, lambda: table(
        ["user", "mechanism", "iterations"],
        [(u, m, i) for u, creds in users.items() for m, i in creds]))


def user_remove(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import UserScramCredentialDeletion

    try:  # without --mechanism: the ones the user has
        mechanisms = args.mechanisms or [m for m, _ in _describe(args, [args.name])[args.name]]
    except AdminCliError as exc:
        if exc.name != "RESOURCE_NOT_FOUND":
            raise
        # the answer of the DescribeUserScramCredentials asked first is about describing;
        # say what Kafka's AlterUserScramCredentials says of a deletion
        raise AdminCliError(f"user {args.name}: RESOURCE_NOT_FOUND: Attempt to delete a user "
                            "credential that does not exist", name="RESOURCE_NOT_FOUND"
                            ) from None
    admin = admin_client(args)
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion(args.name, _mechanism(m)) for m in mechanisms])
    wait(futures[args.name], args, f"user {args.name}")
    return emit(args, {"user": args.name, "removed": mechanisms},
                lambda: f"user {args.name}: removed {', '.join(mechanisms)}")
