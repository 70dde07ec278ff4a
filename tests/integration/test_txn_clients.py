# Transactions through unmodified clients, each test against kafkalite and the real Kafka 3.8
# (Kafka's answers are the expectations): confluent-kafka, kafka-python, aiokafka and the Java
# client commit and abort; read_committed consumers see only committed records, in order, and
# never a control record (9 records and 3 markers take offsets 0-11); read_uncommitted sees
# all of them; a second producer with the same transactional.id fences the first; a
# transaction left open past its timeout is aborted by the broker and read_committed moves
# past it; send_offsets_to_transaction makes a group's offsets visible at commit only, and
# OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT while they are pending.
from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kio.schema.errors import ErrorCode as E

from tests.clients_extra._checks import TIMEOUT_S, run_check
from tests.helpers.real_kafka import anchor_dir, create_topic, eventually

from .test_groups_helpers import RawClient

COMMITTED = ["a0", "a1", "a2", "c0", "c1", "c2"]
EVERYTHING = ["a0", "a1", "a2", "b0", "b1", "b2", "c0", "c1", "c2"]
END = 12  # 9 records and 3 markers


@pytest.fixture(params=["kafkalite", "kafka"])
def broker(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue("kafka_broker" if request.param == "kafkalite"
                                   else "real_kafka")


def new_topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"txn-{uuid.uuid4().hex[:10]}"
    create_topic(bootstrap, name, partitions=partitions)
    return name


def confluent_producer(bootstrap: str, txn_id: str, **extra: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **extra})
    p.init_transactions(20)
    return p


