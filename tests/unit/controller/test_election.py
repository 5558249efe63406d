"""The pure leader selectors."""

from __future__ import annotations

import pytest

from weir.controller.election import (
    ElectionResult,
    controlled_shutdown_leader,
    offline_leader,
    preferred_leader,
    reassigned_leader,
)


def test_offline_picks_first_live_assigned_replica_in_isr() -> None:
    result = offline_leader([1, 2, 3], isr=[3, 2, 1], live={2, 3}, unclean_allowed=False)
    assert result == ElectionResult(leader=2, isr=(3, 2), recipients=(2, 3))
    assert not result.unclean


def test_offline_ignores_live_replicas_outside_isr() -> None:
    result = offline_leader([1, 2, 3], isr=[1, 3], live={2, 3}, unclean_allowed=False)
    assert result is not None and result.leader == 3 and result.isr == (3,)


@pytest.mark.parametrize("isr", [[], [1], [1, 4]])
def test_offline_without_live_isr_and_no_unclean_gives_none(isr: list[int]) -> None:
    assert offline_leader([1, 2, 3], isr=isr, live={2, 3}, unclean_allowed=False) is None


def test_offline_unclean_takes_first_live_replica() -> None:
    result = offline_leader([1, 2, 3], isr=[1], live={3, 2}, unclean_allowed=True)
    assert result == ElectionResult(leader=2, isr=(2,), recipients=(2, 3), unclean=True)


def test_offline_prefers_clean_even_when_unclean_allowed() -> None:
    result = offline_leader([1, 2, 3], isr=[1, 3], live={2, 3}, unclean_allowed=True)
    assert result is not None and result.leader == 3 and not result.unclean


@pytest.mark.parametrize("unclean", [True, False])
def test_offline_all_replicas_dead(unclean: bool) -> None:
    assert offline_leader([1, 2], isr=[1, 2], live={5}, unclean_allowed=unclean) is None


def test_reassigned_leader() -> None:
    result = reassigned_leader([4, 5, 6], isr=[1, 5, 6], live={1, 5, 6})
    assert result == ElectionResult(leader=5, isr=(1, 5, 6), recipients=(4, 5, 6))
    assert reassigned_leader([4, 5], isr=[1], live={1, 4, 5}) is None
    assert reassigned_leader([4, 5], isr=[4, 5], live=set()) is None
    assert reassigned_leader([], isr=[1], live={1}) is None


def test_preferred_leader() -> None:
    result = preferred_leader([2, 1, 3], isr=[1, 2, 3], live={1, 2})
    assert result == ElectionResult(leader=2, isr=(1, 2, 3), recipients=(2, 1))
    assert preferred_leader([2, 1], isr=[1], live={1, 2}) is None  # not in sync
    assert preferred_leader([2, 1], isr=[1, 2], live={1}) is None  # not alive
    assert preferred_leader([], isr=[], live={1}) is None


def test_controlled_shutdown_leader() -> None:
    result = controlled_shutdown_leader([1, 2, 3], isr=[1, 2, 3], live={1, 2, 3},
                                        shutting_down={1})
    assert result == ElectionResult(leader=2, isr=(2, 3), recipients=(1, 2, 3))
    assert controlled_shutdown_leader([1, 2], isr=[1], live={1, 2}, shutting_down={1}) is None
    assert controlled_shutdown_leader([1, 2], isr=[], live={1, 2}, shutting_down=set()) is None


def test_result_is_frozen() -> None:
    result = ElectionResult(1, (1,), (1,))
    with pytest.raises(AttributeError):
        result.leader = 2  # type: ignore[misc]
