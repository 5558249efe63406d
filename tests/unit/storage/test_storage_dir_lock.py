"""The log dirs' ``.lock`` (Kafka's ``FileLock`` in ``LogManager.lockLogDirs``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from weir.storage.config import LogConfig
from weir.storage.dir_lock import LOCK_FILE, DirLock, LogDirLockedError, is_locked
from weir.storage.log_manager import LogManager


def test_a_held_lock_refuses_a_second_holder_until_released(tmp_path):
    lock = DirLock.acquire(tmp_path / "d")
    assert (tmp_path / "d" / LOCK_FILE).exists()
    with pytest.raises(LogDirLockedError, match=r"Failed to acquire lock on file \.lock in "):
        DirLock.acquire(tmp_path / "d")  # a second open file description, same process
    assert is_locked(tmp_path / "d")
    lock.release()
    assert not is_locked(tmp_path / "d")
    DirLock.acquire(tmp_path / "d").release()


def test_another_process_sees_the_lock(tmp_path):
    lock = DirLock.acquire(tmp_path)
    probe = ("import sys; from pathlib import Path; from weir.storage.dir_lock import "
             "is_locked; sys.exit(0 if is_locked(Path(sys.argv[1])) else 3)")
    command = [sys.executable, "-c", probe, str(tmp_path)]
    assert subprocess.run(command, check=False).returncode == 0
    lock.release()
    assert subprocess.run(command, check=False).returncode == 3


def test_log_manager_locks_every_dir_and_releases_at_shutdown(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    first = LogManager(dirs, LogConfig())
    first.lock_dirs()
    assert all(is_locked(d) for d in dirs)
    second = LogManager(dirs, LogConfig())
    with pytest.raises(LogDirLockedError):
        second.lock_dirs()
    first.startup(0)
    first.shutdown()
    assert not any(is_locked(d) for d in dirs)
    second.lock_dirs()
    second.release_locks()


def test_a_dir_that_cannot_be_locked_for_an_io_error_goes_offline(tmp_path):
    (tmp_path / "file").write_text("not a dir")
    manager = LogManager([tmp_path / "file", tmp_path / "ok"], LogConfig())
    manager.lock_dirs()
    assert list(manager.offline_dirs) == [tmp_path / "file"]
    assert is_locked(tmp_path / "ok")
    manager.release_locks()