def confluent_read(bootstrap: str, topic: str, isolation: str, end: int = END,
                   partition: int = 0, timeout: float = 20) -> list[str]:
    """Values from the start of the partition until the consumer's position reaches `end`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                  "isolation.level": isolation, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, partition, 0)])
    out: list[str] = []
    try:
        def step() -> int:
            for m in c.consume(100, 0.2):
                assert m.error() is None, m.error()
                out.append(m.value().decode())
            pos = c.position([TopicPartition(topic, partition)])[0].offset
            return pos
        eventually(step, lambda pos: pos >= end, timeout=timeout, interval=0)
    finally:
        c.close()
    return out


def three_transactions(begin, send, commit, abort) -> None:
    for i, (prefix, ok) in enumerate((("a", True), ("b", False), ("c", True))):
        begin()
        for n in range(3):
            send(f"{prefix}{n}")
        commit() if ok else abort()


# --- commit and abort, per client -------------------------------------------------------

def test_confluent_commit_abort_and_isolation(broker):
    topic = new_topic(broker)
    p = confluent_producer(broker, f"tx-{topic}")
    # flush before abort: librdkafka purges what it has not sent yet, and the aborted
    # records must be in the log for read_uncommitted to see them
    three_transactions(p.begin_transaction,
                       lambda v: p.produce(topic, v.encode(), partition=0),
                       lambda: p.commit_transaction(20),
                       lambda: (p.flush(10), p.abort_transaction(20)))
    assert confluent_read(broker, topic, "read_committed") == COMMITTED
    assert confluent_read(broker, topic, "read_uncommitted") == EVERYTHING


def test_kafka_python_commit_abort_and_isolation(broker):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP
    topic = new_topic(broker)
    p = KafkaProducer(bootstrap_servers=broker, transactional_id=f"tx-{topic}",
                      max_block_ms=20000)
    try:
        p.init_transactions()
        three_transactions(p.begin_transaction,
                           lambda v: p.send(topic, v.encode(), partition=0),
                           p.commit_transaction, lambda: (p.flush(10), p.abort_transaction()))
    finally:
        p.close(timeout=5)

    def read(isolation: str) -> list[str]:
        c = KafkaConsumer(bootstrap_servers=broker, isolation_level=isolation,
                          enable_auto_commit=False, consumer_timeout_ms=5000)
        tp = KTP(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        out: list[str] = []
        try:
            eventually(lambda: [out.append(r.value.decode()) for rs in
                                c.poll(200).values() for r in rs] and c.position(tp)
                       or c.position(tp), lambda pos: pos >= END, timeout=20, interval=0)
        finally:
            c.close()
        return out

    assert read("read_committed") == COMMITTED
    assert read("read_uncommitted") == EVERYTHING


def test_aiokafka_commit_abort_and_isolation(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATP
    topic = new_topic(broker)

    async def run() -> tuple[list[str], list[str]]:
        p = AIOKafkaProducer(bootstrap_servers=broker, transactional_id=f"tx-{topic}")
        await asyncio.wait_for(p.start(), 30)
        try:
            for prefix, ok in (("a", True), ("b", False), ("c", True)):
                await p.begin_transaction()
                for n in range(3):
                    await p.send_and_wait(topic, f"{prefix}{n}".encode(), partition=0)
                await (p.commit_transaction() if ok else p.abort_transaction())
        finally:
            await p.stop()

        async def read(isolation: str) -> list[str]:
            c = AIOKafkaConsumer(bootstrap_servers=broker, isolation_level=isolation,
                                 enable_auto_commit=False)
            await c.start()
            tp = ATP(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            out: list[str] = []
            try:
                loop = asyncio.get_running_loop()
                deadline = loop.time() + 20
                while await c.position(tp) < END and loop.time() < deadline:
                    for rs in (await c.getmany(timeout_ms=200)).values():
                        out += [r.value.decode() for r in rs]
            finally:
                await c.stop()
            return out

        return await read("read_committed"), await read("read_uncommitted")

    committed, everything = asyncio.run(asyncio.wait_for(run(), 90))
    assert committed == COMMITTED
    assert everything == EVERYTHING


def test_java_client_transactions(broker, tmp_path: Path):
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    anchor = anchor_dir()
    libs = Path(anchor or "") / "libs"
    jars = [str(j) for pattern in ("kafka-clients-*.jar", "slf4j-api-*.jar", "lz4-java-*.jar",
                                   "snappy-java-*.jar", "zstd-jni-*.jar")
            for j in sorted(libs.glob(pattern))]
    if not any("kafka-clients" in j for j in jars):
        pytest.skip(f"kafka-clients jar not found in {libs}")
    classpath = os.pathsep.join(jars)
    source = Path(__file__).parent / "java" / "TxnCheck.java"
    built = subprocess.run(["javac", "-d", str(tmp_path), "-cp", classpath, str(source)],
                           capture_output=True, text=True, timeout=TIMEOUT_S)
    assert built.returncode == 0, built.stderr
    topic, source_topic = new_topic(broker), new_topic(broker)
    run_check(["java", "-cp", os.pathsep.join([str(tmp_path), classpath]), "TxnCheck",
               broker, topic, source_topic, f"g-{topic}"],
              "ALL JAVA TXN CHECKS PASSED", "Java transactions check")


# --- fencing and timeouts ---------------------------------------------------------------

def test_a_second_producer_with_the_same_transactional_id_fences_the_first(broker):
    topic = new_topic(broker)
    old = confluent_producer(broker, f"tx-{topic}")
    old.begin_transaction()
    old.produce(topic, b"zombie", partition=0)
    old.flush(10)
    new = confluent_producer(broker, f"tx-{topic}")  # aborts the old one's transaction
    new.begin_transaction()
    new.produce(topic, b"fresh", partition=0)
    new.commit_transaction(20)
    with pytest.raises(KafkaException) as failed:  # the zombie goes on with its transaction
        old.produce(topic, b"zombie-2", partition=0)
        old.commit_transaction(20)
    # librdkafka reports the fencing as fatal (PRODUCER_FENCED), or, when it is the zombie's
    # produce that meets the new epoch first, as an error that fails the commit: either way
    # nothing of the zombie's is committed, which the read below checks.
    err = failed.value.args[0]
    assert err.fatal() or err.txn_requires_abort() or "fenced" in err.str().lower(), err
    # zombie, its abort marker, fresh, its commit marker
    assert confluent_read(broker, topic, "read_committed", end=4) == ["fresh"]


def test_a_transaction_past_its_timeout_is_aborted_and_read_committed_moves_on(broker):
    topic = new_topic(broker)
    stuck = confluent_producer(broker, f"stuck-{topic}", **{"transaction.timeout.ms": "2000"})
    stuck.begin_transaction()
    stuck.produce(topic, b"never", partition=0)
    stuck.flush(10)
    other = confluent_producer(broker, f"other-{topic}")
    other.begin_transaction()
    other.produce(topic, b"after", partition=0)
    other.commit_transaction(20)
    # Kafka checks for timed-out transactions every 10 s
    # (transaction.abort.timed.out.transaction.cleanup.interval.ms).
    assert confluent_read(broker, topic, "read_committed", end=4, timeout=40) == ["after"]
    with pytest.raises(KafkaException):
        stuck.commit_transaction(20)


# --- offsets in transactions ------------------------------------------------------------

def test_send_offsets_to_transaction_commits_offsets_with_the_transaction(broker):
    source, sink = new_topic(broker), new_topic(broker)
    group = f"g-{source}"
    c = Consumer({"bootstrap.servers": broker, "group.id": group,
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    p = confluent_producer(broker, f"tx-{source}")
    try:
        for offset, commit in ((5, True), (9, False)):
            p.begin_transaction()
            p.produce(sink, f"o{offset}".encode(), partition=0)
            p.send_offsets_to_transaction([TopicPartition(source, 0, offset)],
                                          c.consumer_group_metadata(), 20)
            p.commit_transaction(20) if commit else p.abort_transaction(20)
            got = c.committed([TopicPartition(source, 0)], 20)[0].offset
            assert got == 5, (offset, commit, got)
    finally:
        c.close()


def _txn_offset_commit(raw: RawClient, txn: str, group: str, pid: int, epoch: int,
                       topic: str, offset: int):
    m = raw.schema(28, 3)
    return raw.call(28, 3, transactional_id=txn, group_id=group, producer_id=pid,
                    producer_epoch=epoch, generation_id=-1, member_id="",
                    group_instance_id=None, topics=(m.TxnOffsetCommitRequestTopic(
                        name=topic, partitions=(m.TxnOffsetCommitRequestPartition(
                            partition_index=0, committed_offset=offset,
                            committed_leader_epoch=-1, committed_metadata="tx"),)),))


def _fetch(raw: RawClient, group: str, topic: str, stable: bool) -> tuple:
    m = raw.schema(9, 7)
    r = raw.call(9, 7, group_id=group, require_stable=stable, topics=(
        m.OffsetFetchRequestTopic(name=topic, partition_indexes=(0,)),))
    p = r.topics[0].partitions[0]
    return r.error_code, p.error_code, p.committed_offset


def test_txn_offset_commit_is_pending_until_end_txn_over_the_wire(broker):
    """Raw protocol: TxnOffsetCommit before AddOffsetsToTxn, then within the transaction;
    OffsetFetch v7 with and without require_stable while pending; EndTxn commits."""
    topic = new_topic(broker)
    txn, group = f"raw-{topic}", f"g-{topic}"
    raw = RawClient(broker)
    # FindCoordinator creates __transaction_state on a fresh Kafka, which answers
    # NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS until it is loaded: retry as clients do
    def init_producer_id():
        raw.call(10, 3, key=txn, key_type=1)
        return raw.call(22, 3, transactional_id=txn, transaction_timeout=_ms(60000),
                        producer_id=-1, producer_epoch=-1)
    init = eventually(init_producer_id, lambda r: r.error_code == E.none, timeout=30,
                      interval=0.5)
    assert init.error_code == E.none
    pid, epoch = init.producer_id, init.producer_epoch
    # FindCoordinator for the group creates __consumer_offsets (NOT_COORDINATOR before)
    loading = {E.not_coordinator, E.coordinator_load_in_progress, E.coordinator_not_available}
    early = eventually(lambda: (raw.call(10, 3, key=group, key_type=0),
                                _txn_offset_commit(raw, txn, group, pid, epoch, topic, 4))[1],
                       lambda r: r.topics[0].partitions[0].error_code not in loading,
                       timeout=30, interval=0.5)
    assert early.topics[0].partitions[0].error_code == E.invalid_txn_state
    added = raw.call(25, 3, transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                     group_id=group)
    assert added.error_code == E.none
    done = _txn_offset_commit(raw, txn, group, pid, epoch, topic, 4)
    assert done.topics[0].partitions[0].error_code == E.none
    assert _fetch(raw, group, topic, stable=True) == (E.none, E.unstable_offset_commit, -1)
    assert _fetch(raw, group, topic, stable=False) == (E.none, E.none, -1)
    ended = raw.call(26, 3, transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                     committed=True)
    assert ended.error_code == E.none
    assert eventually(lambda: _fetch(raw, group, topic, stable=True),
                      lambda r: r == (E.none, E.none, 4)) == (E.none, E.none, 4)


def _ms(n: int):
    import datetime
    return datetime.timedelta(milliseconds=n)
