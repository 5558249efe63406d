"""DescribeUserScramCredentials (50, v0, KIP-554): each user's SCRAM mechanisms and
iteration counts (never salts or keys), from ``/config/users``.  No user list: every user
with a credential; a named user without one is RESOURCE_NOT_FOUND, one named twice
DUPLICATE_RESOURCE (Kafka's messages)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import TYPE_CHECKING, Any

from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.describe_user_scram_credentials.v0.request import (
        DescribeUserScramCredentialsRequest,
    )

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 50
MIN_VERSION = 0
MAX_VERSION = 0

_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}


async def handle(ctx: RequestContext, request: DescribeUserScramCredentialsRequest) -> Response:
    if not authz.authorize_cluster(ctx, AclOperation.DESCRIBE):
        # Kafka's handleDescribeUserScramCredentialsRequest: DESCRIBE on the cluster.
        refused = ErrorCode.cluster_authorization_failed
        return ctx.respond(error_code=refused, error_message="Cluster authorization failed.", results=[
            {"user": u.name, "error_code": refused, "error_message": "Cluster authorization failed."}
            for u in request.users or ()])
    store = ctx.scram_credentials
    requested = [u.name for u in request.users] if request.users else None
    return ctx.respond(error_code=ErrorCode.none,
                       results=await asyncio.to_thread(_describe, store, requested))


def _describe(store, requested: list[str] | None) -> list[dict[str, Any]]:
    store.invalidate()  # a describe reads ZooKeeper, as Kafka's does
    if requested is None:
        return [_result(user, store.mechanisms(user)) for user in store.users()]
    counts = Counter(requested)
    results = []
    for user in dict.fromkeys(requested):
        if counts[user] > 1:
            results.append({"user": user, "error_code": ErrorCode.duplicate_resource,
                            "error_message": "Cannot describe SCRAM credentials for the same "
                                             "user twice in a single request"})
            continue
        mechanisms = store.mechanisms(user)
        if not mechanisms:
            results.append({"user": user, "error_code": ErrorCode.resource_not_found,
                            "error_message": "Attempt to describe a user credential that "
                                             "does not exist"})
            continue
        results.append(_result(user, mechanisms))
    return results


def _result(user: str, mechanisms: dict[str, int]) -> dict[str, Any]:
    return {"user": user, "error_code": ErrorCode.none, "error_message": None,
            "credential_infos": [{"mechanism": _CODES[m], "iterations": i}
                                 for m, i in sorted(mechanisms.items())]}
