"""A broker rewrites its registration with new endpoints (a dynamic advertised.listeners
change, same znode and broker epoch): Kafka's processBrokerModification updates the
controller's view and sends every live broker UpdateMetadata with the new endpoints
(onBrokerUpdate); nothing else happens (no failure, no startup, no LeaderAndIsr)."""

from __future__ import annotations

import dataclasses

from .helpers import (
    broker,
    change_brokers,
    leader_and_isr,
    started,
    stop_replica,
    update_metadata,
)


def test_rewritten_registration_sends_update_metadata_with_new_endpoints() -> None:
    core, zk = started(live=(1, 2, 3), topics={"t": {0: [1, 2, 3]}})
    moved = dataclasses.replace(broker(2), endpoints=["PLAINTEXT://other-host:19092"])
    effects = change_brokers(core, zk, {1: broker(1), 2: moved, 3: broker(3)})
    sent = update_metadata(effects)
    assert sorted(sent) == [1, 2, 3]
    for request in sent.values():
        (b2,) = [b for b in request.live_brokers if b.id == 2]
        assert [(e.host, e.port) for e in b2.endpoints] == [("other-host", 19092)]
        assert request.topic_states == ()  # only the brokers, as Kafka's onBrokerUpdate
    assert not leader_and_isr(effects) and not stop_replica(effects)
    assert core.ctx.live_brokers[2] == moved


def test_unchanged_registrations_send_nothing() -> None:
    core, zk = started(live=(1, 2, 3), topics={"t": {0: [1, 2, 3]}})
    effects = change_brokers(core, zk, {1: broker(1), 2: broker(2), 3: broker(3)})
    assert not update_metadata(effects)
