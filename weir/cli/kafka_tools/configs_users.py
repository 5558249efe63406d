"""``kafka-configs.sh --entity-type users``: SCRAM credentials over ``--bootstrap-server``
(KIP-554), as Kafka 3.x's ConfigCommand does it.

``--alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=secret],SCRAM-SHA-512=
[password=secret]'`` upserts through AlterUserScramCredentials (iterations default to
4096, Kafka's ``DefaultScramIterations``), ``--delete-config SCRAM-SHA-512`` deletes, and
``--describe`` prints ``SCRAM credential configs for user-principal 'alice' are
SCRAM-SHA-256=iterations=8192`` per user (DescribeUserScramCredentials). Client quota
configs (AlterClientQuotas) are not supported: Weir's brokers have no client quotas.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from weir.cli.kafka_tools import common
from weir.cli.kafka_tools.common import ToolError
from weir.security.scram import DEFAULT_ITERATIONS, MIN_ITERATIONS

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# org.apache.kafka.common.config.internals.QuotaConfigs: the user and client quota keys
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage",
              "controller_mutation_rate")
# ConfigCommand's credential pattern: the password is everything after "password="
_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)


def _mechanism(name: str) -> Any:
    from confluent_kafka.admin import ScramMechanism

    return {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
            "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}[name]


def _check_keys(keys: list[str], verb: str) -> None:
    quota = [k for k in keys if k in QUOTA_KEYS]
    unknown = [k for k in keys if k not in MECHANISMS and k not in QUOTA_KEYS]
    if unknown:
        raise ToolError(f"Only quota and SCRAM credential configs can be {verb} for 'users' "
                        f"using --bootstrap-server. Unexpected config names: "
                        f"{', '.join(unknown)}", name="INVALID_ARGUMENT")
    if quota:
        raise ToolError(f"client quota configs ({', '.join(quota)}) are not supported: the "
                        f"brokers have no client quotas (AlterClientQuotas)",
                        name="UNSUPPORTED_VERSION")


def _iterations_and_password(mechanism: str, text: str) -> tuple[int, bytes]:
    match = _CREDENTIAL.fullmatch(text)
    if match is None:
        raise ToolError(f"Invalid credential property {mechanism}={text}",
                        name="INVALID_ARGUMENT")
    raw, password = match.groups()
    iterations = int(raw) if raw not in (None, "", "-1") else DEFAULT_ITERATIONS
    if iterations < MIN_ITERATIONS:
        raise ToolError(f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS} "
                        f"required for {mechanism}", name="INVALID_ARGUMENT")
    return iterations, password.encode("utf-8")


def alter(args: argparse.Namespace, user: str) -> int:
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    sets = common.key_values(args.add_configs, "--add-config")
    deletes = [k.strip() for text in args.delete_configs for k in text.split(",") if k.strip()]
    _check_keys([k for k, _ in sets], "added")
    _check_keys(deletes, "deleted")
    changes: list[Any] = [UserScramCredentialDeletion(user, _mechanism(m)) for m in deletes]
    for mechanism, text in sets:
        iterations, password = _iterations_and_password(mechanism, text)
        changes.append(UserScramCredentialUpsertion(
            user, ScramCredentialInfo(_mechanism(mechanism), iterations), password))
    admin = common.admin(args)
    futures = admin.alter_user_scram_credentials(changes, request_timeout=args.timeout)
    common.wait(futures[user], args, f"altering SCRAM credentials of user {user}")
    print(f"Completed updating config for user {user}.")
    return 0


def describe(args: argparse.Namespace, user: str | None) -> int:
    if user == "":  # --entity-default: quotas only, which the brokers do not have
        return 0
    admin = common.admin(args)
    futures = admin.describe_user_scram_credentials([user] if user else None,
                                                    request_timeout=args.timeout)
    if user:
        described = {user: common.wait(futures[user], args, f"describing user {user}")}
    else:
        described = common.wait(futures, args, "describing users")
    for name, description in sorted(described.items()):
        infos = sorted(description.scram_credential_infos,
                       key=lambda i: str(i.mechanism.name))
        text = ", ".join(f"{str(i.mechanism.name).replace('_', '-')}=iterations="
                         f"{i.iterations}" for i in infos)
        print(f"SCRAM credential configs for user-principal '{name}' are {text}")
    return 0
