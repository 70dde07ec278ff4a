# A producer and a group consumer per client library, running on their own while a test moves
# partition leaders (issue 17: "every client follows leadership changes"): kafka-python,
# aiokafka and confluent-kafka in child processes, the Java client as Kafka 3.8's
# kafka-verifiable-producer.sh / kafka-verifiable-consumer.sh (the client Spark's connector
# uses). Each writes the same report lines, so one check serves all four:
#   ok N PARTITION OFFSET / err N CODE       a delivery report (N: the record's value)
#   rec N PARTITION OFFSET                   a record consumed
#   commit PARTITION OFFSET / commitfail X   a synchronous commit acknowledged / refused
# The producers send acks=all with idempotence; the consumers commit after every batch and
# when partitions are revoked (the Java tool after every batch). Every loop is bounded.
from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing
import os
import subprocess
import time
from typing import Any

from .real_kafka import anchor_dir

CLIENTS = ("kafka-python", "aiokafka", "confluent", "java")
RATE = 200  # records/s offered


def _produce_kafka_python(servers: str, topic: str, out: Any, stop: Any) -> int:
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=servers, acks="all", enable_idempotence=True,
                      linger_ms=5, retries=1000, delivery_timeout_ms=60000)
    n = 0
    while not stop.wait(1 / RATE):
        f = p.send(topic, value=b"%d" % n)
        f.add_callback(lambda md, n=n: out.write(f"ok {n} {md.partition} {md.offset}\n"))
        f.add_errback(lambda e, n=n: out.write(f"err {n} {type(e).__name__}\n"))
        n += 1
    p.flush(60)
    p.close(10)
    return n


async def _produce_aiokafka(servers: str, topic: str, out: Any, stop: Any) -> int:
    from aiokafka import AIOKafkaProducer
    p = AIOKafkaProducer(bootstrap_servers=servers, acks="all", enable_idempotence=True,
                         linger_ms=5, request_timeout_ms=10000)
    await p.start()

    def report(n: int):
        def done(f: asyncio.Future) -> None:
            if f.exception() is None:
                out.write(f"ok {n} {f.result().partition} {f.result().offset}\n")
            else:
                out.write(f"err {n} {type(f.exception()).__name__}\n")
        return done
    n = 0
    try:
        while not stop.is_set():
            (await p.send(topic, value=b"%d" % n)).add_done_callback(report(n))
            n += 1
            await asyncio.sleep(1 / RATE)
        await p.flush()
    finally:
        await p.stop()
    return n


def offset_of(text: str) -> int:
    """A delivery report's offset; -1 when the client acknowledged the record without one:
    librdkafka's idempotent producer does so for a record whose request it had given up on
    (a disconnection, a timeout) once a later batch of the partition is acknowledged, which
    proves it persisted (its offset is then unknown; Kafka's Java client reports -1 for
    DUPLICATE_SEQUENCE_NUMBER alike)."""
    return -1 if text == "None" else int(text)


def confluent_report(out: Any, wall: bool = False) -> Any:
    """A confluent-kafka delivery callback writing 'ok N PARTITION OFFSET [WALL]' or
    'err N CODE' to `out`."""
    def report(err: Any, msg: Any) -> None:
        n = int(msg.value())
        if err is not None:
            out.write(f"err {n} {err.code()}\n")
        else:
            out.write(f"ok {n} {msg.partition()} {msg.offset()}"
                      + (f" {time.time():.3f}\n" if wall else "\n"))
    return report


def _produce_confluent(servers: str, topic: str, out: Any, stop: Any) -> int:
    import confluent_kafka as ck
    p = ck.Producer({"bootstrap.servers": servers, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 5, "message.timeout.ms": 60000, "log_level": 2})

    n = 0
    while not stop.is_set():
        p.produce(topic, value=b"%d" % n, on_delivery=confluent_report(out))
        n += 1
        p.poll(1 / RATE)
    p.flush(60)
    return n


def _quiet() -> None:
    # the clients log every refused connection to a broker that is down, as they should
    logging.disable(logging.ERROR)


def produce_child(client: str, servers: str, topic: str, path: str, stop: Any) -> None:
    _quiet()
    out = open(path, "a", buffering=1)
    if client == "kafka-python":
        n = _produce_kafka_python(servers, topic, out, stop)
    elif client == "aiokafka":
        n = asyncio.run(_produce_aiokafka(servers, topic, out, stop))
    else:
        n = _produce_confluent(servers, topic, out, stop)
    out.write(f"end {n}\n")
    out.close()


def committed(out: Any, done: dict, error: Exception | None) -> None:
    """Report a commit of `done` ({TopicPartition: next offset}) and forget it: failed, it
    means re-reads, never a lost commit."""
    if error is not None:
        out.write(f"commitfail {type(error).__name__}\n")
    else:
        out.writelines(f"commit {tp.partition} {o}\n" for tp, o in done.items())
    done.clear()


