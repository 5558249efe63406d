"""The scale measurement (weir.sim.scale) and the size options of ``python -m weir.sim``."""

from __future__ import annotations

import pytest

from weir.sim import SimConfig
from weir.sim.__main__ import main
from weir.sim.scale import measure, scale_config


@pytest.mark.parametrize("scenario", ["failure", "shutdown"])
def test_measure_moves_every_leadership_of_the_broker(scenario: str) -> None:
    result = measure(scenario, scale_config(topics=3, partitions=40), zk_latency_ms=1)
    assert result.partitions == 120 and result.brokers == 3
    # Three brokers, replication factor 3, assignments rotated: each leads about a third.
    assert 30 <= result.led <= 50
    assert result.remaining == 0  # ControlledShutdown's answer: nothing left to move
    assert result.controller_cpu_s > 0 and result.core_cpu_s > 0
    assert result.core_cpu_s <= result.controller_cpu_s + result.broker_cpu_s
    assert result.simulated_ms > 0


def test_measure_rejects_an_unknown_scenario() -> None:
    with pytest.raises(ValueError, match="unknown scenario"):
        measure("reboot", scale_config(topics=1, partitions=3))


def test_zk_latency_is_simulated_time() -> None:
    # 100 ms: the failure's ZooKeeper round trips then outweigh the seeded network delays
    # (up to 258 ms per message) on the brokers' side, which the real broker cores add.
    fast = measure("failure", scale_config(topics=1, partitions=30), zk_latency_ms=1)
    slow = measure("failure", scale_config(topics=1, partitions=30), zk_latency_ms=100)
    assert slow.zk_latency_ms == 100
    assert slow.simulated_ms > fast.simulated_ms


def test_cli_sizes_and_scale(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seed", "3", "--topics", "2", "--partitions", "3",
                 "--replication-factor", "2", "--brokers", "3"]) == 0
    assert "seed 3: ok" in capsys.readouterr().out
    assert main(["--scale", "shutdown", "--topics", "2", "--partitions", "30",
                 "--zk-latency-ms", "2"]) == 0
    out = capsys.readouterr().out
    assert "shutdown of broker" in out and "of 60 partitions" in out
    assert "2 ms ZooKeeper latency" in out


def test_cli_refuses_impossible_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--replication-factor", str(SimConfig.brokers + 1)])
    with pytest.raises(SystemExit):
        main(["--partitions", "0"])
    assert "error" in capsys.readouterr().err


def test_frozen_heap_is_released_after_the_measure() -> None:
    import gc

    before = gc.get_freeze_count()
    result = measure("failure", scale_config(topics=1, partitions=30), freeze_heap=True)
    assert result.frozen_heap and result.remaining == 0
    assert gc.get_freeze_count() == before
