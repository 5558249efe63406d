"""The console's own Kafka client: Weir's asyncio protocol client and kio's request types.

The console process holds no client library with native code: a broker that dies, restarts
or answers garbage is an exception here (``ConnectionError``, ``TimeoutError``), turned into
a value on the page, never an abort of the process.  Requests go where Kafka's AdminClient
sends them: Metadata to any broker, ListOffsets and Fetch to the partition's leader,
DescribeConfigs of a broker and DescribeLogDirs to that broker, group requests to the
group's coordinator (FindCoordinator), ElectLeaders and reassignments to the controller.

On a secured cluster the connections authenticate with the settings of a
``client.properties`` (:func:`security_from_properties`: TLS truststore, SASL mechanism,
username and password).
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Iterable, Mapping
from typing import Any

from kio.index import load_request_schema

from weir.protocol import codec
from weir.protocol.client import BrokerConnections
from weir.protocol.errors import ErrorCode

METADATA_V = 9
LIST_OFFSETS_V = 5
FETCH_V = 12
DESCRIBE_CONFIGS_V = 4
DESCRIBE_LOG_DIRS_V = 4
FIND_COORDINATOR_V = 3
LIST_GROUPS_V = 4
DESCRIBE_GROUPS_V = 5
OFFSET_FETCH_V = 7
OFFSET_COMMIT_V = 8
EARLIEST, LATEST = -2, -1
BROKER_RESOURCE, TOPIC_RESOURCE = 4, 2


class AdminError(Exception):
    """A request that failed as a whole; the text names Kafka's error or the network fault."""


def error_name(code: Any) -> str | None:
    """Kafka's name of an error code (``NOT_LEADER_OR_FOLLOWER``); None for no error."""
    value = int(code)
    if value == 0:
        return None
    try:
        return ErrorCode(value).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{value}"


def error_text(code: Any, message: str | None = None) -> str | None:
    name = error_name(code)
    if name is None:
        return None
    return f"{name}: {message}" if message else name


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    out = []
    for item in text.split(","):
        item = item.strip().rsplit("://", 1)[-1]
        if not item:
            continue
        host, _, port = item.rpartition(":")
        try:
            out.append((host.strip("[]") or "127.0.0.1", int(port)))
        except ValueError:
            raise ValueError(f"not HOST:PORT: {item!r}") from None
    if not out:
        raise ValueError("no bootstrap server given")
    return out


def security_from_properties(props: Mapping[str, str]) -> Any:
    """The connection security a ``client.properties`` describes (None for PLAINTEXT):
    ``security.protocol``, the ``ssl.truststore.*`` (or librdkafka's ``ssl.ca.location``) and
    ``sasl.mechanism`` with ``sasl.username``/``sasl.password`` or a ``sasl.jaas.config``."""
    from weir.security import tls
    from weir.security.client import InterBrokerSecurity
    from weir.security.jaas import parse_jaas_config

    protocol = str(props.get("security.protocol", "PLAINTEXT")).upper()
    if protocol == "PLAINTEXT":
        return None
    context = None
    if protocol.endswith("SSL"):
        values = dict(props)
        if "ssl.truststore.location" not in values and "ssl.ca.location" in values:
            values["ssl.truststore.location"] = values["ssl.ca.location"]
            values["ssl.truststore.type"] = "PEM"
        context = tls.client_context(tls.TlsSettings.from_lookup(values.get))
    if not protocol.startswith("SASL_"):
        return InterBrokerSecurity(protocol, context)
    mechanism = str(props.get("sasl.mechanism", "GSSAPI")).upper()
    username, password = props.get("sasl.username"), props.get("sasl.password")
    if (username is None or password is None) and props.get("sasl.jaas.config"):
        login = parse_jaas_config(props["sasl.jaas.config"])
        username, password = login.username, login.password
    if username is None or password is None:
        raise ValueError("client properties name a SASL protocol but no sasl.username and "
                         "sasl.password (or sasl.jaas.config)")
    return InterBrokerSecurity(protocol, context, mechanism, username, password)


def _ms(value: float) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=int(value))


