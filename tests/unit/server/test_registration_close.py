"""A broker closing its own ZooKeeper session is not a lost session."""

from __future__ import annotations

import logging

from weir.server.registration import BrokerRegistration


def _registration() -> BrokerRegistration:
    return BrokerRegistration(None, 1, 6000, lambda: None)  # type: ignore[arg-type]


def test_session_lost_while_running_is_a_warning(caplog) -> None:
    with caplog.at_level(logging.INFO, logger="weir.server.registration"):
        _registration().on_session_state("LOST")
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "session lost" in caplog.records[0].getMessage()


def test_closing_the_session_on_shutdown_is_no_loss(caplog) -> None:
    registration = _registration()
    registration.stopping()
    with caplog.at_level(logging.INFO, logger="weir.server.registration"):
        registration.on_session_state("LOST")
    assert [r.getMessage() for r in caplog.records] == ["ZooKeeper session closed"]
