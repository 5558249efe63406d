"""How a Fetch response's header, records and tail are best handed to a loopback socket.

A leader sends each follower, once per acks=all produce, a Fetch response made of a small
header, the records (``sendfile`` from the page cache) and a 3-byte tail (the tagged
fields after the records), the way ``weir.server.direct_send`` does. This benchmark sends
such a response to a reader in another process (epoll, non-blocking reads, as the
follower's loop reads) and waits for its one-byte answer, in four ways:

* ``cork``: ``TCP_CORK`` on, header, ``sendfile``, tail, ``TCP_CORK`` off (Weir until
  session 13);
* ``more``: the header with ``send(MSG_MORE)``, then ``sendfile`` and the tail (Weir now;
  Kafka's ``PlaintextTransportLayer`` writes the header, then ``transferTo``);
* ``plain``: each chunk by itself (TCP_NODELAY: the header leaves as its own segment);
* ``more-all``: every chunk but the last with ``MSG_MORE`` (several regions only).

and reports, per way, the sender's time in the system calls (its CPU on the leader) and
the round trip, p50 / p99, and how often the reader woke per response. Also with three
regions (a Fetch response of three partitions). Usage::

    .venv/bin/python -m bench run direct_send [--rounds 3000] [--bytes 261599]

Results: bench/results/direct_send.md (python -m bench run).
"""

from __future__ import annotations

import argparse
import datetime
import os
import select
import socket
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import machine, out_dir

HERE = Path(__file__).resolve().parent
RESULTS = out_dir()
WAYS = ("cork", "more", "plain", "more-all")


def _plan(size: int, regions: int) -> list[bytes | tuple[int, int]]:
    """Header, then per region (position, length) and the bytes after it."""
    each = (size - 63 - 3 - 20 * (regions - 1)) // regions
    plan: list[bytes | tuple[int, int]] = [b"h" * 63]
    for i in range(regions):
        plan.append((i * each, each))
        plan.append(b"m" * 20 if i < regions - 1 else b"abc")
    return plan


def _reader(listener: socket.socket, total: int, rounds: int, report: int) -> None:
    """The follower's side: wait (epoll), read what is there, answer one byte per
    response; at the end write the number of wake-ups to ``report``."""
    conn, _ = listener.accept()
    conn.setblocking(False)
    view = memoryview(bytearray(total))
    poll = select.epoll()
    poll.register(conn.fileno(), select.EPOLLIN)
    wakes = 0
    for _ in range(rounds):
        got = 0
        while got < total:
            poll.poll()
            wakes += 1
            try:
                n = conn.recv_into(view[got:])
            except BlockingIOError:
                continue
            if n == 0:
                os._exit(1)
            got += n
        conn.send(b"x")
    os.write(report, str(wakes).encode())
    os._exit(0)


def measure(way: str, regions: int, size: int, rounds: int, path: str) -> dict:
    plan = _plan(size, regions)
    total = sum(len(c) if isinstance(c, bytes) else c[1] for c in plan)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        _reader(listener, total, rounds, report_w)
    sock = socket.create_connection(listener.getsockname())
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    fd, src = sock.fileno(), os.open(path, os.O_RDONLY)
    send_s, trip_s = [], []
    try:
        for _ in range(rounds):
            start = time.perf_counter()
            if way == "cork":
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            for i, chunk in enumerate(plan):
                last = i == len(plan) - 1
                if isinstance(chunk, bytes):
                    if (way == "more" and i == 0) or (way == "more-all" and not last):
                        sock.send(chunk, socket.MSG_MORE)
                    else:
                        os.write(fd, chunk)
                    continue
                done = 0
                while done < chunk[1]:
                    done += os.sendfile(fd, src, chunk[0] + done, chunk[1] - done)
            if way == "cork":
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
            sent = time.perf_counter()
            sock.recv(1)
            send_s.append(sent - start)
            trip_s.append(time.perf_counter() - start)
        os.waitpid(pid, 0)
        wakes = int(os.read(report_r, 64) or b"0")
    finally:
        os.close(src)
        sock.close()
        listener.close()
        os.close(report_r)
        os.close(report_w)
    send_s.sort()
    trip_s.sort()

    def q(xs: list[float], p: float) -> float:
        return round(xs[min(len(xs) - 1, int(p * len(xs)))] * 1e6, 1)

    return {"way": way, "regions": regions, "send_p50_us": q(send_s, 0.5),
            "send_p99_us": q(send_s, 0.99), "trip_p50_us": q(trip_s, 0.5),
            "trip_p99_us": q(trip_s, 0.99), "wakes_per_response": round(wakes / rounds, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3000)
    parser.add_argument("--bytes", type=int, default=261599, help="one response's size")
    args = parser.parse_args(argv)
    info = machine()
    rows = []
    with tempfile.TemporaryDirectory(prefix="weir-bench-send-") as tmp:
        path = str(Path(tmp) / "00000000000000000000.log")
        Path(path).write_bytes(os.urandom(args.bytes))
        for regions in (1, 3):
            for way in WAYS:
                if way == "more-all" and regions == 1:
                    continue  # the same as "more" with one region
                rows.append(measure(way, regions, args.bytes, args.rounds, path))
                print(rows[-1], flush=True)
    when = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    lines = [f"# A Fetch response's send, four ways — {when}", "",
             (f"Commit `{info['commit']}`; {info.get('cpu', '?')}, {info.get('cores', '?')} "
              f"cores; Python {sys.version.split()[0]}. {args.bytes} bytes per response, "
              f"{args.rounds} responses per way, loopback TCP, the reader in another process "
              "(bench/direct_send.py). Microseconds."), "",
             ("| regions | way | send p50 | send p99 | round trip p50 | round trip p99 | "
              "reader wake-ups per response |"), "|---:|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['regions']} | {r['way']} | {r['send_p50_us']} | {r['send_p99_us']} | "
              f"{r['trip_p50_us']} | {r['trip_p99_us']} | {r['wakes_per_response']} |"
              for r in rows]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"direct_send-{when}.md"
    out.write_text("\n".join(lines) + "\n")
    print(out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