class ConsoleAdmin:
    """Connections to one cluster's brokers, kept open and reopened after a failure."""

    def __init__(self, bootstrap: str, security: Any = None, timeout_s: float = 5.0,
                 client_id: str = "weir-console") -> None:
        self.bootstrap = bootstrap
        self._seeds = parse_bootstrap(bootstrap)
        self.security = security
        self.timeout_s = timeout_s
        self.client_id = client_id
        self.brokers: dict[int, tuple[str, int]] = {}
        self.controller_id: int | None = None
        # One connection per broker address, opened on first use, dropped on a failure.
        self._pool = BrokerConnections(lambda address: address, client_id, security=security,
                                       connect_timeout_s=timeout_s)
        self._last_good: tuple[str, int] | None = None  # tried first: a frozen broker
        # early in the list would otherwise cost a timeout on every read

    # -- connections -------------------------------------------------------------------

    async def send(self, address: tuple[str, int], payload: Any,
                   timeout_s: float | None = None) -> Any:
        """One request to ``address``; a failure drops the connection and is raised as
        ConnectionError or TimeoutError."""
        try:
            response = await self._pool.request(address, payload, timeout_s or self.timeout_s)
        except (ConnectionError, OSError, TimeoutError) as exc:
            if isinstance(exc, TimeoutError):
                raise TimeoutError(f"{address[0]}:{address[1]} did not answer within "
                                   f"{timeout_s or self.timeout_s:g} s") from None
            raise ConnectionError(f"{address[0]}:{address[1]}: {exc}") from None
        self._last_good = address
        return response

    async def to_any(self, payload: Any, timeout_s: float | None = None) -> Any:
        """A request any broker can answer (DescribeConfigs of a topic, FindCoordinator,
        DescribeAcls, ...): the broker that answered last first, then the others."""
        if not self.brokers:
            await self.metadata([])
        addresses = list(dict.fromkeys(
            [a for a in (self._last_good,) if a in self.brokers.values()]
            + [self.brokers[b] for b in sorted(self.brokers)]))
        if not addresses:
            raise AdminError("the cluster metadata names no broker")
        errors = []
        for address in addresses:
            try:
                return await self.send(address, payload, timeout_s)
            except (ConnectionError, TimeoutError) as exc:
                errors.append(str(exc))
        raise AdminError("no broker answered (" + "; ".join(errors) + ")")

    async def to_broker(self, broker_id: int, payload: Any, timeout_s: float | None = None
                        ) -> Any:
        address = self.brokers.get(broker_id)
        if address is None:
            raise ConnectionError(f"broker {broker_id} is not in the cluster metadata")
        return await self.send(address, payload, timeout_s)

    async def close(self) -> None:
        await self._pool.close()

    # -- metadata --------------------------------------------------------------------------

    async def metadata(self, topics: Iterable[str] | None = None) -> Any:
        """Metadata (all topics, or ``topics``) from the first broker that answers; the
        brokers and controller id are remembered for routing."""
        cls = load_request_schema(3, METADATA_V)
        request = codec.build(cls, topics=None if topics is None else
                              [{"name": t} for t in topics], allow_auto_topic_creation=False)
        errors = []
        candidates = list(dict.fromkeys([*(a for a in (self._last_good,) if a),
                                         *self.brokers.values(), *self._seeds]))
        for address in candidates:
            try:
                response = await self.send(address, request)
            except (ConnectionError, TimeoutError) as exc:
                errors.append(str(exc))
                continue
            self.brokers = {int(b.node_id): (b.host, int(b.port)) for b in response.brokers}
            self.controller_id = int(response.controller_id)
            return response
        raise AdminError("no broker answered Metadata (" + "; ".join(errors) + ")")

    # -- offsets -----------------------------------------------------------------------------

    async def list_offsets(self, leaders: Mapping[tuple[str, int], int], timestamp: int
                           ) -> dict[tuple[str, int], int | str]:
        """ListOffsets of each partition on its leader: an offset, or Kafka's error name
        (a leader that cannot be reached: its network error)."""
        by_leader: dict[int, list[tuple[str, int]]] = {}
        out: dict[tuple[str, int], int | str] = {}
        for tp, leader in leaders.items():
            if leader < 0:
                out[tp] = "LEADER_NOT_AVAILABLE"
            else:
                by_leader.setdefault(leader, []).append(tp)
        cls = load_request_schema(2, LIST_OFFSETS_V)

        async def one(leader: int, tps: list[tuple[str, int]]) -> None:
            topics: dict[str, list[dict[str, Any]]] = {}
            for t, p in sorted(tps):
                topics.setdefault(t, []).append({"partition_index": p,
                                                 "current_leader_epoch": -1,
                                                 "timestamp": timestamp})
            request = codec.build(cls, replica_id=-1, isolation_level=0, topics=[
                {"name": t, "partitions": parts} for t, parts in topics.items()])
            try:
                response = await self.to_broker(leader, request)
            except (ConnectionError, TimeoutError) as exc:
                out.update({tp: f"NETWORK_EXCEPTION: {exc}" for tp in tps})
                return
            for t in response.topics:
                for p in t.partitions:
                    err = error_name(p.error_code)
                    out[(t.name, int(p.partition_index))] = err or int(p.offset)

        await asyncio.gather(*(one(b, tps) for b, tps in by_leader.items()))
        return out

    async def fetch(self, leader: int, topic: str, partition: int, offset: int,
                    max_bytes: int) -> Any:
        """One Fetch of one partition from its leader (no wait): its partition response."""
        cls = load_request_schema(1, FETCH_V)
        request = codec.build(
            cls, replica_id=-1, max_wait=_ms(0), min_bytes=0, max_bytes=max_bytes,
            isolation_level=0, session_id=0, session_epoch=-1, rack_id="",
            topics=[{"topic": topic, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": max_bytes}]}])
        response = await self.to_broker(leader, request)
        if int(response.error_code):
            raise AdminError(f"Fetch: {error_name(response.error_code)}")
        for t in response.responses:
            for p in t.partitions:
                if int(p.partition_index) == partition:
                    return p
        raise AdminError(f"the Fetch response has no {topic}-{partition}")

    # -- configs and log dirs ----------------------------------------------------------------

    async def describe_configs(self, resource_type: int, name: str,
                               broker_id: int | None = None) -> list[dict[str, Any]]:
        """DescribeConfigs with synonyms (each entry's source, as ``weir config get
        --all``); a broker's own configs are asked of that broker."""
        cls = load_request_schema(32, DESCRIBE_CONFIGS_V)
        request = codec.build(cls, include_synonyms=True, include_documentation=False,
                              resources=[{"resource_type": resource_type,
                                          "resource_name": name, "configuration_keys": None}])
        response = await (self.to_any(request) if broker_id is None
                          else self.to_broker(broker_id, request))
        result = response.results[0]
        err = error_text(result.error_code, result.error_message)
        if err:
            raise AdminError(f"DescribeConfigs {name}: {err}")
        return [{"name": c.name, "value": None if c.is_sensitive else c.value,
                 "source": config_source(int(c.config_source)), "sensitive": c.is_sensitive,
                 "read_only": c.read_only,
                 "synonyms": [{"name": s.name, "value": s.value,
                               "source": config_source(int(s.source))} for s in c.synonyms]}
                for c in sorted(result.configs, key=lambda c: c.name)]

    async def any_broker(self) -> int:
        if not self.brokers:
            await self.metadata([])
        if not self.brokers:
            raise AdminError("the cluster metadata names no broker")
        return min(self.brokers)

    async def describe_log_dirs(self, broker_id: int) -> Any:
        cls = load_request_schema(35, DESCRIBE_LOG_DIRS_V)
        return await self.to_broker(broker_id, codec.build(cls, topics=None))

    # -- groups ----------------------------------------------------------------------------

    async def list_groups(self) -> tuple[list[dict[str, str]], list[str]]:
        """ListGroups of every broker (as Kafka's AdminClient.listConsumerGroups):
        the groups, and the brokers that failed to answer."""
        cls = load_request_schema(16, LIST_GROUPS_V)
        request = codec.build(cls, states_filter=[])
        found: dict[str, dict[str, str]] = {}
        errors: list[str] = []

        async def one(broker_id: int) -> None:
            try:
                response = await self.to_broker(broker_id, request)
            except (ConnectionError, TimeoutError) as exc:
                errors.append(f"broker {broker_id}: {exc}")
                return
            if int(response.error_code):
                errors.append(f"broker {broker_id}: {error_name(response.error_code)}")
                return
            for g in response.groups:
                found[g.group_id] = {"group": g.group_id, "state": g.group_state,
                                     "protocol_type": g.protocol_type}

        await asyncio.gather(*(one(b) for b in sorted(self.brokers)))
        return sorted(found.values(), key=lambda g: g["group"]), errors

    async def coordinator(self, group: str) -> tuple[str, int]:
        cls = load_request_schema(10, FIND_COORDINATOR_V)
        request = codec.build(cls, key=group, key_type=0)
        response = await self.to_any(request)
        err = error_text(response.error_code, response.error_message)
        if err:
            raise AdminError(f"FindCoordinator {group}: {err}")
        return response.host, int(response.port)

    async def describe_group(self, group: str) -> tuple[Any, dict[tuple[str, int], int]]:
        """DescribeGroups and OffsetFetch (every committed offset) on the coordinator."""
        address = await self.coordinator(group)
        described = await self.send(address, codec.build(
            load_request_schema(15, DESCRIBE_GROUPS_V), groups=[group],
            include_authorized_operations=False))
        desc = described.groups[0]
        err = error_name(desc.error_code)
        if err:
            raise AdminError(f"DescribeGroups {group}: {err}")
        fetched = await self.send(address, codec.build(
            load_request_schema(9, OFFSET_FETCH_V), group_id=group, topics=None,
            require_stable=False))
        if int(fetched.error_code):
            raise AdminError(f"OffsetFetch {group}: {error_name(fetched.error_code)}")
        committed = {(t.name, int(p.partition_index)): int(p.committed_offset)
                     for t in fetched.topics for p in t.partitions
                     if int(p.committed_offset) >= 0}
        return desc, committed

    async def commit_offsets(self, group: str, offsets: Mapping[tuple[str, int], int]
                             ) -> dict[tuple[str, int], str | None]:
        """OffsetCommit as an admin (generation -1, no member): only accepted by a group
        without active members, as Kafka's alterConsumerGroupOffsets."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for (t, p), off in sorted(offsets.items()):
            topics.setdefault(t, []).append({"partition_index": p, "committed_offset": off,
                                             "committed_leader_epoch": -1,
                                             "committed_metadata": ""})
        request = codec.build(load_request_schema(8, OFFSET_COMMIT_V), group_id=group,
                              generation_id_or_member_epoch=-1, member_id="",
                              group_instance_id=None, topics=[
                                  {"name": t, "partitions": ps} for t, ps in topics.items()])
        response = await self.send(await self.coordinator(group), request)
        return {(t.name, int(p.partition_index)): error_name(p.error_code)
                for t in response.topics for p in t.partitions}

    # -- security ----------------------------------------------------------------------------

    async def describe_acls(self) -> Any:
        """DescribeAcls v3 matching every binding (resource type ANY, pattern ANY)."""
        request = codec.build(load_request_schema(29, 3), resource_type_filter=1,
                              resource_name_filter=None, pattern_type_filter=1,
                              principal_filter=None, host_filter=None, operation=1,
                              permission_type=1)
        return await self.to_any(request)

    async def describe_scram_users(self) -> Any:
        request = codec.build(load_request_schema(50, 0), users=None)
        return await self.to_any(request)

    # -- controller requests (actions) ---------------------------------------------------------

    async def to_controller(self, payload: Any) -> Any:
        """A request to the controller, found again when it answers NOT_CONTROLLER."""
        last = "no controller known"
        for _ in range(3):
            await self.metadata([])
            if self.controller_id is None or self.controller_id not in self.brokers:
                last = "the cluster has no controller now"
                continue
            response = await self.to_broker(self.controller_id, payload, self.timeout_s * 3)
            code = getattr(response, "error_code", 0)
            if int(code) != int(ErrorCode.not_controller):
                return response
            last = "NOT_CONTROLLER"
        raise AdminError(f"could not reach the controller: {last}")


CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG",
                  5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
                  7: "CLIENT_METRICS_CONFIG"}


def config_source(value: int) -> str:
    """Kafka's ``ConfigEntry.ConfigSource`` name of a DescribeConfigs source."""
    return CONFIG_SOURCES.get(value, f"SOURCE_{value}")
