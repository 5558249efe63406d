"""Controlled shutdown (Kafka's ``KafkaServer.controlledShutdown``): before it stops, the
broker asks the controller to move the leadership of its partitions to other replicas
(ControlledShutdown, API 7), retried ``controlled.shutdown.max.retries`` times every
``controlled.shutdown.retry.backoff.ms``, so that clients never meet a dead leader."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from weir.protocol.client import BrokerConnection
from weir.protocol.errors import ErrorCode
from weir.protocol.interbroker import ControlledShutdownRequest

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10


class ControlledShutdown:
    def __init__(self, broker_id: int, *, broker_epoch: Callable[[], int],
                 live_brokers: Callable[[], set[int]],
                 controller_endpoint: Callable[[], tuple[int, str, int] | None],
                 max_retries: int, retry_backoff_ms: int, socket_timeout_ms: int,
                 security: Any = None) -> None:
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._live_brokers = live_brokers
        self._controller_endpoint = controller_endpoint
        self.max_retries = max_retries
        self.retry_backoff_ms = retry_backoff_ms
        self.socket_timeout_ms = socket_timeout_ms
        self._security = security

    async def run(self) -> bool:
        """True once no partition is left led here (or no other broker is alive)."""
        attempts = self.max_retries + 1
        for attempt in range(1, attempts + 1):
            if not self._live_brokers() - {self.broker_id}:
                log.info("broker %d is the last one alive: no leader can move; skipping "
                         "controlled shutdown", self.broker_id)
                return True
            remaining = await self._request()
            if remaining is not None and not remaining:
                log.info("controlled shutdown of broker %d succeeded", self.broker_id)
                return True
            log.info("controlled shutdown of broker %d: attempt %d/%d, %s", self.broker_id,
                     attempt, attempts, "controller unreachable" if remaining is None
                     else f"{len(remaining)} partitions still led here")
            if attempt < attempts:
                await asyncio.sleep(self.retry_backoff_ms / 1000)
        log.warning("controlled shutdown of broker %d did not complete; shutting down anyway",
                    self.broker_id)
        return False

    async def _request(self) -> list | None:
        """The partitions the controller says this broker still leads (None: no answer)."""
        target = self._controller_endpoint()
        if target is None:
            return None
        conn = BrokerConnection(target[1], target[2], client_id=f"broker-{self.broker_id}",
                                security=self._security)
        try:
            await conn.connect(timeout_s=CONNECT_TIMEOUT_S)
            response = await conn.request(
                ControlledShutdownRequest(broker_id=self.broker_id,
                                          broker_epoch=self._broker_epoch()),
                timeout_s=self.socket_timeout_ms / 1000)
        except (ConnectionError, OSError, TimeoutError) as exc:
            log.info("controlled shutdown request failed: %s", exc)
            return None
        finally:
            await conn.close()
        if response.error_code != ErrorCode.none:
            log.info("controlled shutdown refused: %s", response.error_code.name)
            return None
        return list(response.remaining_partitions)
