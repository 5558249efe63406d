"""The Fetch handler over a real ReplicaManager: what a follower's fetches are answered with.

An idle follower's incremental fetch (KIP-227) reads every partition of its session and is
answered with none of them; an append, a high-watermark move or an error brings a partition
back into the answer; the follower's position is recorded once per fetch, when it arrives
(Kafka's ``Partition.fetchRecords`` with ``updateFetchState``), not again when a parked
fetch is completed from the purgatory.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from types import SimpleNamespace

from kio.index import load_request_schema, load_response_schema

from tests.unit.replication.helpers import lead, make_rm
from weir.common import TopicPartition
from weir.protocol import codec
from weir.protocol.errors import ErrorCode
from weir.protocol.fetch_response import FileRegion
from weir.records.builder import build_batch
from weir.replication.partition import LeaderState
from weir.replication.replica_manager import PartitionStateUpdate
from weir.server.fetch_session import FetchSessionCache
from weir.server.handlers import fetch as fetch_handler

VERSION = 12
TPS = [TopicPartition("t", i) for i in range(5)]


def _ctx(rm, cache):
    return SimpleNamespace(
        version=VERSION, replica_manager=rm, fetch_sessions=cache, broker_id=1,
        metadata=SimpleNamespace(topic_by_id=lambda _id: None, partition=lambda _tp: None),
        partition_error=lambda _tp, code: code, config=SimpleNamespace(get=lambda _k: None),
        listener="PLAINTEXT", authorizer=None)


def _request(replica_id, session_id, epoch, offsets, max_wait_ms=0):
    return codec.build(
        load_request_schema(1, VERSION), replica_id=replica_id,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1,
        max_bytes=1 << 20, isolation_level=0, session_id=session_id, session_epoch=epoch,
        rack_id="", forgotten_topics_data=[],
        topics=[{"topic": "t", "partitions": [
            {"partition": tp.partition, "current_leader_epoch": 0, "fetch_offset": offset,
             "last_fetched_epoch": -1, "log_start_offset": 0, "partition_max_bytes": 1 << 20}
            for tp, offset in offsets.items()]}] if offsets else [])


def _decode(raw, version=VERSION):
    chunks = raw.body if isinstance(raw.body, list) else [raw.body]
    body = b""
    for chunk in chunks:
        if isinstance(chunk, FileRegion):
            with open(chunk.path, "rb") as f:
                f.seek(chunk.position)
                body += f.read(chunk.size)
        else:
            body += chunk
    return codec.decode_body(load_response_schema(1, version), body)


def _partitions(response):
    return {TopicPartition(t.topic, int(p.partition_index)): p
            for t in response.responses for p in t.partitions}


def test_idle_incremental_fetches_answer_only_what_changed(tmp_path):
    rm = make_rm(tmp_path)
    for tp in TPS:
        lead(rm, replicas=(1, 2), isr=(1, 2), tp=tp)
    cache = FetchSessionCache()
    ctx = _ctx(rm, cache)

    async def scenario():
        full = _decode(await fetch_handler.handle(ctx, _request(2, 0, 0, dict.fromkeys(TPS, 0))))
        assert int(full.error_code) == 0 and set(_partitions(full)) == set(TPS)
        sid = int(full.session_id)
        idle = _decode(await fetch_handler.handle(ctx, _request(2, sid, 1, {})))
        assert int(idle.session_id) == sid and _partitions(idle) == {}
        # One partition gets records: the leader's next answer carries them, and only them.
        await rm.append(1, 1000, {TPS[3]: build_batch([b"v"])})
        got = _partitions(_decode(await fetch_handler.handle(ctx, _request(2, sid, 2, {}))))
        assert list(got) == [TPS[3]] and got[TPS[3]].records and got[TPS[3]].high_watermark == 0
        # The follower names its new position: the HW moves, and is answered once.
        got = _partitions(_decode(await fetch_handler.handle(
            ctx, _request(2, sid, 3, {TPS[3]: 1}))))
        assert list(got) == [TPS[3]] and got[TPS[3]].high_watermark == 1
        assert not got[TPS[3]].records
        assert _partitions(_decode(await fetch_handler.handle(ctx, _request(2, sid, 4, {})))) == {}
        # This broker stops leading a partition: its error is answered.
        lead(rm, replicas=(1, 2), isr=(1, 2), epoch=1, leader=2, tp=TPS[0])
        got = _partitions(_decode(await fetch_handler.handle(ctx, _request(2, sid, 5, {}))))
        assert list(got) == [TPS[0]]
        assert int(got[TPS[0]].error_code) == ErrorCode.not_leader_or_follower

    asyncio.run(scenario())


def test_a_parked_follower_fetch_records_its_position_when_it_arrives(tmp_path):
    now = [1_000]
    rm = make_rm(tmp_path, clock=lambda: now[0])
    lead(rm, replicas=(1, 2), isr=(1, 2))
    p = rm.partitions[TPS[0]]
    cache = FetchSessionCache()
    ctx = _ctx(rm, cache)

    async def scenario():
        parked = asyncio.ensure_future(fetch_handler.handle(
            ctx, _request(2, 0, -1, {TPS[0]: 0}, max_wait_ms=5_000)))
        await asyncio.sleep(0)
        assert not parked.done() and p.followers[2].last_fetch_ms == 1_000
        now[0] = 4_000
        await rm.append(1, 1000, {TPS[0]: build_batch([b"v"])})  # completes the fetch
        got = _partitions(_decode(await asyncio.wait_for(parked, 5)))
        assert got[TPS[0]].records
        # The completion read did not count as a fetch of the follower at the later time.
        assert p.followers[2].last_fetch_ms == 1_000
        assert p.followers[2].last_fetch_leader_leo == 0

    asyncio.run(scenario())


def test_a_topic_id_resolved_while_a_fetch_waits_is_answered_unknown_by_that_fetch(tmp_path):
    """Fetch v13 (KIP-516): an id unknown to this broker stays in the session; when another
    request of the session resolves it while an earlier one waits, the earlier one answers
    UNKNOWN_TOPIC_ID for it (it was unknown when it read) instead of failing."""
    known, later = uuid.UUID(int=1), uuid.UUID(int=2)
    rm = make_rm(tmp_path)
    lead(rm, replicas=(1, 2), isr=(1, 2), tp=TopicPartition("t", 0))
    lead(rm, replicas=(1, 2), isr=(1, 2), tp=TopicPartition("u", 0))
    ids = {known: "t"}
    cache = FetchSessionCache()
    ctx = _ctx(rm, cache)
    ctx.version = 13
    ctx.metadata.topic_by_id = ids.get

    def request(session_id, epoch, topics, max_wait_ms=0):
        return codec.build(
            load_request_schema(1, 13), replica_id=-1,
            max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1,
            max_bytes=1 << 20, isolation_level=0, session_id=session_id, session_epoch=epoch,
            rack_id="", forgotten_topics_data=[],
            topics=[{"topic_id": tid, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]} for tid in topics])

    async def scenario():
        raw = await fetch_handler.handle(ctx, request(0, 0, [known, later]))
        full = _decode(raw, 13)
        sid = int(full.session_id)
        codes = {t.topic_id: int(t.partitions[0].error_code) for t in full.responses}
        assert codes == {known: 0, later: ErrorCode.unknown_topic_id}
        waiting = asyncio.ensure_future(fetch_handler.handle(
            ctx, request(sid, 1, [], max_wait_ms=300)))
        await asyncio.sleep(0)
        assert not waiting.done()
        ids[later] = "u"  # the broker learns the id (UpdateMetadata)
        await fetch_handler.handle(ctx, request(sid, 2, []))
        raw = await asyncio.wait_for(waiting, 5)
        first = _decode(raw, 13)
        # the waiting fetch was answered; the second request's epoch ran ahead of it
        assert int(first.error_code) in (0, ErrorCode.invalid_fetch_session_epoch)

    asyncio.run(scenario())


def test_a_follower_fetch_names_a_topic_id_the_metadata_cache_has_not_yet(tmp_path):
    """The controller sends LeaderAndIsr before UpdateMetadata: a new topic's follower can
    fetch by id (v13) before the leader's metadata cache knows it.  The leader then knows
    the id from its own partitions' LeaderAndIsr and serves the fetch (a consumer's fetch
    still needs the cache)."""
    tid = uuid.UUID(int=7)
    tp = TopicPartition("fresh", 0)
    rm = make_rm(tmp_path)
    state = LeaderState(leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2],
                        partition_epoch=0, controller_epoch=1)
    rm.apply_leader_and_isr(1, {tp: PartitionStateUpdate(state, tid, True)}, False)
    rm.partitions[tp].log.append_as_leader(build_batch([b"a", b"b"]), 0, 0)
    ctx = _ctx(rm, FetchSessionCache())
    ctx.version = 13

    def request(replica_id):
        return codec.build(
            load_request_schema(1, 13), replica_id=replica_id,
            max_wait=datetime.timedelta(milliseconds=0), min_bytes=1, max_bytes=1 << 20,
            isolation_level=0, session_id=0, session_epoch=-1, rack_id="",
            forgotten_topics_data=[], topics=[{"topic_id": tid, "partitions": [
                {"partition": 0, "current_leader_epoch": 0, "fetch_offset": 0,
                 "last_fetched_epoch": -1, "log_start_offset": 0,
                 "partition_max_bytes": 1 << 20}]}])

    def answer(replica_id):
        body = _decode(asyncio.run(fetch_handler.handle(ctx, request(replica_id))), 13)
        part = body.responses[0].partitions[0]
        return body.responses[0].topic_id, int(part.error_code), part.records

    topic, code, records = answer(2)
    assert (topic, code) == (tid, 0) and records
    assert answer(-1)[1] == ErrorCode.unknown_topic_id


def test_an_unknown_topic_id_is_looked_up_among_hosted_partitions_once_per_fetch(tmp_path):
    """A follower of a deleted topic may keep a thousand of its partitions in its session;
    each fetch scans this broker's partitions for that id once, not once per partition."""
    rm = make_rm(tmp_path)
    lead(rm, replicas=(1, 2), isr=(1, 2), tp=TopicPartition("t", 0))
    scans = []
    hosted = rm.hosted_topic_by_id
    rm.hosted_topic_by_id = lambda tid: scans.append(tid) or hosted(tid)
    ctx = _ctx(rm, FetchSessionCache())
    ctx.version = 13
    gone = uuid.UUID(int=99)

    def request(session_id, epoch, parts):
        return codec.build(
            load_request_schema(1, 13), replica_id=2,
            max_wait=datetime.timedelta(milliseconds=0), min_bytes=1, max_bytes=1 << 20,
            isolation_level=0, session_id=session_id, session_epoch=epoch, rack_id="",
            forgotten_topics_data=[], topics=[{"topic_id": gone, "partitions": [
                {"partition": i, "current_leader_epoch": 0, "fetch_offset": 0,
                 "last_fetched_epoch": -1, "log_start_offset": 0,
                 "partition_max_bytes": 1 << 20} for i in range(parts)]}] if parts else [])

    full = _decode(asyncio.run(fetch_handler.handle(ctx, request(0, 0, 50))), 13)
    assert {int(p.error_code) for p in full.responses[0].partitions} == {
        ErrorCode.unknown_topic_id}
    assert scans == [gone]
    asyncio.run(fetch_handler.handle(ctx, request(int(full.session_id), 1, 0)))
    assert scans == [gone, gone]
