"""Checks shared by the requests a controller sends to brokers (LeaderAndIsr, StopReplica,
UpdateMetadata): a request addressed to an older incarnation of this broker is refused."""

from __future__ import annotations

from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation
from weir.server import authz


def cluster_action_refused(ctx) -> ErrorCode | None:
    """CLUSTER_AUTHORIZATION_FAILED unless the principal may CLUSTER_ACTION on the cluster
    (Kafka's AuthHelper.authorizeClusterOperation for the inter-broker APIs)."""
    if authz.authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return None
    return ErrorCode.cluster_authorization_failed


async def stale_broker_epoch(ctx, request) -> ErrorCode | None:
    """STALE_BROKER_EPOCH for a request this incarnation must not apply, else None.

    Kafka's KafkaServer registers (its broker epoch is the czxid of ``/brokers/ids/<id>``)
    before it processes any request.  Weir's listener is bound earlier (the port goes into
    the registration), so a controller request arriving before registration waits for it
    and is then checked like any other: an older broker epoch is refused
    (KafkaApis.isBrokerEpochStale, KIP-380), and so is one with no epoch (-1, "unknown",
    otherwise let through) or one that arrived while registration never completed: only
    the previous incarnation can have been meant.
    """
    early = ctx.registration.broker_epoch < 0
    if early and not await ctx.registration.wait_registered():
        return ErrorCode.stale_broker_epoch
    epoch = int(request.broker_epoch)
    if epoch == -1:
        return ErrorCode.stale_broker_epoch if early else None
    if broker_epoch_is_stale(epoch, ctx.registration.broker_epoch):
        return ErrorCode.stale_broker_epoch
    return None


def broker_epoch_is_stale(request_epoch: int, registered_epoch: int) -> bool:
    """Kafka's ``KafkaApis.isBrokerEpochStale`` (KIP-380) for a registered broker: a request
    naming an older broker epoch than this incarnation's is stale; -1 (the sender does not
    know it) and newer epochs are not.  The simulated broker applies the same rule."""
    return request_epoch != -1 and request_epoch < registered_epoch
