"""The ZooKeeper store protocols name exactly what ZkClient and the unit tests' in-memory
store offer; the simulation's sessions are ZkClients."""

from __future__ import annotations

import inspect

import pytest

from tests.unit.controller.memstore import MemoryZk
from weir.controller import store
from weir.coordination.zk import ZkClient
from weir.sim.zk import SimZk, SimZkClient


def _members(protocol: type) -> list[str]:
    return sorted(name for name, value in vars(protocol).items()
                  if callable(value) and not name.startswith("_"))


STORE = _members(store.ControllerStore)
SHELL = _members(store.ControllerZk)


@pytest.mark.parametrize("name", STORE + SHELL)
def test_zk_client_implements_the_protocols_with_the_same_parameters(name: str) -> None:
    protocol = store.ControllerZk if name in SHELL else store.ControllerStore
    wanted = list(inspect.signature(getattr(protocol, name)).parameters)
    assert list(inspect.signature(getattr(ZkClient, name)).parameters) == wanted


@pytest.mark.parametrize("name", STORE)
def test_the_in_memory_store_implements_the_store_with_the_same_parameters(name: str) -> None:
    wanted = list(inspect.signature(getattr(store.ControllerStore, name)).parameters)
    assert list(inspect.signature(getattr(MemoryZk, name)).parameters) == wanted


def test_a_sim_session_is_the_production_client() -> None:
    client = SimZkClient(SimZk(), 1)
    assert isinstance(client, ZkClient)
    for name in STORE + SHELL:  # not overridden: the production methods run
        assert getattr(type(client), name) is getattr(ZkClient, name), name
