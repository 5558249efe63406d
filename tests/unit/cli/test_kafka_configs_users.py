"""kafka-configs.sh --entity-type users: ConfigCommand's SCRAM credential parsing (KIP-554)."""

from __future__ import annotations

import pytest

from weir.cli.kafka_tools.common import ToolError
from weir.cli.kafka_tools.configs_users import _check_keys, _iterations_and_password


def test_credential_iterations_default_and_password_with_equals() -> None:
    assert _iterations_and_password("SCRAM-SHA-256", "iterations=8192,password=a=b,c") == (
        8192, b"a=b,c")
    assert _iterations_and_password("SCRAM-SHA-512", "password=pw") == (4096, b"pw")
    assert _iterations_and_password("SCRAM-SHA-512", "iterations=-1,password=pw") == (
        4096, b"pw")


@pytest.mark.parametrize("text, words", [
    ("pw", "Invalid credential property SCRAM-SHA-256=pw"),
    ("iterations=100,password=pw", "Iterations 100 is less than the minimum 4096"),
])
def test_credential_errors(text: str, words: str) -> None:
    with pytest.raises(ToolError, match=words):
        _iterations_and_password("SCRAM-SHA-256", text)


def test_keys_other_than_scram_are_refused() -> None:
    _check_keys(["SCRAM-SHA-256", "SCRAM-SHA-512"], "added")
    with pytest.raises(ToolError, match="Unexpected config names: retention.ms"):
        _check_keys(["SCRAM-SHA-256", "retention.ms"], "added")
    with pytest.raises(ToolError, match="no client quotas"):
        _check_keys(["producer_byte_rate"], "deleted")
