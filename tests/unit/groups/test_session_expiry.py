"""A member leaves at its session deadline (last heartbeat + session timeout), as Kafka's
heartbeat purgatory expires a DelayedHeartbeat from its timing wheel: the coordinator's tick
loop wakes at the next group deadline instead of at its next fixed tick, and a static member
closed without LeaveGroup has left (group Empty, DeleteGroups allowed) at that instant."""

from __future__ import annotations

import asyncio

from tests.unit.coordinator_runtime.test_shell import FakeClock
from tests.unit.groups.test_coordinator import OFFSETS_TP, _loaded, make_broker
from weir.coordinator_runtime import ReplicaManagerLog
from weir.groups.coordinator import TICK_S, GroupCoordinator, GroupCoordinatorSettings
from weir.groups.state import GroupState, JoinRequest
from weir.protocol.errors import ErrorCode

SESSION_MS = 6000


def _static_join(member_id: str = "") -> JoinRequest:
    return JoinRequest(member_id, "instance-1", "c", "/h", SESSION_MS, 10000, "consumer",
                       [("range", b"sub")], True)


async def _expiry(tmp_path) -> None:
    broker = make_broker(tmp_path)
    clock = FakeClock()
    coord = GroupCoordinator(GroupCoordinatorSettings.from_config(broker.config),
                             broker.metadata, ReplicaManagerLog(broker.replica_manager),
                             clock=clock)
    coord.on_leadership(OFFSETS_TP, True, 0)
    await _loaded(coord)
    assert coord._next_deadline_ms(clock.ms) is None
    assert coord._tick_delay_s(TICK_S) == TICK_S  # nothing scheduled: the tick interval

    joined = await coord.join("g", _static_join())
    assert joined.error == ErrorCode.none
    mid = joined.member_id
    synced = await coord.sync("g", mid, "instance-1", joined.generation_id, None, None,
                              {mid: b"a"})
    assert synced.error == ErrorCode.none
    clock.ms += 1500
    assert coord.heartbeat("g", mid, "instance-1", joined.generation_id) == ErrorCode.none
    deadline = clock.ms + SESSION_MS  # the last heartbeat + the session timeout

    # The consumer closes without LeaveGroup (a static member). The loop sleeps exactly
    # until the deadline once it is closer than a tick.
    assert coord._next_deadline_ms(clock.ms) == deadline
    clock.ms = deadline - 30
    assert coord._tick_delay_s(TICK_S) == 0.03
    clock.ms = deadline - 1
    assert coord._tick_delay_s(TICK_S) == 0.001
    coord._tick(clock.ms)
    assert coord.group("g").state == GroupState.STABLE
    assert await coord.delete_groups(["g"]) == {"g": ErrorCode.non_empty_group}

    clock.ms = deadline
    coord._tick(clock.ms)
    group = coord.group("g")
    assert (group.state, group.members) == (GroupState.EMPTY, {})
    assert coord._next_deadline_ms(clock.ms) is None  # a passed deadline schedules nothing
    for _ in range(50):  # the Empty group's metadata write runs in the background
        if not coord._tasks:
            break
        await asyncio.sleep(0.01)
    assert await coord.delete_groups(["g"]) == {"g": ErrorCode.none}
    await coord.stop()


def test_static_member_leaves_at_its_session_deadline(tmp_path):
    asyncio.run(_expiry(tmp_path))


def test_passed_deadlines_do_not_busy_loop(tmp_path):
    """A deadline already passed that the tick leaves in place (a join deadline while members
    rejoin) never makes the loop spin: only deadlines ahead shorten the sleep."""

    async def run() -> None:
        broker = make_broker(tmp_path)
        clock = FakeClock()
        coord = GroupCoordinator(GroupCoordinatorSettings.from_config(broker.config),
                                 broker.metadata, ReplicaManagerLog(broker.replica_manager),
                                 clock=clock)
        coord.on_leadership(OFFSETS_TP, True, 0)
        await _loaded(coord)
        joined = await coord.join("g", _static_join())
        member = coord.group("g").members[joined.member_id]
        member.awaiting_join = True  # its session timer does not run (Kafka's shouldKeepAlive)
        clock.ms = member.last_heartbeat_ms + SESSION_MS + 1000
        coord._tick(clock.ms)
        assert joined.member_id in coord.group("g").members
        assert coord._tick_delay_s(TICK_S) == TICK_S
        await coord.stop()

    asyncio.run(run())
