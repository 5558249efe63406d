"""Free loopback ports for local clusters, tests and benchmarks.

A port found by binding to port 0 comes from the kernel's ephemeral range
(``net.ipv4.ip_local_port_range``), the same range the kernel draws the source ports of
outgoing connections from. Between the moment such a port is chosen and the moment a broker
binds it, any connection opened on the machine (a broker's ZooKeeper session, a client) may
take it, and the broker then fails with "Address already in use". Ports below the ephemeral
range are never handed out that way, so :func:`free_port` draws from there, checks that the
port binds, and never hands the same port out twice in one process.
"""

from __future__ import annotations

import random
import socket

_BELOW_EPHEMERAL = 12_000  # how many ports under the ephemeral range to draw from
_LOWEST = 1_024
_handed_out: set[int] = set()


def ephemeral_range(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> tuple[int, int]:
    """The kernel's ephemeral port range; IANA's 49152-65535 where it cannot be read."""
    try:
        with open(path, encoding="ascii") as handle:
            low, high = (int(field) for field in handle.read().split())
        return low, high
    except (OSError, ValueError):
        return 49_152, 65_535


def _binds(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1", *, rng: random.Random | None = None,
              ephemeral: tuple[int, int] | None = None) -> int:
    """A TCP port on ``host`` that binds now, lies below the ephemeral range, and was not
    returned before by this process. Falls back to a kernel-chosen port when the range below
    the ephemeral one is too small to draw from."""
    draw = rng or random
    low = (ephemeral or ephemeral_range())[0]
    first = max(_LOWEST, low - _BELOW_EPHEMERAL)
    if low - first >= 1_000:
        for _ in range(200):
            port = draw.randrange(first, low)
            if port not in _handed_out and _binds(host, port):
                _handed_out.add(port)
                return port
    while True:  # the ephemeral range is all there is: let the kernel choose
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port
