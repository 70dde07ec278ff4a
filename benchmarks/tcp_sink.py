# The physical reference: how fast can *any* Python asyncio server on this machine take
# bytes off a loopback socket, measured in the same run as the broker?
#
# The sink is a trivial asyncio.Protocol on the same event loop kafkalite uses (uvloop when
# installed) that counts bytes and discards them; it runs in its own process, as the broker
# does. The client writes 1 KiB chunks with blocking sendall(), half-closes, and waits for
# the sink to report the byte count, so the clock stops only when every byte was received.
# kafkalite's MiB/s divided by this one says how close the broker comes to the floor cost of
# receiving its input in Python on this machine. (Kafka framing, parsing and disk writes are
# extra work on top; the ratio cannot exceed ~1 except by measurement noise.)
#
#   python -m benchmarks.tcp_sink            # serve; prints "PORT <n>" on stdout
from __future__ import annotations

import argparse
import asyncio
import socket
import struct
import subprocess
import sys
import time


class _Sink(asyncio.Protocol):
    def __init__(self) -> None:
        self.count = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.count += len(data)

    def eof_received(self) -> bool:
        assert self.transport is not None
        self.transport.write(struct.pack(">q", self.count))
        self.transport.close()
        return True


async def _serve(stop_after: float) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Sink, "127.0.0.1", 0)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    await asyncio.sleep(stop_after)  # bounded life even if the parent dies
    server.close()


def _loop_name() -> str:
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="trivial asyncio TCP sink (loopback only)")
    ap.add_argument("--lifetime", type=float, default=600.0,
                    help="exit after this many seconds (default 600)")
    args = ap.parse_args(argv)
    _loop_name()
    asyncio.run(_serve(args.lifetime))
    return 0


def measure(total_bytes: int, chunk: int = 1024, timeout: float = 30.0) -> dict:
    """Spawn a sink, stream `total_bytes` (or until `timeout`) in `chunk`-byte writes, and
    return the received throughput."""
    from .broker_proc import _recv_exact, cpu_seconds

    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.tcp_sink",
                             "--lifetime", str(timeout + 30)],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline().split()  # type: ignore[union-attr]
        if len(line) != 2 or line[0] != "PORT":
            raise RuntimeError(f"tcp_sink did not report its port: {line!r}")
        port = int(line[1])
        data = b"\xab" * chunk
        writes = max(total_bytes // chunk, 1)
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            cpu0 = cpu_seconds(proc.pid)
            t0 = time.perf_counter()
            deadline = t0 + timeout
            sent = 0
            send = s.sendall
            while sent < writes:
                for _ in range(min(4096, writes - sent)):
                    send(data)
                sent += min(4096, writes - sent)
                if time.perf_counter() > deadline:
                    break
            s.shutdown(socket.SHUT_WR)
            got = struct.unpack(">q", _recv_exact(s, 8))[0]
            elapsed = time.perf_counter() - t0
            sink_cpu = cpu_seconds(proc.pid) - cpu0
        return {"chunk_bytes": chunk, "bytes": got, "seconds": round(elapsed, 3),
                "mib_per_s": round(got / elapsed / 2**20, 1),
                "sink_cpu_pct_of_core": round(100 * sink_cpu / elapsed, 1),
                "complete": got == sent * chunk}
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    sys.exit(main())
