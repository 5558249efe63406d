"""The broker's start-up entry (``python -m weir broker start --config FILE``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from weir.cli.broker_start import EXIT_CONFIG, fast_path_config


@pytest.mark.parametrize(("argv", "expected"), [
    (["broker", "start", "--config", "s.properties"], "s.properties"),
    (["broker", "start", "--config=s.properties"], "s.properties"),
    (["broker", "start"], None),
    (["broker", "start", "--config"], None),
    (["broker", "start", "--config="], None),
    (["broker", "start", "--config", "--help"], None),
    (["broker", "start", "--config", "a", "--extra"], None),
    (["broker", "stop", "--config", "s.properties"], None),
    (["up"], None),
    ([], None),
])
def test_fast_path_only_for_exactly_broker_start_config(argv, expected) -> None:
    assert fast_path_config(argv) == expected


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "weir", *argv],
                          check=False, capture_output=True, text=True, timeout=120)


def test_python_m_weir_broker_start_loads_no_other_command(tmp_path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("broker.id=-3\nzookeeper.connect=zk:1\n")
    done = _run("broker", "start", "--config", str(path))
    assert done.returncode == EXIT_CONFIG
    assert f"invalid configuration in {path}" in done.stderr
    imported = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    assert "weir.config" in imported
    assert not {"weir.cli.main", "weir.cli.admin", "weir.verify.cli", "weir.console.cli",
                "hypothesis"} & imported


def test_python_m_weir_other_commands_use_the_full_parser(tmp_path) -> None:
    done = _run("broker", "start")
    assert done.returncode == 2
    assert "--config" in done.stderr  # argparse's usage error
