# Limits and load.
#
#   python -m benchmarks.reliability.limits --connections 1000 --partitions 2000 --seconds 300
#
# connection_limits: max.connections and max.connections.per.ip refuse extra connections
#   (source addresses 127.0.0.1-3, all loopback) while the admitted ones keep working.
# slow_reader: one client pipelines many 1 MiB Fetch requests and never reads; broker RSS
#   must stay bounded (server.py's write high-water mark and request queue) and another
#   client must still be served.
# concurrent_load: N connections produce (acks=-1) and fetch on P partitions for S seconds
#   with asyncio; every answer must be error-free, RSS is sampled, and at the end every
#   partition's log end offset equals the records acknowledged to it.
# full_disk: lives in disk.py.
from __future__ import annotations

import argparse
import asyncio
import random
import resource
import socket
import struct
import sys
import time

from compat_tests.wire import response_class

from .common import Broker, Conn, build_batch, create_topic, emit, list_offsets, produce_batch


def _frame(conn: Conn, key: int, version: int, fields: dict, cid: int) -> bytes:
    return conn.encode(key, version, fields, correlation_id=cid)[0]


def _answers(sock: socket.socket) -> bool:
    """Whether ApiVersions v0 is answered on this socket."""
    try:
        sock.settimeout(5.0)
        sock.sendall(struct.pack(">ihhih", 10, 18, 0, 99, -1))
        head = _read(sock, 4)
        body = _read(sock, struct.unpack(">i", head)[0])
        return struct.unpack(">i", body[:4])[0] == 99
    except (OSError, ConnectionError):
        return False


