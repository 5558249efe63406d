"""ZkClient: Kafka's ``KafkaZkClient`` on a kazoo client: znode reads and writes, the
session, and watches.

Synchronous and thread-safe (kazoo's client is); asyncio code calls it through
``asyncio.to_thread``.  Watch and session callbacks run on kazoo's threads: they must only
hand the event over (e.g. ``loop.call_soon_threadsafe``) and never call back into
ZooKeeper from that thread.

What may be written is decided above this class: topic creation, partition additions and
deletion requests by :class:`weir.server.topic_admin.TopicAdmin` (Kafka's
``AdminZkClient``); the controller's writes, each fenced by ``controller_epoch_zk_version``,
are in :mod:`weir.coordination.controller_writes` (mixed in here) over
:mod:`weir.coordination.fenced`.  Large batched reads use ZooKeeper's ``multiRead``
(:mod:`weir.coordination.multi_read`).

A znode whose data cannot be decoded (:class:`ZnodeDataError`) is logged once at ERROR with
its path and what the reader does instead, and then, as Kafka's ``KafkaZkClient`` decoders
do, treated as absent: a broker registration, topic or partition state is skipped, a
``/controller`` names no controller (the election waits until the node goes), configs are
empty, reassignment and preferred-election requests are ignored.  A corrupt
``/controller_epoch`` counts as its znode version (they move together; the next election
writes a valid value).  ``/cluster/id`` and ``/latest_producer_id_block`` have no safe
default: the error reaches the caller.
"""

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import ZnodeStat
from kazoo.retry import KazooRetry

from weir.common import TopicPartition
from weir.coordination import codecs, fenced, paths
from weir.coordination.codecs import BrokerInfo, LeaderIsr, ProducerIdBlock, TopicAssignment
from weir.coordination.controller_writes import ControllerWrites
from weir.coordination.errors import (
    BrokerIdInUseError,
    ControllerMovedError,
    ZkNoNodeError,
    ZkVersionMismatchError,
    ZnodeDataError,
)
from weir.coordination.multi_read import BatchedReader
from weir.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)
_T = TypeVar("_T")

_CONTROLLER_ELECTION_ATTEMPTS = 5


def split_connect(connect: str) -> tuple[str, str]:
    """``"h1:2181,h2:2181/weir"`` → ``("h1:2181,h2:2181", "/weir")``; chroot "" if none."""
    hosts, slash, chroot = connect.partition("/")
    chroot = ("/" + chroot).rstrip("/") if slash else ""
    return hosts, chroot


def _now_ms() -> int:
    return int(time.time() * 1000)


class Watch:
    """A registered watch; :meth:`cancel` stops it at its next event."""

    def __init__(self, path: str, callback: Callable[..., None]) -> None:
        self.path = path
        self._callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def _fire(self, *args: Any) -> bool | None:
        if self.cancelled:
            return False  # kazoo drops a watch whose function returns False
        try:
            self._callback(*args)
        except ZnodeDataError as exc:
            log.error("watch on %s: %s; the change is ignored", self.path, exc)
        except Exception:
            log.exception("watch callback for %s failed", self.path)
        return None

    # kazoo inspects the arity of watch functions (a third parameter gets the event),
    # hence one fixed-arity entry point per kind of watch.
    def _on_children(self, children: list[str]) -> bool | None:
        return self._fire(children)

    def _on_data(self, data: bytes | None, stat: ZnodeStat | None) -> bool | None:
        return self._fire(data, stat)


