"""A log dir of this broker failed while others are online (JBOD, KIP-112).

Kafka's ``ReplicaManager.handleLogDirFailure``: the replicas whose log is in the failed dir
stop being served (their fetchers and moves stop, they stop leading, waiters are woken and
every request for them answers KAFKA_STORAGE_ERROR from then on); the broker then tells the
controller through a log dir event notification (written by the broker's shell), and the
controller elects new leaders for them (:mod:`weir.controller.log_dir_events`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from weir.common import TopicPartition

if TYPE_CHECKING:
    from weir.replication.log_dir_mover import LogDirMover
    from weir.replication.replica_manager import ReplicaManager

__all__ = ["handle_log_dir_failure", "take_dir_offline"]

log = logging.getLogger(__name__)


def take_dir_offline(rm: ReplicaManager, mover: LogDirMover | None,
                     log_dir: Path) -> list[TopicPartition]:
    """Stop serving the replicas in ``log_dir`` (already offline in the log manager);
    returns them.  Moves into the failed dir were dropped by the log manager; their
    mover tasks find no future log and end."""
    lm = rm.log_manager
    offline = sorted(tp for tp in rm.partitions if lm.log_dir_of(tp) == log_dir)
    for tp in offline:
        rm.fetchers.remove(tp)
        if mover is not None:
            mover.cancel(tp)
        p = rm.partitions[tp]
        was_leader = p.is_leader
        p.leader = -1
        rm.notifier.leadership_changed(tp, False, p.leader_epoch, tell_listeners=was_leader)
    log.warning("stopped serving %d replicas in failed log dir %s: %s", len(offline), log_dir,
                [str(tp) for tp in offline])
    return offline


def handle_log_dir_failure(rm: ReplicaManager, mover: LogDirMover | None, log_dir: Path,
                           reason: str, notify_controller: Callable[[], None],
                           halt: Callable[[], None]) -> None:
    """Kafka's ``ReplicaManager.handleLogDirFailure``, a ``LogManager`` dir-failure
    listener: while other dirs are online (JBOD, KIP-112) stop serving the failed dir's
    replicas and ``notify_controller`` (the broker writes a log dir event notification);
    a broker none of whose dirs is left online calls ``halt``, so that its ZooKeeper session
    ends and the controller elects new leaders (leading on from a failed disk would stall
    its partitions for good)."""
    lm = rm.log_manager
    if lm.online_dirs:
        log.error("log dir %s failed (%s); its replicas are offline, %d dirs remain",
                  log_dir, reason, len(lm.online_dirs))
        take_dir_offline(rm, mover, log_dir)
        notify_controller()
        return
    log.critical("halting broker %d: all log dirs %s have failed (last: %s: %s)",
                 rm.broker_id, [str(d) for d in lm.log_dirs], log_dir, reason)
    halt()
