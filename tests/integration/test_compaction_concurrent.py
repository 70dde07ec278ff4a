# Issue 16's concurrent load: producers and a consumer at full speed while the log cleaner
# compacts. Updates keep arriving on a compacted topic (so the cleaner has work throughout)
# while a second producer writes a plain topic that a consumer reads as it is written. After
# the load, with the cleaner's "Cleaned" lines in the broker log falling inside the load's
# time span: the plain topic was read exactly, every record once and in order; the compacted
# topic reads back from the beginning, offsets increasing, as exactly the latest
# acknowledged value of every key, and holds fewer records than were written. (Latency
# during cleaning is a benchmark, not a test: `python -m benchmarks.cleaner_load`.)
from __future__ import annotations

import threading
import time
from typing import Callable

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalite.testing import BrokerProcess
from tests.helpers.real_kafka import create_topic

KEYS = 300
MIN_ROUNDS, MAX_ROUNDS = 10, 400
LOAD_S = 60  # at most: the updates stop once two cleanings happened during the load
PLAIN = 30_000
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "65536",
             "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "500"}
SETTINGS = {"log.cleaner.backoff.ms": "50",
            # each cleaning lasts a while, so cleanings overlap the load
            "log.cleaner.io.max.bytes.per.second": "4000000"}


def _produce_updates(bootstrap: str, latest: dict[bytes, tuple[int, bytes]],
                     errors: list, cleanings: "Callable[[], int]") -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": "all"})

    def acked(err, msg) -> None:
        if err is not None:
            errors.append(err)
            return
        known = latest.get(msg.key())
        if known is None or known[0] < msg.offset():
            latest[msg.key()] = (msg.offset(), msg.value())
    deadline = time.monotonic() + LOAD_S
    for r in range(MAX_ROUNDS):
        if r >= MIN_ROUNDS and (cleanings() >= 2 or time.monotonic() > deadline):
            break
        for k in range(KEYS):
            p.produce("compacted", b"v%d-%d-" % (k, r) + b"x" * 400, b"key-%d" % k,
                      on_delivery=acked)
            p.poll(0)
        p.flush(30)
    if p.flush(30) != 0:
        errors.append("compacted: unflushed records")


def _produce_plain(bootstrap: str, errors: list) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": "all"})
    for i in range(PLAIN):
        p.produce("plain", b"p-%d" % i, on_delivery=lambda err, _m: err and errors.append(err))
        if i % 1000 == 0:
            p.poll(0)
    if p.flush(30) != 0:
        errors.append("plain: unflushed records")


def _read(bootstrap: str, topic: str, stop_after: int, timeout_s: float) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < stop_after and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, (topic, len(out), msg.error())
            out.append((msg.offset(), msg.key(), msg.value()))
    finally:
        c.close()
    return out


def _cleaned_at(log_text: str) -> int:
    return sum("Cleaned compacted-0" in line for line in log_text.splitlines())


def test_load_while_cleaning_loses_nothing(tmp_path):
    with BrokerProcess(data_dir=str(tmp_path / "d"), settings=SETTINGS) as bp:
        create_topic(bp.bootstrap, "compacted", COMPACTED)
        create_topic(bp.bootstrap, "plain")
        latest: dict[bytes, tuple[int, bytes]] = {}
        errors: list = []
        plain_read: list = []
        cleaned_before = _cleaned_at(bp.read_log())
        cleanings = lambda: _cleaned_at(bp.read_log()) - cleaned_before  # noqa: E731
        workers = [threading.Thread(target=_produce_updates,
                                    args=(bp.bootstrap, latest, errors, cleanings)),
                   threading.Thread(target=_produce_plain, args=(bp.bootstrap, errors)),
                   threading.Thread(target=lambda: plain_read.extend(
                       _read(bp.bootstrap, "plain", PLAIN, 120)))]
        for w in workers:
            w.start()
        for w in workers:
            w.join(180)
        cleaned_during = cleanings()
        assert errors == []
        assert cleaned_during > 0, "the cleaner never ran during the load"

        assert [v for _, _, v in plain_read] == [b"p-%d" % i for i in range(PLAIN)]
        assert [o for o, _, _ in plain_read] == list(range(PLAIN))

        written = max(o for o, _ in latest.values()) + 1  # every update was acknowledged
        deadline = time.monotonic() + 60
        while True:  # until the cleaner has compacted what the load left dirty (bounded)
            got = _read(bp.bootstrap, "compacted", written, 10)
            if len(got) < written / 2 or time.monotonic() > deadline:
                break
            time.sleep(1)
        offsets = [o for o, _, _ in got]
        assert offsets == sorted(set(offsets))
        seen: dict[bytes, bytes] = {}
        for _, key, value in got:
            seen[key] = value
        assert seen == {k: v for k, (_, v) in latest.items()}
        assert len(latest) == KEYS and len(got) < written / 2, len(got)
