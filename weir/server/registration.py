"""This broker's registration in ``/brokers/ids/<id>`` (Kafka's KafkaServer registration and
``KafkaZkClient.registerBroker``; the broker epoch is the czxid of that ephemeral znode).

A broker restarted after a crash finds its previous incarnation's znode until that session
expires: registration retries until then.  When the ZooKeeper session is lost and a new one
is established, the broker registers again (a new epoch), as Kafka's session-expiry handler
``KafkaZkClient``/``ZooKeeperClient`` re-registration does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from weir.asyncutil import cancel_and_wait
from weir.coordination.errors import BrokerIdInUseError

if TYPE_CHECKING:
    from weir.coordination.codecs import BrokerInfo
    from weir.coordination.zk import ZkClient

log = logging.getLogger(__name__)

RETRY_S = 0.5


class BrokerRegistration:
    def __init__(self, zk: ZkClient, broker_id: int, session_timeout_ms: int,
                 info: Callable[[], BrokerInfo]) -> None:
        """``info`` builds the znode's content (the listeners' bound ports are known only
        once they are bound)."""
        self._zk = zk
        self.broker_id = broker_id
        self._session_timeout_ms = session_timeout_ms
        self._info = info
        self.broker_epoch: int = -1
        self._registered = asyncio.Event()
        self._session_lost = False
        self._stopping = False
        self._tasks: set[asyncio.Task] = set()  # re-registrations in flight

    @property
    def _limit_s(self) -> float:
        """How long an old session's znode may outlive it."""
        return self._session_timeout_ms / 1000 * 1.5 + 5

    async def register(self) -> None:
        info = self._info()
        deadline = time.monotonic() + self._limit_s
        while True:
            try:
                self.broker_epoch = await asyncio.to_thread(self._zk.register_broker, info)
                self._registered.set()
                return
            except BrokerIdInUseError:
                if time.monotonic() > deadline:
                    raise
                log.info("broker id %d is still registered by an expiring session; retrying",
                         self.broker_id)
                await asyncio.sleep(RETRY_S)

    async def update(self) -> None:
        """Rewrite the registration with the current endpoints (a dynamic
        ``advertised.listeners`` change: Kafka's DynamicListenerConfig.reconfigure →
        KafkaZkClient.updateBrokerInfo); nothing before the first registration, which will
        carry them."""
        if not self._registered.is_set() or self._stopping:
            return
        info = self._info()
        try:
            await asyncio.to_thread(self._zk.update_broker, info)
        except Exception:  # the session is being lost: the re-registration carries them
            log.exception("broker %d: updating the registration failed", self.broker_id)
            return
        log.info("broker %d: registration updated with endpoints %s", self.broker_id,
                 ", ".join(info.listener_endpoints()))

    async def wait_registered(self) -> bool:
        """Wait until this broker has registered (has its broker epoch); False if it did not
        within the time registration may take (an old session expiring).

        Kafka's KafkaServer processes no request before registration; Weir's listener is
        bound earlier, so controller requests wait here and are then checked against the
        broker epoch (handlers/_controller_requests.py)."""
        if self._registered.is_set():
            return True
        try:
            async with asyncio.timeout(self._limit_s):
                await self._registered.wait()
        except TimeoutError:
            return False
        return True

    def on_session_state(self, state: str) -> None:
        """The ZooKeeper session's state (called on the event loop)."""
        if state == "LOST" and self._stopping:
            # The broker closing its own session (KafkaServer.shutdown closes the ZooKeeper
            # client last): an ended session, not a lost one; nothing to re-register.
            log.info("ZooKeeper session closed")
        elif state == "LOST":
            self._session_lost = True
            log.warning("ZooKeeper session lost; will re-register when reconnected")
        elif state == "CONNECTED" and self._session_lost and not self._stopping:
            self._session_lost = False
            task = asyncio.ensure_future(self.register())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def stopping(self) -> None:
        """The broker is shutting down: no more re-registrations."""
        self._stopping = True

    async def stop(self) -> None:
        self._stopping = True
        await cancel_and_wait(*self._tasks)
