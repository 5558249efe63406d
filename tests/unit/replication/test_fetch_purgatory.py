"""The leader's data path without waste: a parked fetch re-checks only the partition that
changed (Kafka's DelayedFetch), and an ``acks=1`` append needs no coroutine."""

from __future__ import annotations

import asyncio

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode
from weir.records.builder import build_batch
from weir.replication.local_reads import FetchPartition
from weir.replication.purgatory import Purgatory

from .helpers import TP, lead, make_rm, run


def test_per_key_check_sees_only_the_notified_key():
    seen: list[object] = []

    async def scenario() -> tuple[bool, bool]:
        purgatory = Purgatory()

        def check(key) -> bool:
            seen.append(key)
            return key == "b"

        waiting = asyncio.create_task(purgatory.wait(["a", "b", "c"], check, 5, per_key=True))
        await asyncio.sleep(0)
        assert seen == []  # the caller had checked: no walk of every key on entry
        purgatory.notify("a")
        purgatory.notify("x")  # not watched
        assert not waiting.done()
        purgatory.notify("b")
        first = await asyncio.wait_for(waiting, 2)
        # at the timeout nothing is checked: the caller reads again anyway
        timed_out = await purgatory.wait(["a"], check, 0.01, per_key=True)
        return first, timed_out

    assert run(scenario()) == (True, False)
    assert seen == ["a", "b"]


def test_a_check_that_completes_its_own_waiter_is_not_completed_twice():
    """Reading a partition in a check can take its log dir offline, which notifies every
    waiter (this one too) before the check returns (found by a disk-fault simulation:
    InvalidStateError out of an append)."""
    async def scenario() -> bool:
        purgatory = Purgatory()
        calls = {"n": 0}

        def check(key) -> bool:
            calls["n"] += 1
            if calls["n"] == 1:
                purgatory.notify_all()  # the dir failure's notification, re-entrant
            return True

        waiting = asyncio.create_task(purgatory.wait(["a"], check, 5, per_key=True))
        await asyncio.sleep(0)
        purgatory.notify("a")
        return await asyncio.wait_for(waiting, 2)

    assert run(scenario())


def test_parked_follower_fetch_probes_only_the_appended_partition(tmp_path):
    rm = make_rm(tmp_path)
    tps = [TopicPartition("t", i) for i in range(50)]
    for tp in tps:
        lead(rm, replicas=(1, 2), isr=(1, 2), tp=tp)
    probed: list[TopicPartition] = []
    read_one = rm.reads._read_for_follower  # one partition of a follower's fetch

    def counting(replica_id, req, *args, **kwargs):
        probed.append(req.tp)
        return read_one(replica_id, req, *args, **kwargs)

    rm.reads._read_for_follower = counting
    batch = build_batch([b"x" * 100])

    async def scenario():
        requests = [FetchPartition(tp, 0, 1 << 20) for tp in tps]
        fetch = asyncio.create_task(rm.reads.fetch(2, 5000, 2 * len(batch), 1 << 20, requests))
        await asyncio.sleep(0)
        assert not fetch.done() and len(probed) == len(tps)  # the first read only
        probed.clear()
        await rm.append(1, 1000, {tps[7]: batch})
        assert probed == [tps[7]] and not fetch.done()  # one batch: below min.bytes
        await rm.append(1, 1000, {tps[30]: batch})  # the bytes of both reach min.bytes
        return await asyncio.wait_for(fetch, 2)

    out = run(scenario())
    assert {tp for tp, r in out.items() if r.size} == {tps[7], tps[30]}


def test_parked_fetch_answers_at_once_when_a_partition_fails(tmp_path):
    rm = make_rm(tmp_path)
    other = TopicPartition("t", 1)
    lead(rm)
    lead(rm, tp=other)

    async def scenario():
        fetch = asyncio.create_task(rm.reads.fetch(-1, 5000, 1 << 20, 1 << 20, [
            FetchPartition(TP, 0, 1 << 20), FetchPartition(other, 0, 1 << 20)]))
        await asyncio.sleep(0)
        lead(rm, tp=other, leader=3, epoch=1)  # no longer the leader here
        return await asyncio.wait_for(fetch, 2)

    out = run(scenario())
    assert out[other].error == ErrorCode.not_leader_or_follower


