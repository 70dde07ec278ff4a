# The client side of the benchmark, all with confluent-kafka (librdkafka), configured as a
# serious benchmark would be: producers batch (linger.ms, 1 MB batch.size, no compression)
# and report only failed deliveries (a Python callback per message would measure the
# callback); consumers fetch in bulk with fetch.queue.backoff.ms low, because librdkafka
# otherwise throttles its own fetching (it backs off for 1 s whenever its local queue is
# over its thresholds). Every loop stops at its message count or its deadline, whichever
# comes first; a run that hit its deadline says so ("complete": false).
#
# Throughput counts payload (value) bytes only, like Kafka's producer/consumer perf tools,
# in MiB/s (2**20 bytes), which is what those tools print as "MB/sec".
from __future__ import annotations

import os
import struct
import threading
import time
import uuid

from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError, KafkaException,
                             Message, Producer, TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, name: str, partitions: int, timeout: float = 15.0) -> dict:
    """CreateTopics when the broker serves it; otherwise let a Metadata request auto-create
    the topic (a spawned broker has num.partitions set to match). Returns how it was made
    and the partition count the broker reports."""
    how = "CreateTopics"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.create_topics([NewTopic(name, partitions, 1)],
                            operation_timeout=timeout)[name].result(timeout)
    except KafkaException as e:
        err = e.args[0]
        if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            how = "existing"
        elif err.code() == KafkaError._UNSUPPORTED_FEATURE:
            how = "auto-created via Metadata (CreateTopics not served)"
        else:  # a broken CreateTopics must not stop the benchmark; say what happened
            how = f"CreateTopics failed ({err.str()}); Metadata auto-create fallback"
    p = Producer({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    count = 0
    while time.monotonic() < deadline:
        md = p.list_topics(name, timeout=max(deadline - time.monotonic(), 0.1))
        t = md.topics.get(name)
        if t is not None and t.error is None and t.partitions:
            count = len(t.partitions)
            break
        time.sleep(0.05)
    if not count:
        raise RuntimeError(f"topic {name} did not appear within {timeout}s")
    return {"topic": name, "partitions": count, "created_by": how}


def delete_topic(bootstrap: str, name: str, timeout: float = 15.0) -> str | None:
    """Best-effort DeleteTopics, so that finished tests' data (and its dirty page cache) is
    gone before the next test. Returns an error string, or None when deleted."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.delete_topics([name], operation_timeout=timeout)[name].result(timeout)
        return None
    except KafkaException as e:
        return e.args[0].str()
    except Exception as e:  # a broker without DeleteTopics, a timeout...
        return str(e)


def partition_high_watermarks(bootstrap: str, topic: str, partitions: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-wm-{uuid.uuid4().hex}",
                  "enable.auto.commit": False})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, i), timeout=10)[1]
                for i in range(partitions)]
    finally:
        c.close()


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> int:
    return sum(partition_high_watermarks(bootstrap, topic, partitions))


def _rate(count: int, size: int, seconds: float) -> dict:
    return {"msgs_per_s": round(count / seconds) if seconds > 0 else None,
            "mib_per_s": round(count * size / seconds / 2**20, 1) if seconds > 0 else None}


def produce(bootstrap: str, topic: str, size: int, acks: str, count: int,
            timeout: float, linger_ms: int = 10, batch_size: int = 1_000_000,
            client_conf: dict | None = None) -> dict:
    errors: list[str] = []

    def on_error(err, _msg) -> None:
        if err is not None and len(errors) < 10:
            errors.append(str(err))

    p = Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": linger_ms,
        "batch.size": batch_size, "compression.type": "none",
        "enable.idempotence": False,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "delivery.report.only.error": True, "on_delivery": on_error, **(client_conf or {}),
    })
    p.list_topics(topic, timeout=10)  # connect and learn leaders before the clock starts
    payload = os.urandom(size)
    send, poll = p.produce, p.poll
    full_waits = 0
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    deadline = t0 + timeout
    sent = 0
    while sent < count and time.perf_counter() < deadline:
        n = min(10_000, count - sent)
        i = 0
        while i < n:
            try:
                send(topic, payload)
                i += 1
            except BufferError:  # local queue full: the broker is behind
                full_waits += 1
                poll(0.001)
        sent += n
        poll(0)
    unacked = p.flush(max(deadline - time.perf_counter(), 1.0))
    elapsed = time.perf_counter() - t0
    client_cpu = time.process_time() - cpu0
    acked = sent - unacked - len(errors)
    return {"size": size, "acks": acks, "topic": topic, "requested": count, "sent": sent,
            "acked": acked, "seconds": round(elapsed, 3), **_rate(acked, size, elapsed),
            "client_cpu_s": round(client_cpu, 3), "queue_full_waits": full_waits,
            "errors": errors, "complete": acked == count and not errors}


def consume(bootstrap: str, topic: str, partitions: int | list[int], size: int, count: int,
            timeout: float, group: bool = False, client_conf: dict | None = None) -> dict:
    """Read `count` records of `topic` from the beginning of `partitions` (a count: all of
    0..n-1; or a list of partition indexes). With `group`, subscribe() as a fresh consumer
    group instead (JoinGroup/SyncGroup, then the assigned partitions from the start), as
    applications do; the join happens before the first message, so outside the rate."""
    parts = list(range(partitions)) if isinstance(partitions, int) else list(partitions)
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "fetch.queue.backoff.ms": 10, "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": 1_048_576, "queued.min.messages": 1_000_000,
        "queued.max.messages.kbytes": 262_144, "enable.partition.eof": False,
        **(client_conf or {}),
    })
    errors: list[str] = []
    got = 0
    first = None
    first_batch = 0
    try:
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        deadline = t0 + timeout
        if group:
            c.subscribe([topic])
        else:
            c.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in parts])
        while got < count and time.perf_counter() < deadline:
            # consume(n) returns early only once it has n messages: ask for no more than
            # are still due, or the last batch would wait out the timeout.
            msgs = c.consume(min(10_000, count - got), 0.2)
            if msgs and first is None:
                first = time.perf_counter() - t0
                first_batch = len(msgs)
            got += len(msgs)
            bad = [e for e in map(Message.error, msgs) if e is not None]
            if bad:
                got -= len(bad)
                errors.extend(str(e) for e in bad[:10 - len(errors)])
        elapsed = time.perf_counter() - t0
        client_cpu = time.process_time() - cpu0
    finally:
        c.close()
    # The headline rate runs from the first message to the last: before the first message
    # librdkafka spends a client-side pause (~0.5 s here) between connecting and sending
    # ListOffsets that says nothing about the broker. The whole-span rate is kept too. The
    # first batch arrived at the start of the clock, so it is not counted in the rate.
    steady = elapsed - (first or 0.0)
    overall = _rate(got, size, elapsed)
    basis = "first to last message"
    rate = _rate(got - first_batch, size, steady)
    if got - first_batch <= 0 or steady <= 0:  # tiny run: everything came in one batch
        basis, steady, rate = "whole span (one batch)", elapsed, overall
    return {"size": size, "topic": topic, "group": group, "requested": count, "received": got,
            "seconds": round(steady, 3), **rate, "rate_basis": basis,
            "first_message_s": round(first, 3) if first is not None else None,
            "seconds_incl_first": round(elapsed, 3),
            # absolute CLOCK_MONOTONIC marks, comparable across processes on Linux
            "t_first": t0 + (first or 0.0), "t_end": t0 + elapsed, "first_batch": first_batch,
            "msgs_per_s_incl_first": overall["msgs_per_s"],
            "mib_per_s_incl_first": overall["mib_per_s"],
            "client_cpu_s": round(client_cpu, 3), "errors": errors,
            "complete": got == count and not errors}


_STAMP = struct.Struct(">qB")  # send time (perf_counter_ns), 1 = measured / 0 = warm-up


def latency(bootstrap: str, topic: str, partitions: int, rate: int, seconds: float,
            size: int = 100, acks: str = "1", warmup: int = 200, timeout: float = 30.0,
            producer_conf: dict | None = None, consumer_conf: dict | None = None) -> dict:
    """Produce at a fixed rate with no batching delay and consume in another thread of this
    process; the latency of a message is receive time minus the send time it carries (one
    clock, so no skew)."""
    total = int(rate * seconds)
    lat_ns: list[int] = []
    warm_seen = threading.Event()
    errors: list[str] = []
    ready = threading.Event()
    stop = threading.Event()

    def consumer() -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}",
                      "enable.auto.commit": False, "fetch.queue.backoff.ms": 10,
                      "fetch.wait.max.ms": 500, "fetch.min.bytes": 1,
                      "enable.partition.eof": False, **(consumer_conf or {})})
        try:
            c.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in range(partitions)])
            ready.set()
            clock = time.perf_counter_ns
            while len(lat_ns) < total and not stop.is_set():
                # poll(), not consume(n, t): a batch consume waits for all n messages or
                # the full timeout, which would be measured as latency.
                m = c.poll(0.05)
                now = clock()
                if m is None:
                    continue
                if m.error() is not None:
                    if len(errors) < 10:
                        errors.append(str(m.error()))
                    continue
                sent_ns, measured = _STAMP.unpack_from(m.value(), 0)
                if measured:
                    lat_ns.append(now - sent_ns)
                else:
                    warm_seen.set()
        finally:
            c.close()

    th = threading.Thread(target=consumer, name="latency-consumer", daemon=True)
    th.start()
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
                  "compression.type": "none", "enable.idempotence": False,
                  **(producer_conf or {})})
    pad = b"\x00" * (size - _STAMP.size)
    deadline = time.perf_counter() + timeout + seconds
    ready.wait(10)
    try:
        for _ in range(warmup):  # connections, metadata and the fetch loop settle first
            p.produce(topic, _STAMP.pack(time.perf_counter_ns(), 0) + pad)
            p.poll(0)
            time.sleep(0.001)
        p.flush(10)
        warm_seen.wait(10)
        interval = 1.0 / rate
        t0 = time.perf_counter()
        for i in range(total):
            delay = t0 + i * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            p.produce(topic, _STAMP.pack(time.perf_counter_ns(), 1) + pad)
            p.poll(0)
        send_s = time.perf_counter() - t0
        p.flush(10)
        while th.is_alive() and len(lat_ns) < total and time.perf_counter() < deadline:
            th.join(0.05)
    finally:
        stop.set()
        th.join(5)
    return {"rate_per_s": rate, "seconds": seconds, "size": size, "acks": acks,
            "sent": total, "received": len(lat_ns), "achieved_send_rate": round(total / send_s),
            **_percentiles(lat_ns), "errors": errors,
            "complete": len(lat_ns) == total and not errors}


def _percentiles(lat_ns: list[int]) -> dict:
    ms = sorted(x / 1e6 for x in lat_ns)

    def pct(q: float) -> float | None:
        return round(ms[min(len(ms) - 1, int(q * len(ms)))], 3) if ms else None

    return {"p50_ms": pct(0.50), "p90_ms": pct(0.90), "p99_ms": pct(0.99),
            "p999_ms": pct(0.999), "max_ms": round(ms[-1], 3) if ms else None,
            "mean_ms": round(sum(ms) / len(ms), 3) if ms else None}


def sync_produce(bootstrap: str, topic: str, count: int, size: int = 100, acks: str = "1",
                 warmup: int = 50, timeout: float = 30.0) -> dict:
    """One record at a time, each waited for (flush) before the next, as a request/response
    application does: the figure is the Produce round trip as the client sees it."""
    errors: list[str] = []

    def on_delivery(err, _msg) -> None:
        if err is not None and len(errors) < 10:
            errors.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
                  "compression.type": "none", "enable.idempotence": False,
                  "on_delivery": on_delivery})
    p.list_topics(topic, timeout=10)
    payload = os.urandom(size)
    clock = time.perf_counter_ns
    lat_ns: list[int] = []
    deadline = time.perf_counter() + timeout
    for i in range(warmup + count):
        if time.perf_counter() >= deadline:
            break
        t0 = clock()
        p.produce(topic, payload)
        if p.flush(10) != 0:
            errors.append("not acknowledged within 10 s")
            break
        if i >= warmup:
            lat_ns.append(clock() - t0)
    return {"size": size, "acks": acks, "sent": count, "received": len(lat_ns),
            **_percentiles(lat_ns), "errors": errors,
            "complete": len(lat_ns) == count and not errors}


def _consume_child(q, *args) -> None:
    try:
        q.put(consume(*args))
    except Exception as e:  # reported, not raised: the parent must not wait forever
        q.put({"error": repr(e)})


def consume_parallel(bootstrap: str, topic: str, per_partition: list[int], size: int,
                     processes: int, timeout: float) -> dict:
    """The same data read by `processes` consumer processes, each assigned every
    processes-th partition. One Python consumer is bound by its own Python loop (about a
    microsecond of client CPU per record); this shows what the broker serves when the client
    is not the limit. The rate is all records over the span from the first process's first
    message to the last process's end."""
    import multiprocessing as mp
    ctx = mp.get_context("spawn")  # no fork of a process that runs librdkafka threads
    q = ctx.Queue()
    procs = []
    for k in range(processes):
        parts = list(range(k, len(per_partition), processes))
        if not parts:
            continue
        count = sum(per_partition[i] for i in parts)
        procs.append(ctx.Process(target=_consume_child, daemon=True,
                                 args=(q, bootstrap, topic, parts, size, count, timeout)))
    for p in procs:
        p.start()
    results = []
    try:
        for _ in procs:
            results.append(q.get(timeout=timeout + 30))
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
    errors = [r["error"] for r in results if "error" in r]
    ok = [r for r in results if "error" not in r]
    received = sum(r["received"] for r in ok)
    if not ok or any(r["first_message_s"] is None for r in ok):
        span = 0.0
    else:
        span = max(r["t_end"] for r in ok) - min(r["t_first"] for r in ok)
    counted = received - sum(r["first_batch"] for r in ok)
    basis = "first to last message"
    if ok and (counted <= 0 or span <= 0):  # tiny run: fall back to whole spans
        basis = "whole span (one batch)"
        counted = received
        span = max(r["t_end"] for r in ok) - min(r["t_end"] - r["seconds_incl_first"]
                                                  for r in ok)
    return {"size": size, "topic": topic, "processes": len(procs),
            "requested": sum(per_partition), "received": received,
            "seconds": round(span, 3), **_rate(counted, size, span), "rate_basis": basis,
            "client_cpu_s": round(sum(r["client_cpu_s"] for r in ok), 3),
            "errors": errors + [e for r in ok for e in r["errors"]],
            "complete": not errors and received == sum(per_partition)
            and all(r["complete"] for r in ok)}
