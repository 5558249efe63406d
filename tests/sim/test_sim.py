"""The deterministic controller simulation over a range of seeds (a few seconds in all)."""

from __future__ import annotations

import pytest

from weir.sim import SimConfig, Simulation, run_seed
from weir.sim.__main__ import main

SEEDS = range(25)


@pytest.mark.parametrize("seed", SEEDS)
def test_seed_holds_invariants_and_converges(seed: int) -> None:
    result = run_seed(seed)
    assert result.ok, "\n".join(result.violations + ["faults:"] + result.faults)
    assert result.faults, "the simulation injected no faults"


def test_seeds_replay_exactly() -> None:
    first, second = run_seed(7), run_seed(7)
    assert (first.faults, first.steps, first.zk_ops_per_event) == (
        second.faults, second.steps, second.zk_ops_per_event)


def test_zk_round_trips_per_event_are_reported() -> None:
    # Without reassignments: an ISR change that completes a reassignment (KIP-455) also
    # rewrites the topic znode and /admin/reassign_partitions in the same event.
    stats = run_seed(3, SimConfig(reassignments=False)).zk_ops_per_event
    assert {"Startup", "BrokerChange", "AlterPartition"} <= set(stats)
    events, _ops, most = stats["AlterPartition"]
    assert events > 0 and most == 1  # one conditional multi per request


def test_invariants_catch_an_unclean_election(monkeypatch: pytest.MonkeyPatch) -> None:
    from weir.controller import election

    clean = election.offline_leader
    monkeypatch.setattr(election, "offline_leader",
                        lambda assignment, isr, live, _unclean: clean(assignment, isr, live,
                                                                      True))
    assert any(not run_seed(seed).ok for seed in range(10))


def test_five_brokers_and_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert Simulation(11, SimConfig(brokers=5)).run().ok
    assert main(["--seed", "2", "--stats"]) == 0
    assert "seed 2: ok" in capsys.readouterr().out


def test_seeds_cover_reassignment_shutdown_deletion_elections_and_failover() -> None:
    kinds = ["AlterPartitionReassignments", "/admin/reassign_partitions", "controlled shutdown",
             "delete topic", "ElectLeaders", "/admin/preferred_replica_election",
             "session expiry of controller", "kill controller"]
    seen: set[str] = set()
    completed = 0
    for seed in range(8):
        sim = Simulation(seed)
        result = sim.run()
        assert result.ok, "\n".join(result.violations)
        seen |= {k for k in kinds for f in result.faults if k in f}
        assert sim.reassignments is not None
        completed += sum(1 for target in sim.reassignments.acknowledged.values()
                         if target is not None)
        events = result.zk_ops_per_event
        assert events["Startup"][0] >= 1
    assert seen == set(kinds)
    assert completed > 0  # acknowledged moves that the invariant saw finish on their target


def test_a_seed_replays_exactly_in_another_process() -> None:
    import os
    import subprocess
    import sys

    outputs = set()
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        done = subprocess.run([sys.executable, "-m", "weir.sim", "--seed", "7", "--faults",
                               "--stats"], env=env, capture_output=True, text=True,
                              timeout=120, check=True)
        outputs.add(done.stdout)
    assert len(outputs) == 1 and "seed 7: ok" in outputs.pop()


def test_controller_requests_cross_the_network_as_encoded_frames(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The controller's LeaderAndIsr, UpdateMetadata and StopReplica reach the simulated
    brokers as frames the production codecs encode and decode (the answers too), and a
    broker's metadata is a MetadataCache that ends equal to ZooKeeper's states."""
    from weir.protocol import codec
    from weir.server.metadata_cache import MetadataCache
    from weir.sim.node import SimNode

    seen: dict[int, int] = {}
    serve_frame = SimNode.serve_frame

    async def spy(self: SimNode, frame: bytes, peer: str) -> bytes:
        assert isinstance(frame, bytes)
        api_key = codec.parse_request_header_prefix(frame)[0]
        seen[api_key] = seen.get(api_key, 0) + 1
        answer = await serve_frame(self, frame, peer)
        assert isinstance(answer, bytes)
        return answer

    monkeypatch.setattr(SimNode, "serve_frame", spy)
    sim = Simulation(5)  # a seed whose schedule sends all three
    result = sim.run()
    assert result.ok, "\n".join(result.violations)
    assert {4, 5, 6} <= set(seen)  # LeaderAndIsr, StopReplica, UpdateMetadata
    for node in sim.nodes.values():
        assert node.core is not None
        assert isinstance(node.core.metadata, MetadataCache)
        assert node.core.metadata.controller_id == sim.zk.controller[0]


def test_every_request_a_broker_serves_goes_through_its_broker_core(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each simulated incarnation is a production BrokerCore: its controller is the core's,
    and the controller's requests, AlterPartition and the followers' Fetch and
    OffsetForLeaderEpoch all reach the core's Dispatcher as frames."""
    from weir.protocol import codec
    from weir.server.broker_core import BrokerCore

    seen: set[int] = set()
    serve_frame = BrokerCore.serve_frame

    async def spy(self: BrokerCore, frame: bytes, peer: str) -> bytes:
        seen.add(codec.parse_request_header_prefix(frame)[0])
        return await serve_frame(self, frame, peer)

    monkeypatch.setattr(BrokerCore, "serve_frame", spy)
    sim = Simulation(2)
    result = sim.run()
    assert result.ok, "\n".join(result.violations)
    for node in sim.nodes.values():
        assert node.core is not None and node.service is node.core.controller
    # Fetch, OffsetForLeaderEpoch, LeaderAndIsr, StopReplica, UpdateMetadata, AlterPartition
    assert {1, 4, 5, 6, 56} <= seen