def _read(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def _connect(port: int, source: str) -> socket.socket:
    s = socket.socket()
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def connection_limits(per_ip: int = 4, total: int = 7) -> dict:
    """Admit per_ip from 127.0.0.1, then check refusals by address and in total."""
    b = Broker(settings={"max.connections": str(total), "max.connections.per.ip": str(per_ip)})
    b.start()  # not start_measured: its probe connection would hold a slot briefly
    socks: list[socket.socket] = []
    try:
        time.sleep(0.2)
        out: dict = {}
        socks = [_connect(b.port, "127.0.0.1") for _ in range(per_ip)]
        out["admitted_same_ip"] = sum(_answers(s) for s in socks)
        extra = _connect(b.port, "127.0.0.1")
        out["extra_same_ip_answered"] = _answers(extra)
        extra.close()
        others = [_connect(b.port, "127.0.0.2") for _ in range(total - per_ip)]
        out["admitted_other_ip"] = sum(_answers(s) for s in others)
        socks += others
        over = _connect(b.port, "127.0.0.3")
        out["over_total_answered"] = _answers(over)
        over.close()
        out["existing_still_answer"] = sum(_answers(s) for s in socks)
        socks.pop(0).close()
        time.sleep(0.3)
        again = _connect(b.port, "127.0.0.1")
        out["slot_reused_after_close"] = _answers(again)
        socks.append(again)
        out["refusals_logged"] = b.read_log().count("Refusing connection")
        return out
    finally:
        for s in socks:
            s.close()
        b.cleanup()


def slow_reader(requests: int = 400, megabytes: int = 24, seconds: float = 10.0) -> dict:
    b = Broker()
    b.start_measured()
    sock = None
    try:
        with Conn(b.bootstrap, timeout=30) as c:
            create_topic(c, "big", 1)
            value = random.Random(1).randbytes(1_000_000)
            for i in range(megabytes):
                assert produce_batch(c, "big", 0, build_batch([(b"%d" % i, value)]))[0] == 0
            rss0 = b.rss_mb()
            fetch = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                     "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
                     "forgotten_topics_data": [], "topics": [{"topic": "big", "partitions": [
                         {"partition": 0, "fetch_offset": 0, "current_leader_epoch": -1,
                          "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}
            sock = socket.create_connection(("127.0.0.1", b.port))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            sent = 0
            samples = [rss0]
            deadline = time.monotonic() + seconds
            pending = b""
            while time.monotonic() < deadline:
                if not pending and sent < requests:
                    fetch["topics"][0]["partitions"][0]["fetch_offset"] = sent % megabytes
                    pending = _frame(c, 1, 11, fetch, sent + 1)
                    sent += 1
                try:
                    n = sock.send(pending) if pending else 0
                    pending = pending[n:]
                except BlockingIOError:
                    time.sleep(0.05)  # the broker stopped reading us: as designed
                samples.append(b.rss_mb())
                time.sleep(0.01)
            served_other = c.call(18, 0).error_code == 0
        return {"fetch_requests_sent": sent, "partition_mb": megabytes,
                "rss_mb_before": round(rss0, 1), "rss_mb_max": round(max(samples), 1),
                "other_client_served": served_other, "broker_alive": b.alive()}
    finally:
        if sock is not None:
            sock.close()
        b.cleanup()


async def _client(port: int, cid0: int, topic: str, parts: list[int], frames: dict,
                  deadline: float, stats: dict, acked: dict) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    produce_cls, fetch_cls = response_class(0)[9], response_class(1)[11]
    rnd = random.Random(cid0)
    try:
        while time.monotonic() < deadline:
            p = rnd.choice(parts)
            is_produce = rnd.random() < 0.5
            writer.write(frames[("p" if is_produce else "f", p)])
            head = await reader.readexactly(4)
            body = await reader.readexactly(struct.unpack(">i", head)[0])
            if is_produce:
                part = produce_cls.decode(body, header=True).responses[0].partition_responses[0]
                if part.error_code == 0:
                    acked[p] = acked.get(p, 0) + frames["n"]
            else:
                part = fetch_cls.decode(body, header=True).responses[0].partitions[0]
            stats["ops"] += 1
            if part.error_code:
                stats["errors"][part.error_code] = stats["errors"].get(part.error_code, 0) + 1
    except (OSError, asyncio.IncompleteReadError) as e:
        stats["connection_errors"].append(repr(e)[:200])
    finally:
        writer.close()


def concurrent_load(connections: int = 200, partitions: int = 400, seconds: float = 30.0) -> dict:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < connections + 100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, connections * 2 + 1000), hard))
    b = Broker(settings={"num.partitions": "1"})
    b.start_measured()
    try:
        with Conn(b.bootstrap, timeout=60) as c:
            create_topic(c, "load", partitions)
            n = 5
            batch = build_batch([(b"k%d" % i, b"v" * 200) for i in range(n)])
            frames: dict = {"n": n}
            for p in range(partitions):
                frames[("p", p)] = _frame(c, 0, 9, {
                    "transactional_id": None, "acks": -1, "timeout_ms": 10000,
                    "topic_data": [{"name": "load", "partition_data": [
                        {"index": p, "records": batch}]}]}, 1)
                frames[("f", p)] = _frame(c, 1, 11, {
                    "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 65536,
                    "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
                    "forgotten_topics_data": [], "topics": [{"topic": "load", "partitions": [
                        {"partition": p, "fetch_offset": 0, "current_leader_epoch": -1,
                         "log_start_offset": -1, "partition_max_bytes": 65536}]}]}, 2)
        rss0 = b.rss_mb()
        stats: dict = {"ops": 0, "errors": {}, "connection_errors": []}
        acked: dict[int, int] = {}
        samples = [rss0]

        async def main() -> None:
            deadline = time.monotonic() + seconds
            tasks = [asyncio.create_task(_client(b.port, i, "load", list(range(partitions)),
                                                 frames, deadline, stats, acked))
                     for i in range(connections)]
            while not all(t.done() for t in tasks):
                samples.append(b.rss_mb())
                await asyncio.sleep(0.5)
            await asyncio.gather(*tasks)
        t0 = time.monotonic()
        asyncio.run(main())
        took = time.monotonic() - t0
        with Conn(b.bootstrap, timeout=60) as c:
            ends = list_offsets(c, "load", list(range(partitions)))
        mismatched = [p for p in range(partitions) if ends[p] != acked.get(p, 0)]
        return {"connections": connections, "partitions": partitions, "seconds": seconds,
                "requests_answered": stats["ops"], "requests_per_s": round(stats["ops"] / took),
                "error_codes": stats["errors"],
                "connection_errors": len(stats["connection_errors"]),
                "connection_error_examples": stats["connection_errors"][:3],
                "records_acked": sum(acked.values()),
                "partitions_with_leo_mismatch": len(mismatched),
                "rss_mb_before": round(rss0, 1), "rss_mb_max": round(max(samples), 1),
                "broker_fd_limit": _fd_limit(b.pid), "broker_alive": b.alive()}
    finally:
        b.cleanup()


def _fd_limit(pid: int | None) -> int:
    import psutil
    return psutil.Process(pid).rlimit(psutil.RLIMIT_NOFILE)[0] if pid else -1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Connection limits, slow readers, load.")
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    r = {"connection_limits": connection_limits(), "slow_reader": slow_reader(),
         "concurrent_load": concurrent_load(args.connections, args.partitions, args.seconds)}
    emit(r, args.json)
    load = r["concurrent_load"]
    return 0 if not load["error_codes"] and not load["connection_errors"] \
        and not load["partitions_with_leo_mismatch"] else 1


if __name__ == "__main__":
    sys.exit(main())
