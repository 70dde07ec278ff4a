# Client workers for the reliability harnesses: idempotent confluent-kafka producers that
# record exactly what was acknowledged, and a group consumer that records which commits
# were acknowledged. Each runs in a thread until its stop event is set; every loop is
# bounded by that event and by the caller's deadline.
#
# A record's key names its producer, generation, partition and sequence number
# (b"<name>.<generation>:<partition>:<seq>") and its value is common.payload(key), so a
# record read back identifies itself and can be checked byte for byte.
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import confluent_kafka as ck

from .common import payload


@dataclass
class Acked:
    partition: int
    offset: int
    key: bytes


@dataclass
class ProducerStats:
    sent: int = 0
    acked: int = 0
    failed: int = 0        # delivery reports with an error (not acknowledged)
    fatal: int = 0         # librdkafka fatal errors (the producer had to be replaced)
    errors: dict[str, int] = field(default_factory=dict)


def parse_key(key: bytes) -> tuple[str, int, int]:
    """(producer name with generation, partition, sequence) of a harness key."""
    who, part, seq = key.decode().rsplit(":", 2)
    return who, int(part), int(seq)


class ProducerWorker(threading.Thread):
    """Produces to `partitions` of `topic` round-robin, at most `rate` records/s."""

    def __init__(self, bootstrap: str, topic: str, partitions: list[int], name: str,
                 rate: float = 300.0, idempotent: bool = True, codec: str = "none",
                 extra: dict | None = None):
        super().__init__(name=f"producer-{name}", daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.pname = name
        self.rate = rate
        self.idempotent = idempotent
        self.codec = codec
        self.extra = extra or {}
        self.stop_event = threading.Event()
        self.acked: list[Acked] = []
        self.stats = ProducerStats()
        self.generation = 0
        self.seq = {p: 0 for p in partitions}
        self._fatal = threading.Event()
        self.flush_left = 0

    def _make(self) -> ck.Producer:
        def on_error(err: ck.KafkaError) -> None:
            if err.fatal():
                self._fatal.set()
            self.stats.errors[err.name()] = self.stats.errors.get(err.name(), 0) + 1
        conf = {"bootstrap.servers": self.bootstrap, "acks": "all",
                "enable.idempotence": self.idempotent, "linger.ms": 5,
                "compression.type": self.codec, "message.timeout.ms": 90000,
                "queue.buffering.max.messages": 2000, "reconnect.backoff.max.ms": 500,
                "retry.backoff.max.ms": 500, "error_cb": on_error, "log_level": 0,
                **self.extra}
        return ck.Producer(conf)

    def _on_delivery(self, err, msg) -> None:
        if err is None:
            self.stats.acked += 1
            self.acked.append(Acked(msg.partition(), msg.offset(), msg.key()))
        else:
            self.stats.failed += 1
            self.stats.errors[err.name()] = self.stats.errors.get(err.name(), 0) + 1

    def run(self) -> None:
        producer = self._make()
        who = f"{self.pname}.{self.generation}"
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        i = 0
        while not self.stop_event.is_set():
            if self._fatal.is_set():
                self.stats.fatal += 1
                producer.flush(5)
                self._fatal.clear()
                self.generation += 1
                who = f"{self.pname}.{self.generation}"
                self.seq = dict.fromkeys(self.partitions, 0)
                producer = self._make()
            p = self.partitions[i % len(self.partitions)]
            i += 1
            key = b"%s:%d:%d" % (who.encode(), p, self.seq[p])
            try:
                producer.produce(self.topic, key=key, value=payload(key), partition=p,
                                 on_delivery=self._on_delivery)
                self.seq[p] += 1
                self.stats.sent += 1
            except BufferError:
                producer.poll(0.05)
            except ck.KafkaException:
                self._fatal.set()
                continue
            next_at += interval
            delay = next_at - time.monotonic()
            producer.poll(max(delay, 0))
            if delay < -1.0:
                next_at = time.monotonic()  # fell behind (broker down): do not burst later
        self.flush_left = producer.flush(self.final_flush_s)
        producer.poll(0)

    final_flush_s = 90.0

    def finish(self, timeout: float = 100.0) -> None:
        self.stop_event.set()
        self.join(timeout)


class GroupConsumer(threading.Thread):
    """A subscribed group member that commits synchronously every `commit_every` seconds and
    remembers the highest commit per partition the broker acknowledged."""

    def __init__(self, bootstrap: str, topic: str, group: str, commit_every: float = 0.3):
        super().__init__(name=f"consumer-{group}", daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.group = group
        self.commit_every = commit_every
        self.stop_event = threading.Event()
        self.committing = threading.Event()  # set just before each commit is sent
        self.acked_commits: dict[int, int] = {}
        self.consumed = 0
        self.commits_ok = 0
        self.commits_failed = 0

    def run(self) -> None:
        c = ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                         "reconnect.backoff.max.ms": 500, "fetch.wait.max.ms": 100,
                         "log_level": 0})
        c.subscribe([self.topic])
        last_commit = time.monotonic()
        dirty = False
        try:
            while not self.stop_event.is_set():
                msgs = c.consume(500, timeout=0.1)
                for m in msgs:
                    if m.error() is None:
                        self.consumed += 1
                        dirty = True
                if dirty and time.monotonic() - last_commit >= self.commit_every:
                    last_commit = time.monotonic()
                    self.committing.set()
                    try:
                        done = c.commit(asynchronous=False)
                    except ck.KafkaException:
                        self.commits_failed += 1
                        continue
                    finally:
                        self.committing.clear()
                    dirty = False
                    self.commits_ok += 1
                    for tp in done or []:
                        if tp.error is None and tp.offset >= 0:
                            prev = self.acked_commits.get(tp.partition, -1)
                            self.acked_commits[tp.partition] = max(prev, tp.offset)
        finally:
            c.close()

    def finish(self, timeout: float = 30.0) -> None:
        self.stop_event.set()
        self.join(timeout)
