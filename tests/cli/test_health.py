# `kafkalite health`, the Docker HEALTHCHECK: exit 0 with one "ok" line when the broker
# answers ApiVersions and Metadata, exit 1 with one error line otherwise.
from __future__ import annotations

import socket
import threading

from .conftest import assert_one_error_line, run_cli


def test_healthy_broker(cli, kafka_broker):
    r = cli("health")
    assert r.code == 0, r.err
    assert r.err == ""
    [line] = r.out.splitlines()
    assert line.startswith(f"ok: {kafka_broker} answered ApiVersions and Metadata v")
    [report] = cli("health", "--json").json()
    assert report["healthy"] is True and report["server"] == kafka_broker
    assert report["brokers"] == 1 and report["api_versions_version"] == 3
    assert report["cluster_id"] and report["metadata_version"] >= 1


def test_nothing_listening(dead_bootstrap):
    r = run_cli("health", "--bootstrap-server", dead_bootstrap)
    line = assert_one_error_line(r, 1, f"error: cannot connect to {dead_bootstrap}:", "refused")
    assert r.out == ""
    # worded as every other command words it
    assert line == run_cli("topics", "list", "--bootstrap-server", dead_bootstrap).err.strip()


def _serve(listener: socket.socket, reply: bytes | None, stop: threading.Event) -> None:
    """Accept connections; answer each with `reply` (or nothing) until stopped."""
    listener.settimeout(0.2)
    held = []
    while not stop.is_set():
        try:
            conn, _ = listener.accept()
        except socket.timeout:
            continue
        held.append(conn)
        if reply is not None:
            conn.recv(4096)
            conn.sendall(reply)
            conn.close()
    for conn in held:
        conn.close()


def _fake_broker(reply: bytes | None):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()
    thread = threading.Thread(target=_serve, args=(listener, reply, stop), daemon=True)
    thread.start()
    return listener, stop, thread


def _against_fake(reply: bytes | None, *commands: tuple[str, ...]) -> tuple[str, list]:
    listener, stop, thread = _fake_broker(reply)
    address = "127.0.0.1:%d" % listener.getsockname()[1]
    try:
        return address, [run_cli(*c, "--bootstrap-server", address, "--timeout", "1000")
                         for c in commands]
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def test_silent_server_is_unhealthy_within_the_timeout():
    # it accepts and never answers: --timeout ends the probe, in the admin commands' words
    address, (health, topics) = _against_fake(None, ("health",), ("topics", "list"))
    line = assert_one_error_line(health, 1, f"error: no Kafka broker answered at {address} "
                                            f"within 1000 ms")
    assert line == topics.err.strip()


def test_garbage_server_is_unhealthy():
    address, [r] = _against_fake(b"\x00\x00\x00\x02ok", ("health",))
    assert_one_error_line(r, 1, f"error: malformed answer from {address}",
                          "is this a Kafka broker?")
