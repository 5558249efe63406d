"""BrokerConnections: one connection per broker, dropped on failure and reopened."""

from __future__ import annotations

import asyncio
from typing import ClassVar

import pytest

from weir.protocol.client import BrokerConnections


class _Conn:
    made: ClassVar[list[_Conn]] = []

    def __init__(self, host, port, client_id, security=None) -> None:
        self.address, self.client_id, self.security = (host, port), client_id, security
        self.connected = False
        self.closed = False
        self.fail_next = False
        _Conn.made.append(self)

    async def connect(self, timeout_s: float) -> None:
        self.connected = True

    async def request(self, payload, timeout_s: float):
        if self.fail_next:
            raise ConnectionError("reset by peer")
        return (self.address, payload)

    async def close(self) -> None:
        self.connected, self.closed = False, True


def test_reuses_drops_on_failure_and_reconnects():
    _Conn.made = []
    endpoints = {1: ("h1", 9092), 2: ("h2", 9093)}
    pool = BrokerConnections(endpoints.get, "c", security="sec", connect=_Conn)

    async def scenario():
        assert await pool.request(1, "a", 1) == (("h1", 9092), "a")
        assert await pool.request(1, "b", 1) == (("h1", 9092), "b")
        assert len(_Conn.made) == 1 and _Conn.made[0].security == "sec"
        _Conn.made[0].fail_next = True
        with pytest.raises(ConnectionError):
            await pool.request(1, "c", 1)
        assert _Conn.made[0].closed
        assert await pool.request(1, "d", 1) == (("h1", 9092), "d")  # a new connection
        assert len(_Conn.made) == 2
        with pytest.raises(ConnectionError, match="no endpoint"):
            await pool.request(3, "e", 1)
        await pool.request(2, "f", 1)
        await pool.close()
        assert all(c.closed for c in _Conn.made[1:])

    asyncio.run(scenario())