class ZkClient(ControllerWrites):
    """Kafka's ZooKeeper client for one broker (``zookeeper.connect`` with chroot)."""

    def __init__(
        self,
        connect: str,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int = 18000,
        *,
        client: KazooClient | None = None,
        now_ms: Callable[[], int] = _now_ms,
    ) -> None:
        """``client`` replaces the kazoo client (the simulation's znode-level ensemble,
        :class:`weir.sim.znodes.SimKazoo`); ``now_ms`` is the clock of the timestamps in
        the ``/controller`` and ``/brokers/ids/<id>`` JSON."""
        self.connect = connect
        self._hosts, self.chroot = split_connect(connect)
        self._session_timeout_s = session_timeout_ms / 1000
        self._connection_timeout_s = connection_timeout_ms / 1000
        self._client = client or KazooClient(hosts=connect, timeout=self._session_timeout_s)
        self._now_ms = now_ms
        self._retry = KazooRetry(max_tries=5, delay=0.05, max_delay=1.0, ignore_expire=False)
        self._reads = BatchedReader(self._client)
        self._reported: set[tuple[str, str]] = set()
        # When set, a registered broker's host/port are its endpoint on this listener (Kafka's
        # inter.broker.listener.name: the controller and the replicas connect there).
        self.inter_broker_listener: str | None = None

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def kazoo(self) -> KazooClient:
        """The underlying kazoo client (for recipes this class does not wrap)."""
        return self._client

    def start(self) -> None:
        """Create the chroot if missing, then connect; raises on timeout."""
        if self.chroot:
            self._ensure_chroot()
        try:
            self._client.start(timeout=self._connection_timeout_s)
        except Exception:
            self._client.stop()
            raise

    def _ensure_chroot(self) -> None:
        bootstrap = KazooClient(hosts=self._hosts, timeout=self._session_timeout_s)
        try:
            bootstrap.start(timeout=self._connection_timeout_s)
            bootstrap.ensure_path(self.chroot)
        finally:
            bootstrap.stop()
            bootstrap.close()

    def stop(self) -> None:
        """Close the session (ephemeral nodes go at once) and release kazoo's threads."""
        self._client.stop()
        self._client.close()

    @property
    def session_id(self) -> int | None:
        return self._client.client_id[0] if self._client.client_id else None

    @property
    def connected(self) -> bool:
        return bool(self._client.connected)

    def add_session_listener(self, callback: Callable[[str], None]) -> None:
        """``callback(state)`` with 'CONNECTED', 'SUSPENDED' or 'LOST' (session expired).

        After 'LOST', kazoo reconnects with a new session: re-register the broker (and
        re-run the controller election) on the next 'CONNECTED', off kazoo's thread.
        """

        def listener(state: str) -> None:
            try:
                callback(str(state))
            except Exception:
                log.exception("session listener failed")

        self._client.add_listener(listener)

    def ensure_paths(self) -> None:
        for path in paths.PERSISTENT_PATHS:
            self._retry(self._client.ensure_path, path)

    # -- small helpers -------------------------------------------------------------------

    def _decoded(self, decode: Callable[[], _T], instead: str) -> _T | None:
        """``decode()``, or None after logging a ZnodeDataError and what is done ``instead``.

        The same bad data at the same path is logged at ERROR once, then at DEBUG."""
        try:
            return decode()
        except ZnodeDataError as exc:
            key = (exc.path, exc.reason)
            level = logging.DEBUG if key in self._reported else logging.ERROR
            if len(self._reported) > 10_000:
                self._reported.clear()
            self._reported.add(key)
            log.log(level, "%s; %s", exc, instead)
            return None

    def get_data(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        try:
            return self._retry(self._client.get, path)
        except NoNodeError:
            return None

    def get_children(self, path: str) -> list[str]:
        try:
            return sorted(self._retry(self._client.get_children, path))
        except NoNodeError:
            return []

    def _get_many(self, path_list: Iterable[str]) -> dict[str, tuple[bytes, ZnodeStat]]:
        """Batched reads of the nodes that exist (:class:`BatchedReader`: ``multiRead``)."""
        return self._reads.get_many(path_list)

    def _create_or_get(self, path: str, data: bytes) -> bytes:
        try:
            self._client.create(path, data, makepath=True)
            return data
        except NodeExistsError:
            return self._client.get(path)[0]

    # -- cluster id and producer ids -----------------------------------------------------

    def get_or_create_cluster_id(self) -> str:
        """The cluster id, created if missing; ZnodeDataError if ``/cluster/id`` is corrupt."""
        found = self.get_data(paths.CLUSTER_ID)
        if found is not None:
            return _with_hint(
                lambda: codecs.decode_cluster_id(found[0]),
                "restore it, or delete it to have a new cluster id generated",
            )
        new_id = codecs.topic_id_to_str(uuid.uuid4())
        return codecs.decode_cluster_id(
            self._create_or_get(paths.CLUSTER_ID, codecs.encode_cluster_id(new_id))
        )

    def allocate_producer_id_block(self, broker_id: int, block_size: int = 1000) -> ProducerIdBlock:
        """Claim the next block of producer ids (conditional update, retried on races)."""
        self._client.ensure_path(paths.LATEST_PRODUCER_ID_BLOCK)
        while True:
            data, stat = self._client.get(paths.LATEST_PRODUCER_ID_BLOCK)
            start = 0
            if data:
                start = _with_hint(
                    lambda data=data: codecs.decode_producer_id_block(data),
                    "rewrite it with a block_end above every producer id handed out",
                ).block_end + 1
            block = ProducerIdBlock(broker_id, start, start + block_size - 1)
            try:
                self._client.set(
                    paths.LATEST_PRODUCER_ID_BLOCK,
                    codecs.encode_producer_id_block(block),
                    version=stat.version,
                )
                return block
            except BadVersionError:
                continue

    # -- brokers -------------------------------------------------------------------------

    def register_broker(self, info: BrokerInfo) -> int:
        """Create the ephemeral ``/brokers/ids/<id>``; returns the broker epoch (czxid)."""
        path = paths.broker(info.id)
        data = codecs.encode_broker(info, self._now_ms())
        try:
            _, stat = self._client.create(
                path, data, ephemeral=True, makepath=True, include_data=True
            )
            return int(stat.czxid)
        except NodeExistsError:
            pass
        _, stat = self._client.get(path)
        if stat.ephemeralOwner != self.session_id:
            raise BrokerIdInUseError(info.id, stat.ephemeralOwner) from None
        return int(stat.czxid)  # ours already (a retried create after connection loss)

    def update_broker(self, info: BrokerInfo) -> None:
        """Rewrite this broker's ``/brokers/ids/<id>`` with new endpoints, keeping the znode
        (and so the broker epoch): KafkaZkClient.updateBrokerInfo after a dynamic listener
        change; the controller's data watch on the znode follows."""
        path = paths.broker(info.id)
        _, stat = self._client.get(path)
        if stat.ephemeralOwner != self.session_id:
            raise BrokerIdInUseError(info.id, stat.ephemeralOwner)
        self._client.set(path, codecs.encode_broker(info, self._now_ms()), version=stat.version)

    def get_all_brokers(self) -> dict[int, BrokerInfo]:
        """Registered brokers; one with an undecodable registration is left out."""
        ids = [int(c) for c in self.get_children(paths.BROKER_IDS) if c.isdigit()]
        found = self._get_many(paths.broker(i) for i in ids)
        brokers = {}
        for i in sorted(ids):
            if (p := paths.broker(i)) in found:
                info = self._decode_broker(i, *found[p])
                if info is not None:
                    brokers[i] = info
        return brokers

    def get_broker(self, broker_id: int) -> BrokerInfo | None:
        found = self.get_data(paths.broker(broker_id))
        return None if found is None else self._decode_broker(broker_id, *found)

    def _decode_broker(self, broker_id: int, data: bytes, stat: ZnodeStat) -> BrokerInfo | None:
        info = self._decoded(
            lambda: codecs.decode_broker(broker_id, data, epoch=stat.czxid),
            "the broker is treated as not registered",
        )
        if info is not None and self.inter_broker_listener is not None:
            info = info.on_listener(self.inter_broker_listener)
        return info

    # -- controller ----------------------------------------------------------------------

    def get_controller_id(self) -> int | None:
        """The controller's broker id; None if there is none (or its znode is undecodable:
        then no broker wins an election until the ephemeral node goes)."""
        found = self.get_data(paths.CONTROLLER)
        return self._controller_of(found[0]) if found else None

    def _controller_of(self, data: bytes) -> int | None:
        return self._decoded(
            lambda: codecs.decode_controller(data),
            "no broker is controller until the node is deleted (it goes with its session)",
        )

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """``(controller_epoch, its znode version)``, or None before any election."""
        found = self.get_data(paths.CONTROLLER_EPOCH)
        if found is None:
            return None
        version = int(found[1].version)
        epoch = self._decoded(
            lambda: codecs.decode_controller_epoch(found[0]),
            f"using its znode version {version} as the epoch (the next election rewrites it)",
        )
        return (version if epoch is None else epoch), version

    def try_become_controller(self, broker_id: int) -> tuple[int, int] | None:
        """Elect this broker: ephemeral ``/controller`` plus an epoch bump, atomically.

        Returns ``(controller_epoch, controller_epoch_zk_version)`` on success, None when
        another broker is controller.
        """
        for _ in range(_CONTROLLER_ELECTION_ATTEMPTS):
            epoch, version = self._read_or_init_controller_epoch()
            txn = self._client.transaction()
            txn.create(
                paths.CONTROLLER, codecs.encode_controller(broker_id, self._now_ms()),
                ephemeral=True,
            )
            txn.set_data(
                paths.CONTROLLER_EPOCH, codecs.encode_controller_epoch(epoch + 1), version=version
            )
            created, bumped = txn.commit()
            if isinstance(bumped, ZnodeStat):
                return epoch + 1, int(bumped.version)
            if isinstance(created, NodeExistsError):
                return self._own_controller_epoch(broker_id)
        raise ControllerMovedError("controller epoch kept changing during the election")

    def _read_or_init_controller_epoch(self) -> tuple[int, int]:
        found = self.get_controller_epoch()
        if found is None:
            self._create_or_get(paths.CONTROLLER_EPOCH, codecs.encode_controller_epoch(0))
            found = self.get_controller_epoch()
        assert found is not None
        return found

    def _own_controller_epoch(self, broker_id: int) -> tuple[int, int] | None:
        """After NodeExists: ours (a retried election) gives the epoch, else None."""
        found = self.get_data(paths.CONTROLLER)
        if found is None:
            return None
        data, stat = found
        if self._controller_of(data) != broker_id or stat.ephemeralOwner != self.session_id:
            return None
        return self.get_controller_epoch()

    def resign_controller(self, broker_id: int) -> None:
        """Delete ``/controller`` if this session holds it for ``broker_id``."""
        found = self.get_data(paths.CONTROLLER)
        if found is None:
            return
        data, stat = found
        if self._controller_of(data) == broker_id and stat.ephemeralOwner == self.session_id:
            try:
                self._client.delete(paths.CONTROLLER, version=stat.version)
            except (NoNodeError, BadVersionError):
                pass

    # -- topics --------------------------------------------------------------------------

    def get_topic_names(self) -> list[str]:
        return self.get_children(paths.BROKER_TOPICS)

    def get_topic(self, name: str) -> TopicAssignment | None:
        """The topic's assignment; None if absent or undecodable."""
        found = self.get_data(paths.topic(name))
        return None if found is None else self._decode_topic(name, *found)

    def get_topics(self, names: Iterable[str]) -> dict[str, TopicAssignment]:
        """Assignments of the topics that exist; undecodable ones are left out."""
        names = list(names)
        found = self._get_many(paths.topic(n) for n in names)
        topics = {}
        for n in names:
            if (p := paths.topic(n)) in found:
                assignment = self._decode_topic(n, *found[p])
                if assignment is not None:
                    topics[n] = assignment
        return topics

    def _decode_topic(self, name: str, data: bytes, stat: ZnodeStat) -> TopicAssignment | None:
        return self._decoded(
            lambda: codecs.decode_topic_assignment(name, data, zk_version=stat.version),
            "the topic is treated as absent until the node is rewritten",
        )

    def topic_exists(self, name: str) -> bool:
        """Kafka's ``KafkaZkClient.topicExists``."""
        return self._client.exists(paths.topic(name)) is not None

    def create_topic(
        self,
        name: str,
        partitions: Mapping[int, list[int]],
        configs: Mapping[str, str],
        topic_id: uuid.UUID | None = None,
    ) -> uuid.UUID:
        """Write the topic's config then its assignment, atomically; returns its id.

        Kafka's ``KafkaZkClient.createTopicAssignment`` with the config written in the same
        transaction; TOPIC_ALREADY_EXISTS if ``/brokers/topics/<t>`` is there.  The rules
        (name, collisions, a topic marked for deletion) are :class:`TopicAdmin`'s.
        """
        topic_id = topic_id or uuid.uuid4()
        assignment = TopicAssignment(name, topic_id, {p: list(r) for p, r in partitions.items()})
        config_path = paths.topic_config(name)
        config_op = (
            fenced.set_data(config_path, codecs.encode_config(configs))
            if self._client.exists(config_path)
            else fenced.create(config_path, codecs.encode_config(configs))
        )
        topic_op = fenced.create(paths.topic(name), codecs.encode_topic_assignment(assignment))
        results = fenced.run_fenced(self._client, [config_op, topic_op], None)
        # Another broker's creation of the same topic between the check and this write: its
        # assignment (or its config, written in the same transaction) is there now.
        if isinstance(results[1], NodeExistsError) or (
                isinstance(results[0], NodeExistsError) and self.topic_exists(name)):
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        for op, result in zip((config_op, topic_op), results, strict=True):
            if isinstance(result, Exception):
                raise fenced.to_kafka_error(op, result)
        return topic_id

    def set_topic_assignment(
        self,
        assignment: TopicAssignment,
        expected_version: int = -1,
        controller_epoch_zk_version: int | None = None,
    ) -> int:
        """Overwrite ``/brokers/topics/<t>``; returns the new znode version."""
        op = fenced.set_data(
            paths.topic(assignment.name),
            codecs.encode_topic_assignment(assignment),
            expected_version,
        )
        (result,) = fenced.run_fenced(self._client, [op], controller_epoch_zk_version)
        if isinstance(result, Exception):
            raise fenced.to_kafka_error(op, result)
        return int(result.version)

    # -- configs -------------------------------------------------------------------------

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        """``/config/<entity_type>/<name>`` (entity_type 'topics', 'brokers', ...)."""
        path = f"{paths.CONFIG}/{entity_type}/{name}"
        found = self.get_data(path)
        return self._decode_config(path, found[0]) if found else {}

    def _decode_config(self, path: str, data: bytes) -> dict[str, str]:
        decoded = self._decoded(
            lambda: codecs.decode_config(data, path=path), "no config overrides are applied"
        )
        return decoded or {}

    def set_entity_config(self, entity_type: str, name: str, configs: Mapping[str, str]) -> None:
        """Replace an entity's config overrides and post a config change notification."""
        path = f"{paths.CONFIG}/{entity_type}/{name}"
        data = codecs.encode_config(configs)
        try:
            self._client.set(path, data)
        except NoNodeError:
            self._client.create(path, data, makepath=True)
        self._client.create(
            paths.CONFIG_CHANGE_PREFIX,
            codecs.encode_config_change(f"{entity_type}/{name}"),
            sequence=True,
            makepath=True,
        )

    def get_topic_config(self, name: str) -> dict[str, str]:
        return self.get_entity_config("topics", name)

    def get_topic_configs(self, names: Iterable[str]) -> dict[str, dict[str, str]]:
        """:meth:`get_topic_config` of each topic, in one batched read."""
        names = list(names)
        found = self._get_many(f"{paths.CONFIG}/topics/{n}" for n in names)
        return {
            n: self._decode_config(p, found[p][0]) if (p := f"{paths.CONFIG}/topics/{n}") in found
            else {}
            for n in names
        }

    def set_topic_config(self, name: str, configs: Mapping[str, str]) -> None:
        self.set_entity_config("topics", name, configs)

    # -- partition states ----------------------------------------------------------------

    def get_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsr]:
        """Leader/ISR of each partition that has a state znode (batched reads)."""
        tps = list(partitions)
        found = self._get_many(paths.partition_state(*tp) for tp in tps)
        states = {}
        for tp in tps:
            if (p := paths.partition_state(*tp)) not in found:
                continue
            data, stat = found[p]
            state = self._decoded(
                lambda p=p, data=data, stat=stat: codecs.decode_leader_isr(
                    data, zk_version=stat.version, mzxid=stat.mzxid, path=p
                ),
                "the partition is treated as having no leader and ISR",
            )
            if state is not None:
                states[tp] = state
        return states

    # -- topic deletion ------------------------------------------------------------------

    def mark_topic_for_deletion(self, name: str) -> None:
        """Create ``/admin/delete_topics/<t>`` (idempotent; Kafka's ``createDeleteTopicPath``).

        Whether the topic may be deleted is :class:`TopicAdmin`'s rule."""
        try:
            self._client.create(paths.delete_topic(name), b"", makepath=True)
        except NodeExistsError:
            pass

    def is_topic_marked_for_deletion(self, name: str) -> bool:
        """Kafka's ``KafkaZkClient.isTopicMarkedForDeletion``."""
        return self._client.exists(paths.delete_topic(name)) is not None

    def get_topics_to_delete(self) -> list[str]:
        return self.get_children(paths.DELETE_TOPICS)

    # -- admin: reassignment and preferred election --------------------------------------

    def get_reassignments(self) -> dict[TopicPartition, list[int]]:
        found = self.get_data(paths.REASSIGN_PARTITIONS)
        if not found or not found[0]:
            return {}
        decoded = self._decoded(
            lambda: codecs.decode_reassignment(found[0]), "the reassignment request is ignored"
        )
        return decoded or {}

    def create_reassignments(self, reassignment: Mapping[TopicPartition, list[int]]) -> None:
        """Admin side: start a reassignment; REASSIGNMENT_IN_PROGRESS if one is running."""
        try:
            self._client.create(
                paths.REASSIGN_PARTITIONS, codecs.encode_reassignment(reassignment), makepath=True
            )
        except NodeExistsError:
            raise KafkaError(
                ErrorCode.reassignment_in_progress, "a partition reassignment is in progress"
            ) from None

    def get_preferred_election(self) -> set[TopicPartition]:
        found = self.get_data(paths.PREFERRED_REPLICA_ELECTION)
        if not found or not found[0]:
            return set()
        decoded = self._decoded(
            lambda: codecs.decode_preferred_election(found[0]), "the election request is ignored"
        )
        return decoded or set()

    def create_preferred_election(self, partitions: Iterable[TopicPartition]) -> None:
        """Admin side: request a preferred-leader election for ``partitions``."""
        try:
            self._client.create(
                paths.PREFERRED_REPLICA_ELECTION,
                codecs.encode_preferred_election(partitions),
                makepath=True,
            )
        except NodeExistsError:
            raise KafkaError(
                ErrorCode.unknown_server_error, "a preferred replica election is in progress"
            ) from None

    # -- log dir event notifications (JBOD, KIP-112) ----------------------------------------

    def propagate_log_dir_event(self, broker_id: int) -> str:
        """A broker's log dir failed: a sequential notification for the controller."""
        return self._retry(self._client.create, paths.LOG_DIR_EVENT_PREFIX,
                           codecs.encode_log_dir_event(broker_id), sequence=True,
                           makepath=True)

    def get_log_dir_events(self) -> dict[str, int]:
        """Notification name → broker id (unreadable ones are logged and left out)."""
        names = self.get_children(paths.LOG_DIR_EVENT_NOTIFICATION)
        found = self._get_many(f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{n}" for n in names)
        events = {}
        for name in names:
            path = f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{name}"
            if path in found:
                broker = self._decoded(
                    lambda p=path: codecs.decode_log_dir_event(found[p][0], path=p),
                    "ignoring it")
                if broker is not None:
                    events[name] = broker
        return events

    # -- watches -------------------------------------------------------------------------

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> Watch:
        """``callback(children)`` now and after every change of ``path``'s children.

        ``path`` is created if missing (a children watch needs the parent).
        """
        self._retry(self._client.ensure_path, path)
        watch = Watch(path, lambda children: callback(sorted(children)))
        self._client.ChildrenWatch(path, watch._on_children)  # kazoo's recipe
        return watch

    def watch_data(
        self, path: str, callback: Callable[[bytes | None, ZnodeStat | None], None]
    ) -> Watch:
        """``callback(data, stat)`` now and on every change, creation and deletion
        (``(None, None)`` while the node does not exist)."""
        watch = Watch(path, callback)
        self._client.DataWatch(path, watch._on_data)  # kazoo's recipe
        return watch

    def watch_broker(self, broker_id: int, callback: Callable[[], None]) -> Watch:
        """``callback()`` whenever ``/brokers/ids/<id>`` is rewritten in place (same znode,
        a new version: :meth:`update_broker`), not for its creation or deletion."""
        czxid: list[int] = []

        def on_data(_data: bytes | None, stat: ZnodeStat | None) -> None:
            if stat is None:
                czxid.clear()
            elif czxid and czxid[0] == stat.czxid:
                callback()
            else:
                czxid[:] = [stat.czxid]
        return self.watch_data(paths.broker(broker_id), on_data)

    def watch_exists(self, path: str, callback: Callable[[ZnodeStat | None], None]) -> Watch:
        """``callback(stat or None)`` now and whenever ``path`` appears, changes or goes."""
        watch = Watch(path, lambda _data, stat: callback(stat))
        self._client.DataWatch(path, watch._on_data)  # kazoo's recipe
        return watch


def _with_hint(decode: Callable[[], _T], hint: str) -> _T:
    """``decode()``; a ZnodeDataError gets ``hint`` (how to repair the node) appended."""
    try:
        return decode()
    except ZnodeDataError as exc:
        raise ZnodeDataError(exc.path, f"{exc.reason}; {hint}") from exc


__all__ = [
    "ControllerMovedError",
    "Watch",
    "ZkClient",
    "ZkNoNodeError",
    "ZkVersionMismatchError",
    "split_connect",
]
