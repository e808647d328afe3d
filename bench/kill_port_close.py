#!/usr/bin/env python3
"""How long a SIGKILLed process's UDP port stays open, against the memory it had touched.

A process's sockets close only when the kernel tears it down (Linux's do_exit unmaps its memory
before it closes its files), so a peer's datagram draws "port unreachable" only after that.
ftcoll over UDP finds a dead peer by that refusal (docs/agreement.md), so this time is the
floor of `agree --procs`'s detection of a real SIGKILL. For each size the script forks a child
that binds a UDP socket on 127.0.0.1 and touches SIZE MiB of memory, SIGKILLs it, and sends
to its port in a busy loop until the send or receive fails with ECONNREFUSED: the time from
the kill to that refusal, per trial, in µs.

usage: bench/kill_port_close.py [--sizes "1 10 50"] [--trials 5]
"""
import argparse
import os
import signal
import socket
import sys
import time


def trial(mib):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        buf = bytearray(mib << 20)
        for i in range(0, len(buf), 4096):
            buf[i] = 1
        os.write(w, str(s.getsockname()[1]).encode().ljust(8))
        while True:
            time.sleep(1)
    os.close(w)
    port = int(os.read(r, 8))
    os.close(r)
    c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    c.setblocking(False)
    c.connect(("127.0.0.1", port))
    time.sleep(0.02)
    t0 = time.perf_counter_ns()
    os.kill(pid, signal.SIGKILL)
    while True:
        try:
            c.send(b"x")
            try:
                c.recv(16)
            except BlockingIOError:
                pass
        except ConnectionRefusedError:
            break
    t1 = time.perf_counter_ns()
    os.waitpid(pid, 0)
    c.close()
    return (t1 - t0) / 1000


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1 10 50", help='MiB each child touches, e.g. "1 10 50"')
    p.add_argument("--trials", type=int, default=5, help="kills per size")
    a = p.parse_args()
    try:
        sizes = [int(x) for x in a.sizes.replace(",", " ").split()]
    except ValueError:
        sizes = []
    if not sizes or any(s < 0 or s > 4096 for s in sizes) or not 1 <= a.trials <= 1000:
        print("kill_port_close: error: --sizes takes MiB in 0..4096, --trials 1..1000", file=sys.stderr)
        sys.exit(2)
    print(f"load: {os.getloadavg()[0]:.2f}; SIGKILL to the refusal of a datagram to the killed process's port, µs")
    for mib in sizes:
        t = [trial(mib) for _ in range(a.trials)]
        print(f"{mib} MiB touched: " + " ".join(f"{x:.0f}" for x in t) + f"  (median {sorted(t)[len(t) // 2]:.0f})")


if __name__ == "__main__":
    main()
