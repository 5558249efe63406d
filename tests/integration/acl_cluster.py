"""A real cluster with Kafka's ACL authorizer on, and the ACL helpers its tests share.

Every client on a PLAINTEXT listener is ``User:ANONYMOUS`` (the brokers too), so the ACLs the
cluster needs before its first request (CLUSTER_ACTION for the brokers' own requests) are
written to ZooKeeper before the brokers start, as Kafka operators bootstrap ACLs with
``kafka-acls.sh --authorizer-properties zookeeper.connect=...``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from weir.coordination.zk import ZkClient
from weir.coordination.zkserver import ZooKeeperServer
from weir.ops.cluster import CHROOT, LocalCluster
from weir.security.acl_store import ZkAclStore
from weir.security.acls import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)

ANONYMOUS = "User:ANONYMOUS"
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "allow.everyone.if.no.acl.found": "false"}


def binding(resource_type: ResourceType, name: str, operation: AclOperation,
            permission: PermissionType = PermissionType.ALLOW,
            pattern: PatternType = PatternType.LITERAL, principal: str = ANONYMOUS,
            host: str = "*") -> tuple[ResourcePattern, AccessControlEntry]:
    return (ResourcePattern(resource_type, name, pattern),
            AccessControlEntry(principal, host, operation, permission))


def cluster_acl(operation: AclOperation) -> tuple[ResourcePattern, AccessControlEntry]:
    return binding(ResourceType.CLUSTER, CLUSTER_NAME, operation)


class AclAdmin:
    """Writes ACLs straight to ZooKeeper with change notifications (brokers pick them up)."""

    def __init__(self, connect: str) -> None:
        self.zk = ZkClient(connect, session_timeout_ms=10000, connection_timeout_ms=10000)
        self.zk.start()
        self.store = ZkAclStore(self.zk)
        self.store.ensure_paths()

    def grant(self, *acls: tuple[ResourcePattern, AccessControlEntry]) -> None:
        for pattern, entry in acls:
            self.store.update(pattern, lambda cur, e=entry: cur | {e})

    def revoke(self, *acls: tuple[ResourcePattern, AccessControlEntry]) -> None:
        for pattern, entry in acls:
            self.store.update(pattern, lambda cur, e=entry: cur - {e})

    def close(self) -> None:
        self.zk.stop()


def start_secure_cluster(data_dir: Path, brokers: int,
                         seed: Iterable[tuple[ResourcePattern, AccessControlEntry]],
                         **overrides: str) -> tuple[LocalCluster, AclAdmin]:
    """ZooKeeper first, the seed ACLs, then the brokers (LocalCluster attaches to the
    ZooKeeper recorded in ``data_dir``)."""
    zk_server = ZooKeeperServer(data_dir / "zookeeper")
    zk_server.start(timeout_s=60)
    admin = None
    cluster = LocalCluster(data_dir, brokers=brokers, port_base=0,
                           overrides={**AUTHORIZER, **overrides})
    try:
        admin = AclAdmin(f"127.0.0.1:{zk_server.port}{CHROOT}")
        admin.grant(*seed)
        cluster.start(timeout_s=90)
    except BaseException:
        if admin is not None:
            admin.close()
        cluster.stop()
        zk_server.stop()
        raise
    return cluster, admin


def eventually(fn: Callable[[], Any], expected: Any, timeout_s: float = 20.0) -> Any:
    """Poll ``fn()`` until it returns ``expected`` (ACL changes reach a broker through a
    ZooKeeper watch); AssertionError with the last value at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = fn()
        if value == expected:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"expected {expected!r}, still {value!r} after {timeout_s}s")
        time.sleep(0.05)
