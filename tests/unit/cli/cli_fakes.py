"""Fakes shared by the CLI tests (imported by name; no fixtures): a ZkClient stand-in and a fake broker command."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import ClassVar


@dataclass(frozen=True)
class BrokerInfo:
    """Shaped like weir.coordination.codecs.BrokerInfo (the fields the CLI reads)."""

    id: int
    host: str
    port: int
    rack: str | None = None
    epoch: int = -1

    def listener_endpoints(self) -> list[str]:
        return [f"PLAINTEXT://{self.host}:{self.port}"]


@dataclass(frozen=True)
class LeaderIsr:
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int


@dataclass(frozen=True)
class TopicAssignment:
    name: str
    topic_id: object
    partitions: dict[int, list[int]]


@dataclass
class FakeZk:
    """Answers the ZkClient getters the CLI uses from plain attributes."""

    brokers: list[BrokerInfo] = field(default_factory=list)
    controller: int | None = None
    epoch: int = 0
    topics: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    states: dict = field(default_factory=dict)
    closed: bool = False

    def get_all_brokers(self) -> list[BrokerInfo]:
        return list(self.brokers)

    def get_controller_id(self) -> int | None:
        return self.controller

    def get_controller_epoch(self) -> tuple[int, int]:
        return self.epoch, 3

    def get_topic_names(self) -> list[str]:
        return list(self.topics)

    def get_topic(self, name: str) -> TopicAssignment | None:
        parts = self.topics.get(name)
        return None if parts is None else TopicAssignment(name, None, parts)

    def get_partition_states(self, tps: list) -> dict:
        return {tp: self.states[tp] for tp in tps if tp in self.states}

    def close(self) -> None:
        self.closed = True


def broker(broker_id: int, port_base: int = 9092) -> BrokerInfo:
    """Broker ``broker_id`` (ids from 1) listening on ``port_base + broker_id - 1``."""
    return BrokerInfo(broker_id, "127.0.0.1", port_base + broker_id - 1)


def state(leader: int, isr: list[int], epoch: int = 0) -> LeaderIsr:
    return LeaderIsr(leader, epoch, isr, 1)


def fake_broker_command(config_path) -> list[str]:
    """A process whose command line reads like a broker's, that just sleeps."""
    code = "import time\nwhile True: time.sleep(0.05)"
    return [sys.executable, "-c", code, "weir", "broker", "start", "--config", str(config_path)]


class FakeZooKeeperServer:
    """Stands in for weir.coordination.zkserver.ZooKeeperServer; remembers running dirs."""

    running: ClassVar[dict[str, FakeZooKeeperServer]] = {}
    next_port = 42181

    def __init__(self, data_dir, port: int = 0, host: str = "127.0.0.1") -> None:
        self.data_dir = data_dir
        self.host = host
        self.port = port
        self.pid: int | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 60) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        FakeZooKeeperServer.next_port += 1
        self.port, self.pid = FakeZooKeeperServer.next_port, os.getpid()
        FakeZooKeeperServer.running[str(self.data_dir)] = self

    def is_running(self) -> bool:
        return self.pid is not None

    def stop(self, timeout_s: float = 10) -> None:
        FakeZooKeeperServer.running.pop(str(self.data_dir), None)
        self.pid = None

    @classmethod
    def attach(cls, data_dir) -> FakeZooKeeperServer | None:
        return cls.running.get(str(data_dir))
