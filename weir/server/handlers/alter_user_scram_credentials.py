"""AlterUserScramCredentials (51, v0, KIP-554): add or remove a user's SCRAM credentials.

The client salts and hashes (salt, salted password); the broker derives the stored and
server keys and writes ``/config/users/<user>`` with a ``/config/changes`` notification, as
Kafka's ``ZkAdminManager`` does.  Errors are per user, with Kafka's codes and checks: an
empty name or an iteration count outside 4096..16384 is UNACCEPTABLE_CREDENTIAL, an unknown
mechanism UNSUPPORTED_SASL_MECHANISM, a (user, mechanism) named twice DUPLICATE_RESOURCE,
deleting a credential that does not exist RESOURCE_NOT_FOUND.  Any broker accepts it (Kafka
requires the controller in ZooKeeper mode; Weir's brokers all write ZooKeeper, as for
topics).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import TYPE_CHECKING

from weir.protocol.errors import ErrorCode
from weir.security import scram
from weir.security.acls import AclOperation
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.alter_user_scram_credentials.v0.request import AlterUserScramCredentialsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 51
MIN_VERSION = 0
MAX_VERSION = 0

MECHANISM_CODES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # Kafka's ScramMechanism types


def _check(name: str, code: int, counts: Counter, iterations: int | None
           ) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if code not in MECHANISM_CODES:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if counts[(name, code)] > 1:
        return (ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request")
    if iterations is not None and iterations < scram.MIN_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too few iterations"
    if iterations is not None and iterations > scram.MAX_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too many iterations"
    return None


async def handle(ctx: RequestContext, request: AlterUserScramCredentialsRequest) -> Response:
    if not authz.authorize_cluster(ctx, AclOperation.ALTER):
        # Kafka's handleAlterUserScramCredentialsRequest: ALTER on the cluster.
        users = sorted({d.name for d in request.deletions} | {u.name for u in request.upsertions})
        return ctx.respond(results=[{"user": user,
                                     "error_code": ErrorCode.cluster_authorization_failed,
                                     "error_message": "Cluster authorization failed."} for user in users])
    store = ctx.scram_credentials
    counts = Counter([(d.name, int(d.mechanism)) for d in request.deletions]
                     + [(u.name, int(u.mechanism)) for u in request.upsertions])
    errors: dict[str, tuple[ErrorCode, str]] = {}
    upserts: dict[str, dict[str, scram.ScramCredential]] = {}
    deletions: dict[str, set[str]] = {}
    for d in request.deletions:
        problem = _check(d.name, int(d.mechanism), counts, None)
        if problem is not None:
            errors.setdefault(d.name, problem)
            continue
        deletions.setdefault(d.name, set()).add(MECHANISM_CODES[int(d.mechanism)])
    for u in request.upsertions:
        problem = _check(u.name, int(u.mechanism), counts, int(u.iterations))
        if problem is None and (not u.salt or not u.salted_password):
            problem = (ErrorCode.unacceptable_credential,
                       "Salt and salted password must not be empty")
        if problem is not None:
            errors.setdefault(u.name, problem)
            continue
        mechanism = MECHANISM_CODES[int(u.mechanism)]
        upserts.setdefault(u.name, {})[mechanism] = scram.credential_from_salted(
            mechanism, bytes(u.salted_password), bytes(u.salt), int(u.iterations))
    users = list(dict.fromkeys([d.name for d in request.deletions]
                               + [u.name for u in request.upsertions]))
    results = []
    for user in users:
        if user not in errors:
            errors[user] = await asyncio.to_thread(
                _apply, store, user, upserts.get(user, {}), deletions.get(user, set()))
        code, message = errors[user]
        results.append({"user": user, "error_code": code,
                        "error_message": message or None})
    return ctx.respond(results=results)


def _apply(store, user: str, upserts: dict, deletions: set[str]) -> tuple[ErrorCode, str]:
    existing = store.mechanisms(user)
    missing = sorted(m for m in deletions if m not in existing)
    if missing:
        return (ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist")
    store.alter(user, upserts, deletions)
    return ErrorCode.none, ""
