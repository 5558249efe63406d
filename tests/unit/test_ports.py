"""weir.ports.free_port: ports a later bind gets, clear of outgoing connections' ports."""

import random
import socket

from weir.ports import ephemeral_range, free_port


def test_ports_lie_below_the_ephemeral_range_and_bind():
    low, _ = ephemeral_range()
    for _ in range(50):
        port = free_port()
        if low - max(1_024, low - 12_000) >= 1_000:
            assert port < low
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_no_port_is_handed_out_twice():
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)


def test_a_port_in_use_is_skipped():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        taken = busy.getsockname()[1]
        busy.listen()

        class FirstTheBusyPort(random.Random):
            calls = 0

            def randrange(self, start, stop=None, step=1):
                self.calls += 1
                return taken if self.calls == 1 else super().randrange(start, stop)

        rng = FirstTheBusyPort(7)
        port = free_port(rng=rng, ephemeral=(taken + 1, 65_535))
        assert rng.calls >= 2
        assert port != taken


def test_a_machine_without_room_below_the_ephemeral_range_gets_kernel_ports():
    ports = [free_port(ephemeral=(1_500, 65_535)) for _ in range(20)]
    assert len(set(ports)) == 20
    assert all(p >= 1_500 for p in ports)
