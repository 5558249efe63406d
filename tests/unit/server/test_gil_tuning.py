"""The broker's thread switch interval (weir.server.gil_tuning)."""

import sys

import pytest

from weir.server import gil_tuning


@pytest.fixture(autouse=True)
def _restore_interval():
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


def test_left_alone_without_the_variable():
    sys.setswitchinterval(0.005)
    assert gil_tuning.apply({}) == pytest.approx(0.005)
    assert gil_tuning.apply({gil_tuning.ENV: "  "}) == pytest.approx(0.005)
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_the_variable_sets_it_in_milliseconds():
    assert gil_tuning.apply({gil_tuning.ENV: "1"}) == pytest.approx(0.001)
    assert sys.getswitchinterval() == pytest.approx(0.001)
    assert gil_tuning.apply({gil_tuning.ENV: " 0.5 "}) == pytest.approx(0.0005)


@pytest.mark.parametrize("raw", ["fast", "0", "-1", "nan", "inf"])
def test_bad_values_are_refused_by_name(raw):
    before = sys.getswitchinterval()
    with pytest.raises(ValueError, match=gil_tuning.ENV):
        gil_tuning.apply({gil_tuning.ENV: raw})
    assert sys.getswitchinterval() == before


def test_a_broker_with_a_bad_value_does_not_start(monkeypatch, caplog):
    from weir.config import BrokerConfig
    from weir.server import broker

    monkeypatch.setenv(gil_tuning.ENV, "soon")
    config = BrokerConfig({"broker.id": "7", "zookeeper.connect": "127.0.0.1:1"})
    with caplog.at_level("ERROR"):
        assert broker.run_broker(config) == 1
    assert any("broker 7 not started" in r.getMessage() and gil_tuning.ENV in r.getMessage()
               for r in caplog.records)
