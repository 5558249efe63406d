"""The topic administration's creation of an internal topic under simulation
(``__consumer_offsets`` for the group plane, ``__transaction_state`` for the transaction
plane): a ZooKeeper round trip, then the topic's znodes with replicas placed round-robin from
a random broker, as Kafka's AdminUtils does for an internal topic."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from weir.sim.world import World

__all__ = ["create_internal_topic"]


async def create_internal_topic(sim: World, name: str, partitions: int) -> None:
    """Create ``name`` with ``partitions`` partitions at the simulation's replication factor,
    unless it exists by the time the round trip is over."""
    await asyncio.sleep(sim.zk_latency() / 1000)
    if name in sim.zk.topics:
        return
    ids = sorted(sim.nodes)
    start = sim.rng.randrange(len(ids))
    parts = {p: [ids[(start + p + i) % len(ids)] for i in range(sim.config.replication)]
             for p in range(partitions)}
    sim.faults.append(f"{sim.now}: create {name} {parts}")
    sim.zk.create_topic(name, parts)
