"""weir_event_loop_lag_ms: the lateness arithmetic, and a real stall of the event loop
showing up in the histogram and on /metrics."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry, generate_latest

from weir.server.loop_lag import METRIC, EventLoopLagMonitor, lateness_ms
from weir.server.metrics import parse


def test_lateness_is_the_delay_past_the_asked_sleep_never_negative():
    assert abs(lateness_ms(0.1, 10.0, 10.35) - 250.0) < 1e-6
    assert lateness_ms(0.1, 10.0, 10.09) == 0.0


def test_a_blocked_loop_is_observed_as_lag():
    registry = CollectorRegistry(auto_describe=False)
    monitor = EventLoopLagMonitor(registry, interval_s=0.01)

    def samples():
        return parse(generate_latest(registry).decode())

    async def scenario():
        monitor.start()
        await asyncio.sleep(0.05)  # let it take a sleep or two first
        time.sleep(0.3)  # noqa: ASYNC251 - block the loop: the monitor wakes ~300 ms late
        deadline = time.monotonic() + 5
        while samples()[(METRIC + "_bucket", (("le", "250.0"),))] == \
                samples()[(METRIC + "_count", ())]:
            assert time.monotonic() < deadline, "the stall was never observed"
            await asyncio.sleep(0.01)
        await monitor.stop()

    asyncio.run(scenario())
    s = samples()
    count = s[(METRIC + "_count", ())]
    assert count >= 2
    # At least one observation above 250 ms (the stall); most below 250.
    assert s[(METRIC + "_bucket", (("le", "250.0"),))] < count
    assert s[(METRIC + "_bucket", (("le", "+Inf"),))] == count
    assert s[(METRIC + "_sum", ())] >= 250
    stopped_at = count
    assert samples()[(METRIC + "_count", ())] == stopped_at  # the task is gone
