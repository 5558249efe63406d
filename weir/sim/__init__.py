"""Deterministic simulation of the controller and data path (``python -m weir.sim --seed N [--data]``)."""

from weir.sim.cluster import SimConfig, SimResult, Simulation

__all__ = ["SimConfig", "SimResult", "Simulation", "run_seed"]


def run_seed(seed: int, config: SimConfig | None = None) -> SimResult:
    """Run one seed to the end and return its result."""
    return Simulation(seed, config).run()
