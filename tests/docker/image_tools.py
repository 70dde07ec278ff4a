# Python side of scripts/docker-smoke.sh, one subcommand each:
#   field NAME[+NAME]     a field of the image config (JSON on stdin), list items one a line
#   contract              check the image config (JSON on stdin) against the Dockerfile's promises
#   ready PORT            exit 0 when 127.0.0.1:PORT answers an ApiVersions v0 request
#   client BOOT TOPIC produce|consume   round-trip records with kafka-python
#   sasl BOOT TOPIC USER PASSWORD ok|refused   confluent-kafka over SASL_PLAINTEXT/SCRAM-SHA-512
#   free-port             print a free 127.0.0.1 port
# It runs under the repo's .venv (kafka-python, confluent-kafka), never inside the image.
from __future__ import annotations

import json
import socket
import struct
import sys

RECORDS = [(b"k%d" % i, b"value-%d" % i) for i in range(5)]


def field(names: str) -> None:
    config = json.load(sys.stdin)
    keys = names.split("+")
    values = [config.get(k) for k in keys]
    if keys == ["Healthcheck"]:
        test = (values[0] or {}).get("Test") or []
        # ["CMD", argv...] or ["CMD-SHELL", "command"], as Docker runs them.
        values = [test[1:] if test[:1] == ["CMD"] else ["sh", "-c", test[1]]]
    for v in values:
        print("\n".join(v) if isinstance(v, list) else (v or ""))


def contract() -> int:
    c = json.load(sys.stdin)
    env = dict(e.split("=", 1) for e in c.get("Env") or [])
    user = str(c.get("User") or "")
    test = (c.get("Healthcheck") or {}).get("Test") or []
    problems = []
    if user in ("", "root", "0") or user.startswith(("0:", "root:")):
        problems.append(f"runs as root (User={user!r})")
    if "/var/lib/kafkalite" not in (c.get("Volumes") or {}):
        problems.append("no volume /var/lib/kafkalite")
    if "9092/tcp" not in (c.get("ExposedPorts") or {}):
        problems.append("port 9092 not exposed")
    for key, want in (("KAFKALITE_LISTENERS", "PLAINTEXT://0.0.0.0:9092"),
                      ("KAFKALITE_LOG_DIRS", "/var/lib/kafkalite")):
        if env.get(key) != want:
            problems.append(f"{key}={env.get(key)!r}, expected {want!r}")
    if "kafkalite health" not in " ".join(test):
        problems.append(f"health check is {test!r}")
    if problems:
        print("image config: " + "; ".join(problems), file=sys.stderr)
        return 1
    print(f"[docker-smoke] image config ok: user {user}, healthcheck {test}")
    return 0


def ready(port: int) -> int:
    # A bare TCP connect is not enough: docker's port proxy accepts connections before
    # the broker inside the container listens.
    client_id = b"docker-smoke"
    frame = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    try:
        with socket.create_connection(("127.0.0.1", port), 0.5) as s:
            s.settimeout(1.0)
            s.sendall(struct.pack(">i", len(frame)) + frame)
            return 0 if len(s.recv(8)) >= 4 else 1
    except OSError:
        return 1


def client(boot: str, topic: str, mode: str) -> int:
    from kafka import KafkaConsumer, KafkaProducer
    if mode == "produce":
        p = KafkaProducer(bootstrap_servers=boot, acks="all", request_timeout_ms=15000)
        for k, v in RECORDS:
            p.send(topic, key=k, value=v).get(timeout=30)
        p.flush(timeout=30)
        p.close(timeout=10)
    c = KafkaConsumer(topic, bootstrap_servers=boot, auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=15000)
    got = []
    for m in c:
        got.append((m.key, m.value))
        if len(got) >= len(RECORDS):
            break
    c.close()
    return _read_back(got, mode, topic)


def _read_back(got: list, label: str, topic: str) -> int:
    """0 when the records read are RECORDS (said on stdout), else 1 (said on stderr)."""
    if got != RECORDS:
        print(f"records did not round-trip: sent {RECORDS}, read {got}", file=sys.stderr)
        return 1
    print(f"[docker-smoke] {label}: read back {len(got)} records from {topic}")
    return 0


def sasl(boot: str, topic: str, user: str, password: str, expect: str) -> int:
    """Produce and read back RECORDS as `user` over SASL_PLAINTEXT with SCRAM-SHA-512
    (expect ok), or see the login refused (expect refused) and nothing delivered."""
    from confluent_kafka import Consumer, KafkaError, Producer
    conf = {"bootstrap.servers": boot, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
            "sasl.password": password}
    errors: list = []
    p = Producer({**conf, "acks": "all", "message.timeout.ms": 10000,
                  "error_cb": errors.append})
    delivered: list = []
    for k, v in RECORDS:
        p.produce(topic, key=k, value=v,
                  on_delivery=lambda err, msg: delivered.append(err))
    p.flush(30)
    if expect == "refused":
        auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        if not auth or any(err is None for err in delivered):
            print(f"wrong password not refused: errors {errors}, deliveries {delivered}",
                  file=sys.stderr)
            return 1
        print(f"[docker-smoke] sasl: wrong password refused ({auth[0].str()})")
        return 0
    if delivered != [None] * len(RECORDS):
        print(f"SASL produce failed: {delivered} {errors}", file=sys.stderr)
        return 1
    c = Consumer({**conf, "group.id": f"{topic}-g", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got: list = []
    for _ in range(60):  # bounded: 60 polls of at most 0.5 s
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.key(), m.value()))
        if len(got) >= len(RECORDS):
            break
    c.close()
    return _read_back(got, f"sasl {user}", topic)


def free_port() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        print(s.getsockname()[1])


def main(argv: list[str]) -> int:
    cmd, args = argv[0], argv[1:]
    if cmd == "field":
        field(args[0])
        return 0
    if cmd == "contract":
        return contract()
    if cmd == "ready":
        return ready(int(args[0]))
    if cmd == "client":
        return client(*args)
    if cmd == "sasl":
        return sasl(*args)
    if cmd == "free-port":
        free_port()
        return 0
    print(f"unknown command {cmd!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