def _consume_kafka_python(servers, topic, group, out, stop) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.structs import OffsetAndMetadata
    done: dict = {}  # processed, not yet committed: tp -> next offset
    c = KafkaConsumer(bootstrap_servers=servers, group_id=group, enable_auto_commit=False,
                      auto_offset_reset="earliest", session_timeout_ms=10000,
                      heartbeat_interval_ms=500)

    def commit() -> None:
        if not done:
            return
        try:
            c.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in done.items()})
        except Exception as e:  # CommitFailedError, a coordinator error: re-read, not lost
            return committed(out, done, e)
        committed(out, done, None)

    class Revoked(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            commit()

        def on_partitions_assigned(self, assigned):
            pass
    c.subscribe([topic], listener=Revoked())
    try:
        while not stop.is_set():
            for tp, msgs in c.poll(200).items():
                for m in msgs:
                    out.write(f"rec {int(m.value)} {m.partition} {m.offset}\n")
                done[tp] = msgs[-1].offset + 1
            commit()
    finally:
        c.close()


async def _consume_aiokafka(servers, topic, group, out, stop) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    done: dict = {}
    c = AIOKafkaConsumer(bootstrap_servers=servers, group_id=group, enable_auto_commit=False,
                         auto_offset_reset="earliest", session_timeout_ms=10000,
                         heartbeat_interval_ms=500)

    async def commit() -> None:
        if not done:
            return
        try:
            await c.commit(dict(done))
        except Exception as e:  # CommitFailedError, a coordinator error: re-read, not lost
            return committed(out, done, e)
        committed(out, done, None)

    class Revoked(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            await commit()

        async def on_partitions_assigned(self, assigned):
            pass
    await c.start()
    c.subscribe([topic], listener=Revoked())
    try:
        while not stop.is_set():
            for tp, msgs in (await c.getmany(timeout_ms=200)).items():
                for m in msgs:
                    out.write(f"rec {int(m.value)} {m.partition} {m.offset}\n")
                done[tp] = msgs[-1].offset + 1
            await commit()
    finally:
        await c.stop()


def consume_child(client: str, servers: str, topic: str, group: str, path: str,
                  stop: Any) -> None:
    _quiet()
    out = open(path, "a", buffering=1)
    if client == "kafka-python":
        _consume_kafka_python(servers, topic, group, out, stop)
    elif client == "aiokafka":
        asyncio.run(_consume_aiokafka(servers, topic, group, out, stop))
    else:
        from .group_consumer import consume_loop
        out.close()
        consume_loop(servers, topic, group, path, stop)
        return
    out.close()


def java_lines(raw: str) -> list[str]:
    """The verifiable tools' JSON events as report lines."""
    lines = []
    for text in raw.split("\n")[:-1]:  # the last is being written
        if not text.startswith("{"):
            continue
        e = json.loads(text)
        name = e.get("name")
        if name == "producer_send_success":
            lines.append(f"ok {e['value']} {e['partition']} {e['offset']}")
        elif name == "producer_send_error":
            lines.append(f"err {e['value']} {e.get('exception')}")
        elif name == "record_data":
            lines.append(f"rec {e['value']} {e['partition']} {e['offset']}")
        elif name == "offsets_committed":
            if e["success"]:
                lines += [f"commit {o['partition']} {o['offset']}" for o in e["offsets"]]
            else:
                lines.append(f"commitfail {e.get('error')}")
        elif name == "tool_data":
            lines.append(f"end {e['sent']}")
    return lines


class ClientRun:
    """One client's producer or consumer running until stop(); lines() is its report."""

    def __init__(self, client: str, role: str, servers: str, topic: str, group: str,
                 path: str):
        self.client, self.role, self.path = client, role, path
        self.proc: Any = None
        if client == "java":
            tool = "kafka-verifiable-producer.sh" if role == "produce" else \
                "kafka-verifiable-consumer.sh"
            config = path + ".properties"
            with open(config, "w") as f:  # the tools' own defaults otherwise
                # the tool sets retries=0, which idempotence refuses
                f.write("enable.idempotence=true\nretries=2147483647\nlinger.ms=5\n"
                        if role == "produce" else "heartbeat.interval.ms=500\n")
            args = (["--max-messages", "-1", "--throughput", str(RATE), "--acks", "-1",
                     "--producer.config", config] if role == "produce" else
                    ["--group-id", group, "--reset-policy", "earliest", "--verbose",
                     "--session-timeout", "10000", "--consumer.config", config])
            self.command = [os.path.join(anchor_dir() or "", "bin", tool), "--bootstrap-server",
                            servers, "--topic", topic, *args]
        else:
            ctx = multiprocessing.get_context("spawn")
            self.stop_event = ctx.Event()
            target, args = ((produce_child, (client, servers, topic, path, self.stop_event))
                            if role == "produce" else
                            (consume_child, (client, servers, topic, group, path,
                                             self.stop_event)))
            self.proc = ctx.Process(target=target, args=args, daemon=True)

    def start(self) -> "ClientRun":
        if self.client == "java":
            env = {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx128m",
                   "KAFKA_JMX_OPTS": "-Dkafka.jmx.remote=off",
                   "LOG_DIR": os.path.dirname(self.path)}
            env.pop("JMX_PORT", None)
            # its log lines go to stderr's file: never in the middle of an event line
            with open(self.path, "ab") as out, open(self.path + ".err", "ab") as err:
                self.proc = subprocess.Popen(self.command, stdout=out, stderr=err,
                                             stdin=subprocess.DEVNULL, env=env)
        else:
            self.proc.start()
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """Ask it to finish (the Java tools: SIGTERM, their shutdown hooks flush, commit
        and report) and wait, bounded; killed past `timeout`."""
        if self.client == "java":
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        else:
            self.stop_event.set()
            self.proc.join(timeout)
            if self.proc.is_alive():
                self.proc.kill()

    def lines(self) -> list[str]:
        try:
            with open(self.path) as f:
                raw = f.read()
        except FileNotFoundError:
            return []
        return java_lines(raw) if self.client == "java" else raw.splitlines()

    def tail(self, chars: int = 2000) -> str:
        """The end of its raw output (the Java tools' stderr too), for failure messages."""
        out = ""
        for path in (self.path, self.path + ".err"):
            try:
                with open(path) as f:
                    out += f.read()[-chars:]
            except FileNotFoundError:
                pass
        return out

    def count(self, kind: str) -> int:
        return sum(1 for line in self.lines() if line.startswith(kind + " "))
