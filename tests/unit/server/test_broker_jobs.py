"""The jobs moved out of the broker, each alone with stand-ins: the periodic-job scheduler,
registration (retries while an old session's znode lives, re-registration after session
loss), controlled shutdown's retries, the topic-config cache and config-change reloads."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest

from weir.config import BrokerConfig
from weir.coordination.errors import BrokerIdInUseError
from weir.protocol.errors import ErrorCode
from weir.server import controlled_shutdown as cs_module
from weir.server.config_changes import ConfigChangeListener
from weir.server.controlled_shutdown import ControlledShutdown
from weir.server.registration import BrokerRegistration
from weir.server.scheduler import Scheduler
from weir.server.topic_configs import TopicConfigs


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


async def _until(predicate, what: str) -> None:
    for _ in range(1000):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(what)


# -- Scheduler (Kafka's KafkaScheduler) ---------------------------------------------------------


def test_scheduler_runs_each_job_survives_failures_and_stops_them_all():
    async def scenario():
        ran: dict[str, int] = {"a": 0, "b": 0}

        def failing():
            ran["b"] += 1
            raise RuntimeError("boom")

        scheduler = Scheduler()
        scheduler.schedule("a", 10, lambda: ran.__setitem__("a", ran["a"] + 1))
        scheduler.schedule("b", 10, failing)
        assert scheduler.job_names == ["a", "b"]
        scheduler.start()
        with pytest.raises(RuntimeError):
            scheduler.schedule("late", 10, lambda: None)
        await _until(lambda: ran["a"] >= 3 and ran["b"] >= 3, "jobs did not repeat")
        tasks = list(scheduler._tasks)
        await scheduler.stop()
        assert all(t.done() for t in tasks)
        before = dict(ran)
        await asyncio.sleep(0.05)
        assert ran == before

    run(scenario())


def test_scheduler_awaits_a_coroutine_job_before_its_next_interval():
    async def scenario():
        runs: list[tuple[str, int]] = []
        release = asyncio.Event()

        async def slow() -> None:
            runs.append(("start", len(runs)))
            await release.wait()
            runs.append(("end", len(runs)))

        scheduler = Scheduler()
        scheduler.schedule("slow", 10, slow)
        scheduler.start()
        await _until(lambda: runs, "the job did not start")
        await asyncio.sleep(0.05)  # five intervals: a second run would have started
        assert runs == [("start", 0)]
        release.set()
        await _until(lambda: len(runs) >= 3, "the job did not run again")
        assert [what for what, _ in runs[:3]] == ["start", "end", "start"]
        await scheduler.stop()

    run(scenario())


def test_checkpoint_writes_run_off_the_loop_in_order_and_a_failure_fails_its_dir():
    async def scenario():
        loop_thread = threading.get_ident()
        written: list[tuple[str, int]] = []
        failed: list[tuple[Path, str]] = []

        def write(name: str):
            def work() -> None:
                written.append((name, threading.get_ident()))
            return work

        def broken() -> None:
            raise OSError(5, "Input/output error")

        scheduler = Scheduler()
        await scheduler.write_each(
            [(Path("/d1"), write("a")), (Path("/d2"), broken), (Path("/d3"), write("b"))],
            lambda d, reason: failed.append((d, reason)))
        assert [name for name, _ in written] == ["a", "b"]
        assert all(thread != loop_thread for _, thread in written)
        assert len({thread for _, thread in written}) == 1  # one I/O thread: in order
        assert failed == [(Path("/d2"), "[Errno 5] Input/output error")]
        await scheduler.stop()

    run(scenario())


def test_scheduler_stop_waits_for_the_write_under_way():
    async def scenario():
        started = threading.Event()
        finished = threading.Event()

        def write() -> None:
            started.set()
            time.sleep(0.2)
            finished.set()

        scheduler = Scheduler()
        scheduler.schedule("checkpoint", 10,
                           lambda: scheduler.write_each([(Path("/d"), write)], print))
        scheduler.start()
        await asyncio.to_thread(started.wait, 5)
        await scheduler.stop()  # cancels the job; its write still ends before stop returns
        assert finished.is_set()

    run(scenario())


# -- BrokerRegistration ---------------------------------------------------------------------------


class RegisteringZk:
    def __init__(self, busy: int) -> None:
        self.busy = busy  # how many attempts find the old session's znode
        self.calls = 0

    def register_broker(self, info):
        self.calls += 1
        if self.calls <= self.busy:
            raise BrokerIdInUseError(1, 0x1234)
        return 100 + self.calls


def test_registration_retries_while_the_old_znode_lives(monkeypatch):
    monkeypatch.setattr("weir.server.registration.RETRY_S", 0.001)

    async def scenario():
        zk = RegisteringZk(busy=3)
        reg = BrokerRegistration(zk, 1, 6000, lambda: "info")
        waiting = asyncio.ensure_future(reg.wait_registered())
        await reg.register()
        assert reg.broker_epoch == 104 and zk.calls == 4
        assert await waiting

    run(scenario())


def test_registration_gives_up_after_the_session_timeout(monkeypatch):
    monkeypatch.setattr("weir.server.registration.RETRY_S", 0.001)
    monkeypatch.setattr(BrokerRegistration, "_limit_s", property(lambda self: 0.02))

    async def scenario():
        reg = BrokerRegistration(RegisteringZk(busy=10**9), 1, 6000, lambda: "info")
        with pytest.raises(BrokerIdInUseError):
            await reg.register()
        assert reg.broker_epoch == -1
        assert not await reg.wait_registered()

    run(scenario())


def test_session_loss_registers_again_unless_stopping():
    async def scenario():
        zk = RegisteringZk(busy=0)
        reg = BrokerRegistration(zk, 1, 6000, lambda: "info")
        await reg.register()
        assert reg.broker_epoch == 101
        reg.on_session_state("CONNECTED")  # no loss: nothing to do
        await asyncio.sleep(0.01)
        assert zk.calls == 1
        reg.on_session_state("LOST")
        reg.on_session_state("CONNECTED")
        await _until(lambda: reg.broker_epoch == 102, "did not re-register")
        reg.stopping()
        reg.on_session_state("LOST")
        reg.on_session_state("CONNECTED")
        await asyncio.sleep(0.01)
        assert zk.calls == 2
        await reg.stop()

    run(scenario())


# -- ControlledShutdown ---------------------------------------------------------------------------


class FakeConnection:
    answers: ClassVar[list] = []
    sent: ClassVar[list] = []

    def __init__(self, host, port, client_id, security=None) -> None:
        self.target = (host, port)

    async def connect(self, timeout_s):
        pass

    async def request(self, request, timeout_s):
        FakeConnection.sent.append((self.target, request.broker_id, request.broker_epoch))
        answer = FakeConnection.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def close(self):
        pass


def _shutdown(live=(1, 2), controller=(2, "h2", 9092)):
    return ControlledShutdown(1, broker_epoch=lambda: 77, live_brokers=lambda: set(live),
                              controller_endpoint=lambda: controller, max_retries=2,
                              retry_backoff_ms=1, socket_timeout_ms=1000)


def test_controlled_shutdown_retries_until_nothing_is_led_here(monkeypatch):
    monkeypatch.setattr(cs_module, "BrokerConnection", FakeConnection)
    FakeConnection.sent = []
    FakeConnection.answers = [
        ConnectionError("refused"),
        SimpleNamespace(error_code=ErrorCode.none, remaining_partitions=["t-0"]),
        SimpleNamespace(error_code=ErrorCode.none, remaining_partitions=[]),
    ]
    assert run(_shutdown().run()) is True
    assert FakeConnection.sent == [(("h2", 9092), 1, 77)] * 3


def test_controlled_shutdown_gives_up_after_its_retries(monkeypatch):
    monkeypatch.setattr(cs_module, "BrokerConnection", FakeConnection)
    FakeConnection.sent = []
    FakeConnection.answers = [SimpleNamespace(error_code=ErrorCode.stale_broker_epoch,
                                              remaining_partitions=[])] * 3
    assert run(_shutdown().run()) is False
    assert len(FakeConnection.sent) == 3  # controlled.shutdown.max.retries=2: 3 attempts


def test_controlled_shutdown_is_skipped_by_the_last_broker_or_without_a_controller(monkeypatch):
    monkeypatch.setattr(cs_module, "BrokerConnection", FakeConnection)
    FakeConnection.sent = []
    assert run(_shutdown(live=(1,)).run()) is True
    assert run(_shutdown(controller=None).run()) is False
    assert FakeConnection.sent == []


# -- TopicConfigs and config change notifications ------------------------------------------------


class ConfigZk:
    def __init__(self) -> None:
        self.topics: dict[str, dict[str, str]] = {"t": {"retention.ms": "1000"}}
        self.reads: list[str] = []

    def get_topic_config(self, topic):
        self.reads.append(topic)
        return dict(self.topics.get(topic, {}))

    def watch_children(self, path, callback):
        self.watched = (path, callback)


class FakeLogManager:
    def __init__(self) -> None:
        self.updates: list[tuple[str, int]] = []
        self.default_config = None

    def all_logs(self):
        return [SimpleNamespace(topic="t"), SimpleNamespace(topic="u")]

    def update_config(self, topic, config):
        self.updates.append((topic, config.retention_ms))


def _configs(**props):
    config = BrokerConfig({"broker.id": "1", "zookeeper.connect": "zk:2181", **props})
    holder = {"config": config}
    zk, lm = ConfigZk(), FakeLogManager()
    cleaner = SimpleNamespace(wakes=0)
    cleaner.wake = lambda: setattr(cleaner, "wakes", cleaner.wakes + 1)
    return TopicConfigs(lambda: holder["config"], zk, lm, cleaner), holder, zk, lm, cleaner


def test_topic_configs_merge_overrides_cache_and_follow_broker_defaults():
    configs, holder, zk, lm, _cleaner = _configs(**{"log.retention.ms": "5000"})
    run(configs.load({"t", "u"}))
    run(configs.load({"t"}))  # known topics are not read again
    assert sorted(zk.reads) == ["t", "u"]
    assert configs.topic_config("t")["retention.ms"] == 1000
    assert configs.log_config("u").retention_ms == 5000
    assert configs.topic_config("t") is configs.topic_config("t")  # cached
    assert configs.min_isr("t") == 1
    holder["config"] = holder["config"].with_dynamic({"log.retention.ms": "9000"}, {})
    configs.defaults_changed()
    assert lm.default_config.retention_ms == 9000
    assert sorted(lm.updates) == [("t", 1000), ("u", 9000)]
    configs.set_overrides("t", None)  # the topic is gone
    assert "t" not in configs.overrides and configs.topic_config("t")["retention.ms"] == 9000


def test_a_change_notification_reloads_broker_and_topic_configs():
    async def scenario():
        configs, _holder, zk, lm, cleaner = _configs()
        await configs.load({"t", "u"})
        dynamic = SimpleNamespace(reloads=0)

        async def reload():
            dynamic.reloads += 1

        dynamic.reload = reload
        scram = SimpleNamespace(invalidated=0)
        scram.invalidate = lambda: setattr(scram, "invalidated", scram.invalidated + 1)
        listener = ConfigChangeListener(zk, dynamic, configs, scram)
        listener.start()
        assert zk.watched[0] == "/config/changes"
        zk.topics["t"] = {"retention.ms": "2000"}
        zk.watched[1](["config_change_0000000001"])  # as kazoo's thread calls it
        await _until(lambda: lm.updates, "topic override not applied")
        await _until(lambda: not listener._tasks, "reload still running")
        assert lm.updates == [("t", 2000)] and cleaner.wakes == 1
        assert dynamic.reloads == 1 and scram.invalidated == 1
        await listener.stop()

    run(scenario())


# -- the wiring ----------------------------------------------------------------------------------


def test_broker_wiring_hands_out_typed_parts_and_the_live_config(tmp_path):
    """Handlers see the broker's parts through BrokerServices (never the Broker), the config
    they read is the live one (dynamic configs replace it), and the coordinators and
    /metrics read the same parts."""
    from weir.protocol import codec
    from weir.server import metrics
    from weir.server.broker import Broker
    from weir.server.context import BrokerServices, RequestContext
    from weir.server.handlers import REGISTRY

    async def scenario():
        config = BrokerConfig({"broker.id": "3", "zookeeper.connect": "127.0.0.1:1",
                               "log.dirs": str(tmp_path), "listeners": "PLAINTEXT://:0"})
        broker = Broker(config)
        services = broker.services
        assert isinstance(services, BrokerServices)
        assert all(s.dispatcher.services is services for s in broker.socket_servers)
        assert services.replica_manager is broker.replica_manager
        assert services.group_coordinator.metadata is broker.metadata
        assert services.txn_coordinator.metadata is broker.metadata
        assert services.registration.broker_epoch == -1 == broker.broker_epoch
        request_cls, response_cls = REGISTRY[3].schemas(12)
        ctx = RequestContext(services, codec.RequestHeader(3, 12, 1, "c", 0), request_cls,
                             response_cls, "127.0.0.1:5555")
        assert ctx.broker_id == 3 and ctx.metadata is broker.metadata
        assert not hasattr(ctx, "broker")
        broker.dynamic_configs.apply(config.with_dynamic({"log.retention.bytes": "10"}, {}))
        assert ctx.config.get("log.retention.bytes") == 10
        assert ctx.topic_configs.topic_config("t")["retention.bytes"] == 10
        source = broker.metrics_source()
        assert source.state() == metrics.STATE_STARTING  # until registered
        broker.request_stop()
        assert source.state() == metrics.STATE_SHUTTING_DOWN
        assert source.controller() is None
        assert broker.scheduler.job_names == []  # scheduled at start

    run(scenario())
