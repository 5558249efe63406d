"""The event loop a broker process runs on: uvloop (libuv) where it is installed.

Every step of a replication round trip (a frame read, a task woken by a purgatory, a
response written) is a turn of the loop, a handle and a callback: with acks=all, one
produce takes about 12 turns on the leader and 4 on each follower (docs/perf-history.md).
uvloop runs that machinery in C behind the same ``asyncio`` API (tasks,
futures, transports, streams, signals, executors). Measured with ``bench/event_loop.py``:
with 16 KiB batches the RF 3 leader's CPU is 4-5 % lower; with 256 KiB batches the
difference is within the runs' spread. The broker's code runs on it unchanged, with two
things uvloop does its own way:

* it receives into a protocol's buffers (``get_buffer``) only if the protocol is not also
  an ``asyncio.Protocol``; one that is gets a new ``bytes`` per read through
  ``data_received``. The frame readers (:class:`weir.protocol.framing.FrameReceiver`) are
  plain ``BufferedProtocol``s, with :class:`weir.protocol.framing.WriterFlowControl` for
  their ``StreamWriter`` (as ``StreamReaderProtocol``s they copied each read's ``bytes``
  into their buffers: two copies of every 256 KiB produce request and Fetch response);
* there is no ``loop.sendfile``: a file region the socket did not take at once
  (``weir.server.direct_send``) is then sent by ``pread`` and ``write``.

``WEIR_EVENT_LOOP=asyncio`` in the environment keeps a broker on asyncio's loop (to compare
the two). The simulation (``weir.sim``) never comes here: it runs the broker's code on its
own loop with simulated time.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

ENV = "WEIR_EVENT_LOOP"


def loop_factory() -> tuple[str, Callable[[], asyncio.AbstractEventLoop] | None]:
    """(the loop's name, a factory for it; None for asyncio's default)."""
    if os.environ.get(ENV, "").strip().lower() == "asyncio":
        return "asyncio", None
    try:
        import uvloop
    except ImportError:
        return "asyncio", None
    return f"uvloop {uvloop.__version__}", uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop :func:`loop_factory` picks."""
    _name, factory = loop_factory()
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def native_sendfile(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop.sendfile`` works on this loop (asyncio's; uvloop has none)."""
    return isinstance(loop, asyncio.BaseEventLoop)