def test_append_now_is_append_without_a_coroutine(tmp_path):
    rm = make_rm(tmp_path)
    lead(rm)
    first, wait = rm.append_now(1, 1000, {TP: build_batch(
        [b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0)})
    assert wait is None and (first[TP].error, first[TP].base_offset) == (ErrorCode.none, 0)
    gap = build_batch([b"c"], producer_id=7, producer_epoch=0, base_sequence=5)
    results, wait = rm.append_now(1, 1000, {TP: gap})
    assert wait is None and results[TP].error == ErrorCode.out_of_order_sequence_number
    # acks=all with this broker the only replica: replicated at once, nothing to wait for
    results, wait = rm.append_now(-1, 1000, {TP: build_batch([b"d"])})
    assert wait is None and (results[TP].error, results[TP].base_offset) == (ErrorCode.none, 2)
    assert rm.partitions[TP].log.high_watermark == 3


def test_append_now_acks_all_returns_the_wait_for_followers(tmp_path):
    rm = make_rm(tmp_path)
    lead(rm, replicas=(1, 2), isr=(1, 2))

    async def scenario():
        results, wait = rm.append_now(-1, 5000, {TP: build_batch([b"a"])})
        assert wait is not None and rm.partitions[TP].log.log_end_offset == 1
        waiting = asyncio.create_task(wait)
        await asyncio.sleep(0)
        assert not waiting.done()
        await rm.reads.fetch(2, 0, 1, 1 << 20, [FetchPartition(TP, 1, 1 << 20)])  # caught up
        await asyncio.wait_for(waiting, 2)
        return results

    results = run(scenario())
    assert (results[TP].error, results[TP].base_offset) == (ErrorCode.none, 0)
    _results, wait = rm.append_now(-1, 1, {TP: build_batch([b"b"])})
    run(wait)  # follower 2 never fetches it: the timeout is the answer
    assert _results[TP].error == ErrorCode.request_timed_out


def test_a_notification_resumes_the_waiter_on_the_next_loop_turn():
    """The acks=all acknowledgement and the parked fetch's answer wait on this path: each
    extra turn of the loop runs whatever else is ready first.  Before, ``wait_for`` over a
    ``shield`` needed three turns."""
    async def scenario() -> tuple[bool, int, int]:
        purgatory = Purgatory()
        ready = False
        resumed: list[int] = []
        turn = 0

        async def waiter() -> bool:
            done = await purgatory.wait(["k"], lambda: ready, 5)
            resumed.append(turn)
            return done

        task = asyncio.create_task(waiter())
        await asyncio.sleep(0)  # parked
        ready = True
        purgatory.notify("k")
        while not resumed:
            turn += 1
            await asyncio.sleep(0)
        return await task, resumed[0], len(purgatory)

    done, turns, left = run(scenario())
    assert done and left == 0
    assert turns == 1


def test_timeout_and_cancellation_leave_no_watcher():
    async def scenario() -> tuple[bool, bool, int]:
        purgatory = Purgatory()
        late = [False]

        def check() -> bool:
            return late[0]

        timed_out = await purgatory.wait(["k"], check, 0.01)

        async def flip_then_wait() -> bool:
            # not notified, but true by the timeout: a plain waiter checks once more
            asyncio.get_running_loop().call_later(0.005, late.__setitem__, 0, True)
            return await purgatory.wait(["k"], check, 0.02)

        checked_at_timeout = await flip_then_wait()
        late[0] = False
        task = asyncio.create_task(purgatory.wait(["k", "j"], check, 5))
        await asyncio.sleep(0)
        assert len(purgatory) == 1
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        purgatory.notify("k")  # a cancelled waiter is skipped
        return timed_out, checked_at_timeout, len(purgatory)

    assert run(scenario()) == (False, True, 0)


def test_parked_follower_fetch_of_one_byte_completes_on_append_without_a_probe(tmp_path):
    """replica.fetch.min.bytes=1: an append past the follower's offset is enough, known
    from the log end alone (Kafka's DelayedFetch compares offsets); the answer is read once."""
    rm = make_rm(tmp_path)
    lead(rm, replicas=(1, 2), isr=(1, 2))
    reads: list[int] = []
    read_one = rm.reads._read_for_follower

    def counting(replica_id, req, *args, **kwargs):
        reads.append(req.fetch_offset)
        return read_one(replica_id, req, *args, **kwargs)

    rm.reads._read_for_follower = counting

    async def scenario():
        fetch = asyncio.create_task(rm.reads.fetch(2, 5000, 1, 1 << 20,
                                             [FetchPartition(TP, 0, 1 << 20)]))
        await asyncio.sleep(0)
        assert not fetch.done() and len(reads) == 1  # parked after its first read
        await rm.append(1, 1000, {TP: build_batch([b"x" * 100])})
        out = await asyncio.wait_for(fetch, 2)
        assert len(reads) == 2  # the answer's read; no probe in between
        return out

    assert run(scenario())[TP].size > 0


def test_a_throttled_follower_stays_parked_when_an_append_brings_it_nothing(tmp_path):
    """With a leader replication throttle an out-of-sync follower's parked fetch is not
    completed by an append while the quota is exceeded (it would be answered empty and
    fetch again at once): Kafka's DelayedFetch does not count a throttled replica's bytes."""
    from weir.replication.throttle import LEADER_REPLICAS

    rm = make_rm(tmp_path)
    lead(rm, replicas=(1, 2, 3), isr=(1, 2))
    rm.throttles.configure(10, None, lambda _t: {LEADER_REPLICAS: ["*"]})

    async def scenario():
        await rm.append(1, 1000, {TP: build_batch([b"x" * 1000] * 5)})
        first = await rm.reads.fetch(3, 0, 1, 1 << 20, [FetchPartition(TP, 0, 1 << 20)])
        assert first[TP].size > 0 and rm.throttles.leader.exceeded(rm.clock())
        end = rm.partitions[TP].log.log_end_offset
        fetch = asyncio.create_task(rm.reads.fetch(3, 300, 1, 1 << 20,
                                             [FetchPartition(TP, end, 1 << 20)]))
        await asyncio.sleep(0)
        await rm.append(1, 1000, {TP: build_batch([b"y" * 100])})
        await asyncio.sleep(0)  # a completed wait would have ended in this turn
        await asyncio.sleep(0)
        assert not fetch.done()  # still parked: throttled, nothing to serve
        out = await asyncio.wait_for(fetch, 2)  # its max wait ends it
        return out[TP].size

    assert run(scenario()) == 0
