"""The broker's thread switch interval (weir.server.gil_tuning)."""

import sys

import pytest

from weir.server import gil_tuning


@pytest.fixture(autouse=True)
def _restore_interval():
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


def test_default_is_shorter_than_cpythons():
    interval = gil_tuning.shorten({})
    assert interval == pytest.approx(gil_tuning.SWITCH_INTERVAL_S)
    assert sys.getswitchinterval() == pytest.approx(gil_tuning.SWITCH_INTERVAL_S)
    assert gil_tuning.SWITCH_INTERVAL_S < 0.005  # CPython's default


def test_environment_overrides_in_milliseconds():
    assert gil_tuning.shorten({gil_tuning.ENV: "5"}) == pytest.approx(0.005)
    assert gil_tuning.shorten({gil_tuning.ENV: " 0.25 "}) == pytest.approx(0.00025)
    assert gil_tuning.shorten({gil_tuning.ENV: ""}) == pytest.approx(gil_tuning.SWITCH_INTERVAL_S)


@pytest.mark.parametrize("raw", ["fast", "0", "-1", "nan", "inf"])
def test_bad_values_are_refused_by_name(raw):
    before = sys.getswitchinterval()
    with pytest.raises(ValueError, match=gil_tuning.ENV):
        gil_tuning.shorten({gil_tuning.ENV: raw})
    assert sys.getswitchinterval() == before
