# Produce and consume through the three unmodified client libraries (confluent-kafka,
# kafka-python, aiokafka) behind one small interface, for the integration tests. Every loop
# is bounded by a deadline.
from __future__ import annotations

import asyncio
import time
from typing import Any, Iterable

CLIENTS = ("confluent", "kafka-python", "aiokafka")

# (partition, key, value, headers, timestamp ms or None)
Record = tuple


def _headers(h: Any) -> list[tuple[str, bytes | None]]:
    return [(k, None if v is None else bytes(v)) for k, v in (h or [])]


def produce(client: str, bootstrap: str, topic: str, records: Iterable[Record],
            codec: str = "none", acks: Any = "all", idempotent: bool = False,
            timeout: float = 60.0, **extra: Any) -> list[tuple[int, int]]:
    """Send every record and wait for all acknowledgements; returns (partition, offset)
    per record (offset -1 for acks=0). Any delivery error raises."""
    records = list(records)
    if client == "confluent":
        return _produce_confluent(bootstrap, topic, records, codec, acks, idempotent, timeout,
                                  extra)
    if client == "kafka-python":
        return _produce_kafka_python(bootstrap, topic, records, codec, acks, idempotent,
                                     timeout, extra)
    return asyncio.run(_produce_aiokafka(bootstrap, topic, records, codec, acks, idempotent,
                                         timeout, extra))


def _produce_confluent(bootstrap, topic, records, codec, acks, idempotent, timeout, extra):
    import confluent_kafka as ck
    conf = {"bootstrap.servers": bootstrap, "compression.type": codec, "acks": str(acks),
            "enable.idempotence": idempotent, "linger.ms": 5,
            "message.timeout.ms": int(timeout * 1000), **extra}
    p = ck.Producer(conf)
    results: list = [None] * len(records)
    errors: list = []

    def done(i):
        def cb(err, msg):
            if err is not None:
                errors.append(err)
            else:
                results[i] = (msg.partition(), msg.offset())
        return cb
    deadline = time.monotonic() + timeout
    for i, (part, key, value, headers, ts) in enumerate(records):
        while True:
            try:
                p.produce(topic, value=value, key=key, partition=part, headers=headers or None,
                          timestamp=ts or 0, on_delivery=done(i))
                break
            except BufferError:
                p.poll(0.05)
                assert time.monotonic() < deadline, "producer queue never drained"
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(max(deadline - time.monotonic(), 1))
    assert left == 0 and not errors, (left, errors[:3])
    return results


def _produce_kafka_python(bootstrap, topic, records, codec, acks, idempotent, timeout, extra):
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap,
                      compression_type=None if codec == "none" else codec,
                      acks=acks if acks == "all" else int(acks),
                      enable_idempotence=idempotent, linger_ms=5, **extra)
    try:
        futs = [p.send(topic, value=value, key=key, partition=part, headers=headers or [],
                       timestamp_ms=ts)
                for part, key, value, headers, ts in records]
        p.flush(timeout)
        out = []
        for f in futs:
            md = f.get(timeout=1)
            out.append((md.partition, md.offset))
        return out
    finally:
        p.close(timeout=5)


async def _produce_aiokafka(bootstrap, topic, records, codec, acks, idempotent, timeout,
                            extra):
    from aiokafka import AIOKafkaProducer
    p = AIOKafkaProducer(bootstrap_servers=bootstrap,
                         compression_type=None if codec == "none" else codec,
                         acks=acks if acks == "all" else int(acks),
                         enable_idempotence=idempotent, linger_ms=5,
                         request_timeout_ms=int(timeout * 1000), **extra)
    await p.start()
    try:
        futs = [await p.send(topic, value=value, key=key, partition=part,
                             headers=headers or None, timestamp_ms=ts)
                for part, key, value, headers, ts in records]
        mds = await asyncio.wait_for(asyncio.gather(*futs), timeout)
        return [(md.partition, md.offset) if md is not None else (-1, -1) for md in mds]
    finally:
        await p.stop()


# --- consuming ---------------------------------------------------------------------------

# (partition, offset, key, value, headers, timestamp type 0=create 1=log-append, timestamp)
Consumed = tuple


def consume(client: str, bootstrap: str, topic: str, counts: dict[int, int],
            timeout: float = 60.0, start: dict[int, int] | None = None,
            **extra: Any) -> dict[int, list[Consumed]]:
    """Read `counts[p]` records from each partition p (from `start[p]`, default the
    beginning) by assignment, without a group; returns them per partition in order."""
    start = start or {p: 0 for p in counts}
    if client == "confluent":
        return _consume_confluent(bootstrap, topic, counts, timeout, start, extra)
    if client == "kafka-python":
        return _consume_kafka_python(bootstrap, topic, counts, timeout, start, extra)
    return asyncio.run(_consume_aiokafka(bootstrap, topic, counts, timeout, start, extra))


def _done(out: dict, counts: dict) -> bool:
    return all(len(out[p]) >= n for p, n in counts.items())


def _consume_confluent(bootstrap, topic, counts, timeout, start, extra):
    import confluent_kafka as ck
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "kl-tests",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest", **extra})
    out: dict = {p: [] for p in counts}
    try:
        c.assign([ck.TopicPartition(topic, p, start[p]) for p in counts])
        deadline = time.monotonic() + timeout
        while not _done(out, counts) and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                assert m.error() is None, m.error()
                ttype, ts = m.timestamp()
                out[m.partition()].append((m.partition(), m.offset(), m.key(), m.value(),
                                           _headers(m.headers()), ttype - 1, ts))
    finally:
        c.close()
    return out


def _rows(msgs) -> list[Consumed]:
    """kafka-python's and aiokafka's ConsumerRecords, which share their field names."""
    return [(m.partition, m.offset, m.key, m.value, _headers(m.headers), m.timestamp_type,
             m.timestamp) for m in msgs]


def _assign(c: Any, tp_cls: Any, topic: str, start: dict[int, int]) -> None:
    tps = [tp_cls(topic, p) for p in start]
    c.assign(tps)
    for tp in tps:
        c.seek(tp, start[tp.partition])


def _consume_kafka_python(bootstrap, topic, counts, timeout, start, extra):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", **extra)
    out: dict = {p: [] for p in counts}
    try:
        _assign(c, TopicPartition, topic, start)
        deadline = time.monotonic() + timeout
        while not _done(out, counts) and time.monotonic() < deadline:
            for tp, msgs in c.poll(500).items():
                out[tp.partition] += _rows(msgs)
    finally:
        c.close()
    return out


async def _consume_aiokafka(bootstrap, topic, counts, timeout, start, extra):
    from aiokafka import AIOKafkaConsumer, TopicPartition
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                         auto_offset_reset="earliest", **extra)
    await c.start()
    out: dict = {p: [] for p in counts}
    try:
        _assign(c, TopicPartition, topic, start)
        deadline = time.monotonic() + timeout
        while not _done(out, counts) and time.monotonic() < deadline:
            for tp, msgs in (await c.getmany(timeout_ms=500)).items():
                out[tp.partition] += _rows(msgs)
    finally:
        await c.stop()
    return out
