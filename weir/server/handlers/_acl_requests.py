"""What CreateAcls, DescribeAcls and DeleteAcls share: wire values to ACL objects, and
Kafka's checks before them (ALTER or DESCRIBE on the cluster, SECURITY_DISABLED without an
authorizer, as Kafka's AclApis)."""

from __future__ import annotations

from typing import Any

from weir.protocol.errors import ErrorCode
from weir.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    from_code,
)
from weir.server import authz


def refusal(ctx, operation: AclOperation) -> tuple[ErrorCode, str] | None:
    """The error for the whole request, or None when it may go on."""
    if not authz.authorize_cluster(ctx, operation):
        return (ErrorCode.cluster_authorization_failed,
                "Cluster authorization failed.")
    if not authz.enabled(ctx):
        return ErrorCode.security_disabled, "No Authorizer is configured on the broker"
    return None


def binding_of(creation: Any) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType(from_code(ResourceType, creation.resource_type)),
                        creation.resource_name,
                        PatternType(from_code(PatternType, getattr(
                            creation, "resource_pattern_type", PatternType.LITERAL)))),
        AccessControlEntry(creation.principal, creation.host,
                           AclOperation(from_code(AclOperation, creation.operation)),
                           PermissionType(from_code(PermissionType,
                                                    creation.permission_type))))


def filter_of(f: Any) -> AclBindingFilter:
    return AclBindingFilter(
        resource_type=ResourceType(from_code(ResourceType, f.resource_type_filter)),
        name=f.resource_name_filter,
        # v0 has no pattern type: its filters and ACLs are LITERAL (KIP-290).
        pattern_type=PatternType(from_code(PatternType, getattr(f, "pattern_type_filter",
                                                                 PatternType.LITERAL))),
        principal=f.principal_filter,
        host=f.host_filter,
        operation=AclOperation(from_code(AclOperation, f.operation)),
        permission=PermissionType(from_code(PermissionType, f.permission_type)),
    )
