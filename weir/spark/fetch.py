"""Executor reads through the Kafka Fetch protocol: raw record batches, decoded in bulk.

Instead of a consumer that hands records over one by one, each Spark task speaks the
Kafka protocol itself (:class:`weir.protocol.client.BrokerConnection`): Metadata to find
the partition's leader, Fetch (v12) for whole record batches as bytes, ListOffsets when an
offset is out of range.  The bytes are decoded by :mod:`weir.spark.decode` into Arrow
record batches.  The next fetch is sent before the current response is decoded, so the
broker works while the executor decodes.

Follower fetching (KIP-392): with ``kafka.client.rack`` set, the Fetch carries the rack;
a leader that has a replica in that rack (``replica.selector.class`` =
RackAwareReplicaSelector on the broker) answers with a preferred read replica, and the
task reads from that replica from then on.  A follower that lags, fails or is no longer a
replica sends the task back to the leader.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from typing import Any

from kio.index import load_request_schema

from weir.protocol import codec
from weir.protocol.client import BrokerConnection
from weir.protocol.errors import ErrorCode
from weir.spark.offsets import OffsetRange, report_data_loss

log = logging.getLogger(__name__)

FETCH_VERSION = 12  # topic names (v13 switches to topic ids), rack id and preferred replica
METADATA_VERSION = 9
LIST_OFFSETS_VERSION = 5
EARLIEST_TS, LATEST_TS = -2, -1
DEFAULT_PARTITION_BYTES = 8 * 1024 * 1024
MAX_PARTITION_BYTES = 256 * 1024 * 1024
FETCH_WAIT_MS = 500
RETRY_BACKOFF_S = 0.1

# Client settings (librdkafka names, from kafka.* options) this reader understands; any
# other setting that changes how to connect (TLS, SASL) sends the read to the consumer path.
NATIVE_SAFE = {"bootstrap.servers", "client.id", "client.rack", "max.partition.fetch.bytes",
               "fetch.max.bytes", "fetch.wait.max.ms", "check.crcs"}


def native_supported(client_conf: Mapping[str, str]) -> bool:
    """Whether a read with these client settings can use this reader (plaintext only)."""
    protocol = str(client_conf.get("security.protocol", "plaintext")).lower()
    return protocol == "plaintext" and not any(
        k.startswith(("ssl.", "sasl.")) for k in client_conf)


def parse_bootstrap(raw: str) -> list[tuple[str, int]]:
    out = []
    for item in raw.split(","):
        item = item.strip().rsplit("://", 1)[-1]
        if item:
            host, _, port = item.rpartition(":")
            out.append((host.strip("[]") or "localhost", int(port)))
    return out


class _Loop:
    """An asyncio loop on a daemon thread: the task's generator stays synchronous."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                       name="weir-fetch")
        self.thread.start()

    def submit(self, coro: Any) -> Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Any, timeout_s: float | None = None) -> Any:
        return self.submit(coro).result(timeout_s)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class FetchClient:
    """Connections to the brokers of one cluster and the few requests a reader needs."""

    def __init__(self, client_conf: Mapping[str, str], timeout_s: float = 30.0) -> None:
        self.bootstrap = parse_bootstrap(str(client_conf["bootstrap.servers"]))
        self.client_id = str(client_conf.get("client.id", "weir-spark"))
        self.rack = str(client_conf.get("client.rack", ""))
        self.timeout_s = timeout_s
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[tuple[str, int], tuple[int, int]] = {}  # (leader id, epoch)
        self.replicas: dict[tuple[str, int], tuple[int, ...]] = {}
        self.isr: dict[tuple[str, int], tuple[int, ...]] = {}
        self._conns: dict[tuple[str, int], BrokerConnection] = {}
        self._loop = _Loop()

    # -- connections and requests ---------------------------------------------------------

    async def _conn(self, address: tuple[str, int]) -> BrokerConnection:
        conn = self._conns.get(address)
        if conn is None or not conn.connected:
            conn = BrokerConnection(address[0], address[1], client_id=self.client_id)
            await conn.connect(self.timeout_s)
            self._conns[address] = conn
        return conn

    async def _request(self, address: tuple[str, int], payload: Any,
                       timeout_s: float | None = None) -> Any:
        conn = await self._conn(address)
        return await conn.request(payload, timeout_s or self.timeout_s)

    def address(self, node: int) -> tuple[str, int]:
        if node not in self.brokers:
            raise ConnectionError(f"broker {node} is not in the cluster metadata")
        return self.brokers[node]

    def refresh(self, topic: str | None) -> list[str]:
        """Metadata of ``topic`` (None: every topic) from the first broker that answers;
        returns the topic names it has."""
        cls = load_request_schema(3, METADATA_VERSION)
        request = codec.build(cls, topics=None if topic is None else [{"name": topic}],
                              allow_auto_topic_creation=False)
        errors = []
        for address in [*self.bootstrap, *self.brokers.values()]:
            try:
                response = self._loop.run(self._request(address, request), self.timeout_s + 5)
            except (ConnectionError, OSError, TimeoutError) as exc:
                errors.append(f"{address[0]}:{address[1]}: {exc}")
                continue
            self.brokers = {int(b.node_id): (b.host, int(b.port)) for b in response.brokers}
            for t in response.topics:
                for p in t.partitions:
                    key = (t.name, int(p.partition_index))
                    self.leaders[key] = (int(p.leader_id), int(p.leader_epoch))
                    self.replicas[key] = tuple(int(r) for r in p.replica_nodes)
                    self.isr[key] = tuple(int(r) for r in p.isr_nodes)
            return [t.name for t in response.topics if t.error_code == ErrorCode.none]
        raise ConnectionError("no broker answered Metadata: " + "; ".join(errors))

    def leader(self, topic: str, partition: int) -> int:
        """The partition's leader id, or -1 when it has none (or is unknown)."""
        return self.leaders.get((topic, partition), (-1, -1))[0]

    def fetch(self, node: int, topic: str, partition: int, offset: int, max_bytes: int,
              wait_ms: int = FETCH_WAIT_MS) -> Future:
        """Send a Fetch for one partition; the future resolves to its partition response."""
        cls = load_request_schema(1, FETCH_VERSION)
        request = codec.build(
            cls, replica_id=-1, max_wait=datetime.timedelta(milliseconds=wait_ms), min_bytes=1,
            max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
            rack_id=self.rack, topics=[{"topic": topic, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": max_bytes}]}])

        async def go() -> Any:
            response = await self._request(self.address(node), request,
                                           self.timeout_s + wait_ms / 1000)
            if response.error_code != ErrorCode.none:
                raise ConnectionError(f"Fetch failed: {response.error_code.name}")
            for t in response.responses:
                for p in t.partitions:
                    if t.topic == topic and int(p.partition_index) == partition:
                        return p
            raise ConnectionError(f"Fetch response has no {topic}-{partition}")

        return self._loop.submit(go())

    def list_offset(self, topic: str, partition: int, timestamp: int) -> int:
        """ListOffsets on the leader: earliest (-2), latest (-1) or by timestamp."""
        cls = load_request_schema(2, LIST_OFFSETS_VERSION)
        request = codec.build(cls, replica_id=-1, isolation_level=0, topics=[{
            "name": topic, "partitions": [{"partition_index": partition,
                                           "current_leader_epoch": -1,
                                           "timestamp": timestamp}]}])
        node = self.leader(topic, partition)
        response = self._loop.run(self._request(self.address(node), request),
                                  self.timeout_s + 5)
        part = response.topics[0].partitions[0]
        if part.error_code != ErrorCode.none:
            raise ConnectionError(f"ListOffsets {topic}-{partition}: {part.error_code.name}")
        return int(part.offset)

    def close(self) -> None:
        async def close_all() -> None:
            for conn in self._conns.values():
                await conn.close()

        try:
            self._loop.run(close_all(), 10)
        finally:
            self._loop.stop()


def _next_offset(records: bytes | None) -> int:
    """The offset after the last whole batch in ``records`` (-1 if there is none)."""
    if not records:
        return -1
    view = memoryview(records)
    pos, nxt = 0, -1
    while pos + 61 <= len(view):
        base = int.from_bytes(view[pos:pos + 8], "big", signed=True)
        size = int.from_bytes(view[pos + 8:pos + 12], "big", signed=True) + 12
        if size < 61 or pos + size > len(view):
            break
        nxt = base + int.from_bytes(view[pos + 23:pos + 27], "big", signed=True) + 1
        pos += size
    return nxt


def read_range_native(client_conf: Mapping[str, str], rng: OffsetRange, *,
                      include_headers: bool, fail_on_data_loss: bool,
                      poll_timeout_ms: int) -> Iterator[Any]:
    """Yield ``pyarrow.RecordBatch``es of the records in ``rng`` (Kafka schema).

    Raises DataLossError (``fail_on_data_loss``) when records of the range are gone,
    TimeoutError when no progress is made for ``poll_timeout_ms``.
    """
    if rng.size <= 0:
        return
    client = FetchClient(client_conf)
    try:
        yield from _Reader(client, client_conf, rng, include_headers, fail_on_data_loss,
                           poll_timeout_ms / 1000).run()
    finally:
        client.close()


class _Reader:
    """The fetch loop of one offset range (one Spark task)."""

    def __init__(self, client: FetchClient, conf: Mapping[str, str], rng: OffsetRange,
                 include_headers: bool, fail: bool, timeout_s: float) -> None:
        self.client = client
        self.rng = rng
        self.include_headers = include_headers
        self.fail = fail
        self.timeout_s = timeout_s
        self.check_crc = str(conf.get("check.crcs", "true")).lower() != "false"
        self.max_bytes = int(conf.get("max.partition.fetch.bytes", DEFAULT_PARTITION_BYTES))
        self.wait_ms = int(conf.get("fetch.wait.max.ms", FETCH_WAIT_MS))
        self.node = -1  # where fetches go: the leader or a preferred read replica
        self.position = rng.from_offset
        self.deadline = time.monotonic() + timeout_s
        self.served_by: dict[int, int] = {}  # records read per broker id

    def _fetch(self, offset: int) -> Future:
        return self.client.fetch(self.node, self.rng.topic, self.rng.partition, offset,
                                 self.max_bytes, self.wait_ms)

    def _to_leader(self, why: str) -> None:
        """Re-read metadata and fetch from the leader (after an error or a redirect back)."""
        if time.monotonic() > self.deadline:
            raise TimeoutError(f"no record of {self.rng.tp} could be read for"
                               f" {self.timeout_s:.0f}s at offset {self.position}: {why}")
        log.debug("%s: back to the leader: %s", self.rng.tp, why)
        try:
            self.client.refresh(self.rng.topic)
        except ConnectionError as exc:
            why = f"{why}; {exc}"
        self.node = self.client.leader(self.rng.topic, self.rng.partition)
        if self.node < 0:
            time.sleep(RETRY_BACKOFF_S)  # no leader yet (election under way): back off

    def run(self) -> Iterator[Any]:
        from weir.spark.decode import decode  # numba: imported where records are decoded

        rng = self.rng
        self._to_leader("start")
        pending: Future | None = None
        while self.position < rng.until_offset:
            if self.node < 0:
                self._to_leader("the partition has no leader")
                continue
            asked = self.position
            future = pending if pending is not None else self._fetch(asked)
            pending = None
            try:
                part = future.result(self.client.timeout_s + self.wait_ms / 1000 + 5)
            except (ConnectionError, OSError, TimeoutError) as exc:
                self._to_leader(f"fetch from broker {self.node} failed: {exc}")
                continue
            error = part.error_code
            if error == ErrorCode.offset_out_of_range:
                self._out_of_range()
                continue
            if error != ErrorCode.none:
                self._to_leader(f"broker {self.node} answered {error.name}")
                continue
            preferred = int(part.preferred_read_replica)
            if preferred >= 0 and preferred != self.node:
                log.info("%s: reading from replica %d (rack %s)", rng.tp, preferred,
                         self.client.rack)
                self.node = preferred
                continue
            records = part.records
            nxt = _next_offset(records)
            if nxt < 0:
                self._nothing(records, int(part.high_watermark))
                continue
            if nxt < rng.until_offset:  # fetch the next batches while these are decoded
                pending = self._fetch(nxt)
            decoded = decode(records, rng.topic, rng.partition, asked, rng.until_offset,
                             include_headers=self.include_headers, check_crc=self.check_crc)
            self.position = max(self.position, nxt)
            self.deadline = time.monotonic() + self.timeout_s
            if decoded.batch is not None:
                self.served_by[self.node] = (self.served_by.get(self.node, 0)
                                             + decoded.batch.num_rows)
                yield decoded.batch
        if pending is not None:
            pending.cancel()
        log.debug("%s: read [%d, %d) from brokers %s", rng.tp, rng.from_offset,
                  rng.until_offset, self.served_by)

    def _nothing(self, records: bytes | None, high_watermark: int) -> None:
        """A response without a whole batch: a partial one, a lagging replica, or the end."""
        rng = self.rng
        if records:  # one batch larger than the limit (old brokers cut it)
            if self.max_bytes >= MAX_PARTITION_BYTES:
                raise RuntimeError(f"{rng.tp}: a batch at {self.position} exceeds"
                                   f" {MAX_PARTITION_BYTES} bytes")
            self.max_bytes *= 2
            return
        leader = self.client.leader(rng.topic, rng.partition)
        if self.node != leader:
            self._to_leader(f"replica {self.node} has nothing at {self.position}")
            return
        if 0 <= high_watermark <= self.position:
            report_data_loss(f"{rng.tp}: the log ends at {high_watermark} but offsets up to"
                             f" {rng.until_offset} were expected.", self.fail)
            self.position = rng.until_offset  # the rest of the range is a gap
            return
        if time.monotonic() > self.deadline:
            raise TimeoutError(f"no record of {rng.tp} arrived for {self.timeout_s:.0f}s at"
                               f" offset {self.position} (reading up to {rng.until_offset})")

    def _out_of_range(self) -> None:
        rng = self.rng
        leader = self.client.leader(rng.topic, rng.partition)
        if self.node != leader:  # a follower that is behind: read from the leader
            self._to_leader(f"offset {self.position} is out of range on replica {self.node}")
            return
        try:
            start = self.client.list_offset(rng.topic, rng.partition, EARLIEST_TS)
            end = self.client.list_offset(rng.topic, rng.partition, LATEST_TS)
        except ConnectionError as exc:
            self._to_leader(str(exc))
            return
        if self.position < start:
            report_data_loss(f"{rng.tp}: offsets {self.position} to"
                             f" {min(start, rng.until_offset)} are below the log start offset"
                             f" {start}.", self.fail)
            self.position = min(start, rng.until_offset)
        elif self.position >= end:
            report_data_loss(f"{rng.tp}: the log ends at {end} but offsets up to"
                             f" {rng.until_offset} were expected.", self.fail)
            self.position = rng.until_offset
        else:
            self._to_leader(f"offset {self.position} is out of range on the leader")


SAMPLE_BYTES = 256 * 1024


def sample_bytes_per_record(client_conf: Mapping[str, str], start: Mapping[Any, int],
                            end: Mapping[Any, int]) -> dict[Any, float]:
    """Batch bytes per offset of each partition with records to read, sampled at its start.

    One Fetch of up to 256 KiB per partition (from its leader); the sizes include batch
    headers and compression, as ``maxBytesPerTrigger`` counts what is fetched.  Partitions
    that cannot be sampled are left out (the limit then counts them as one byte a record).
    """
    wanted = {tp: start.get(tp, 0) for tp in end if end[tp] > start.get(tp, 0)}
    if not wanted:
        return {}
    client = FetchClient(client_conf)
    try:
        for topic in sorted({tp.topic for tp in wanted}):
            client.refresh(topic)
        futures = {tp: client.fetch(client.leader(tp.topic, tp.partition), tp.topic,
                                    tp.partition, offset, SAMPLE_BYTES, wait_ms=0)
                   for tp, offset in wanted.items()
                   if client.leader(tp.topic, tp.partition) >= 0}
        sizes = {}
        for tp, future in futures.items():
            try:
                part = future.result(client.timeout_s + 5)
            except (ConnectionError, OSError, TimeoutError) as exc:
                log.warning("%s: could not sample record sizes: %s", tp, exc)
                continue
            records = part.records or b""
            first = int.from_bytes(records[:8], "big", signed=True) if records else -1
            nxt = _next_offset(records)
            if part.error_code == ErrorCode.none and nxt > first >= 0:
                used = _whole_bytes(records)
                sizes[tp] = used / (nxt - first)
        return sizes
    finally:
        client.close()


def _whole_bytes(records: bytes) -> int:
    view = memoryview(records)
    pos = 0
    while pos + 61 <= len(view):
        size = int.from_bytes(view[pos + 8:pos + 12], "big", signed=True) + 12
        if size < 61 or pos + size > len(view):
            break
        pos += size
    return pos
