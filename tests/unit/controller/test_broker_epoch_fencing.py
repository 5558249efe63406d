"""Controller requests to a broker that has not registered, or for an older incarnation.

Kafka: KafkaServer.startup registers the broker (its broker epoch is the czxid of
/brokers/ids/<id>) before requests are processed, and KafkaApis rejects LeaderAndIsr,
StopReplica and UpdateMetadata whose broker epoch is older than the current one with
STALE_BROKER_EPOCH (KIP-380).  Weir binds its listener before registering (the port goes
into the registration), so a request arriving in between must be refused too: it can only
be meant for the previous incarnation.
"""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from weir.protocol import codec
from weir.protocol.errors import ErrorCode
from weir.protocol.interbroker import (
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from weir.protocol.interbroker.leader_and_isr.v7.request import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrTopicState,
)
from weir.protocol.interbroker.stop_replica.v4.request import (
    StopReplicaPartitionState,
    StopReplicaTopicState,
)
from weir.server.handlers import leader_and_isr, stop_replica, update_metadata


class Untouchable:
    """A broker part that a refused request must not reach."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a stale controller request reached {name}")


class Registration:
    """The broker's epoch and its registration, which completes at ``registers_as``."""

    def __init__(self, epoch: int, registers_as: int | None = None) -> None:
        self.broker_epoch = epoch
        self.registers_as = registers_as

    async def wait_registered(self) -> bool:
        if self.registers_as is None:
            return False  # registration did not complete in time
        await asyncio.sleep(0)
        self.broker_epoch = self.registers_as
        return True


def _ctx(registration: Registration, response_cls: type) -> Any:
    untouchable = Untouchable()
    return SimpleNamespace(registration=registration, replica_manager=untouchable,
                           metadata=untouchable, topic_configs=untouchable,
                           respond=lambda **kw: codec.build(response_cls, **kw))


def _lai(epoch: int) -> LeaderAndIsrRequest:
    state = LeaderAndIsrPartitionState(partition_index=0, controller_epoch=1, leader=1,
                                       leader_epoch=3, isr=(1,), partition_epoch=0,
                                       replicas=(1,), adding_replicas=(), removing_replicas=(),
                                       is_new=False)
    return LeaderAndIsrRequest(controller_id=1, controller_epoch=1, broker_epoch=epoch,
                               type_=0, topic_states=(LeaderAndIsrTopicState(
                                   topic_name="t", topic_id=uuid.uuid4(),
                                   partition_states=(state,)),), live_leaders=())


def _stop(epoch: int) -> StopReplicaRequest:
    return StopReplicaRequest(controller_id=1, controller_epoch=1, broker_epoch=epoch,
                              topic_states=(StopReplicaTopicState(
                                  topic_name="t", partition_states=(StopReplicaPartitionState(
                                      partition_index=0, leader_epoch=3,
                                      delete_partition=True),)),))


def _um(epoch: int) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(controller_id=1, controller_epoch=1, broker_epoch=epoch,
                                 topic_states=(), live_brokers=())


CASES = [
    (leader_and_isr, _lai, LeaderAndIsrResponse),
    (stop_replica, _stop, StopReplicaResponse),
    (update_metadata, _um, UpdateMetadataResponse),
]


@pytest.mark.parametrize(("handler", "make", "response_cls"), CASES)
@pytest.mark.parametrize(("request_epoch", "registers_as"),
                         [(41, 42), (-1, 42), (41, None), (42, None)])
def test_refused_when_it_arrives_before_registration(handler: Any, make: Any,
                                                     response_cls: type, request_epoch: int,
                                                     registers_as: int | None) -> None:
    """KafkaServer.startup: no request is processed before the broker registered; then
    KafkaApis.isBrokerEpochStale refuses the previous incarnation's (KIP-380)."""
    broker = Registration(-1, registers_as)
    response = asyncio.run(handler.handle(_ctx(broker, response_cls), make(request_epoch)))
    assert response.error_code == ErrorCode.stale_broker_epoch


def test_current_epoch_waits_for_registration_and_passes() -> None:
    """A request for the new incarnation that beats the broker learning its own epoch
    (the controller saw the znode first) is handled once registration completes."""
    broker = Registration(-1, 42)
    # It gets past the epoch check: the (untouchable) metadata cache is reached.
    with pytest.raises(AssertionError, match="reached controller_epoch"):
        asyncio.run(update_metadata.handle(_ctx(broker, UpdateMetadataResponse), _um(42)))


@pytest.mark.parametrize(("handler", "make", "response_cls"), CASES)
def test_refused_for_an_older_incarnation(handler: Any, make: Any, response_cls: type) -> None:
    """KafkaApis.isBrokerEpochStale (KIP-380): an older broker epoch is refused."""
    response = asyncio.run(handler.handle(_ctx(Registration(42), response_cls), make(41)))
    assert response.error_code == ErrorCode.stale_broker_epoch
