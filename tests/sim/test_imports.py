"""The simulation's modules import each other without circles (at run time), and its
planes reach the world only through :class:`weir.sim.world.World`."""

from __future__ import annotations

import grimp

PLANES = ("data", "groups", "idempotent", "disk", "invariants", "group_invariants", "world")


def _sim_graph(type_checking: bool) -> dict[str, set[str]]:
    graph = grimp.build_graph("weir", cache_dir=None,
                              exclude_type_checking_imports=not type_checking)
    mods = {m for m in graph.modules if m.startswith("weir.sim.")}
    return {m: {i for i in graph.find_modules_directly_imported_by(m) if i in mods}
            for m in mods}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))
    for module in sorted(edges):
        if module not in index:
            visit(module)
    return out


def test_no_import_cycles_between_the_simulations_modules() -> None:
    assert _cycles(_sim_graph(type_checking=False)) == []


def test_the_planes_do_not_import_the_simulation_they_run_in() -> None:
    edges = _sim_graph(type_checking=True)
    for plane in PLANES:
        assert "weir.sim.cluster" not in edges[f"weir.sim.{plane}"], plane
    assert "weir.sim.data" not in edges["weir.sim.idempotent"]  # a Protocol of the plane
