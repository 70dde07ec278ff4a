# connections.max.idle.ms, against kafkalite and the real Kafka with the same raw sockets:
# a connection that moves no byte for the idle time is closed by the broker; one that sends
# a request now and then stays open; a long-poll fetch longer than the idle time moves no
# byte either, and Kafka closes its connection before answering (so does kafkalite).
from __future__ import annotations

import select
import time

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest

from kafkalite.testing import BrokerProcess
from tests.helpers.kbatch import call, connect, fetch_raw, request_bytes
from tests.helpers.real_kafka import RealKafka, unavailable_reason

IDLE_MS = 2000
TOPIC = "idle-topic"


@pytest.fixture(params=["kafkalite", "kafka"])
def bootstrap(request, tmp_path):
    settings = {"connections.max.idle.ms": str(IDLE_MS)}
    if request.param == "kafka":
        reason = unavailable_reason()
        if reason:
            pytest.skip(reason)
        broker = RealKafka(data_dir=str(tmp_path / "kafka"), settings=settings).start()
    else:
        broker = BrokerProcess(data_dir=str(tmp_path / "data"), settings=settings).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic(TOPIC, 1, 1)])
        admin.close()
        with connect(broker.bootstrap) as s:  # until the new partition has its leader
            deadline = time.monotonic() + 30
            while fetch_raw(s, TOPIC, 0, 0).error_code != 0:
                assert time.monotonic() < deadline, "the topic never became fetchable"
                time.sleep(0.2)
        yield broker.bootstrap
    finally:
        broker.cleanup()


def _long_poll(max_wait_ms: int) -> bytes:
    Req = FetchRequest[11]
    T = Req.FetchTopic
    return request_bytes(Req(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1 << 20, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[],
        rack_id="", topics=[T(topic=TOPIC, partitions=[T.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
            current_leader_epoch=-1, log_start_offset=-1)])]), 1)


def test_idle_connections_are_closed_and_active_ones_kept(bootstrap) -> None:
    quiet = connect(bootstrap)
    chatty = connect(bootstrap)
    polling = connect(bootstrap)
    try:
        t0 = time.monotonic()
        polling.sendall(_long_poll(3 * IDLE_MS))
        closed_after: dict[str, float] = {}
        answered: list[str] = []
        names = {quiet: "quiet", polling: "polling"}
        corr = 0
        while len(closed_after) < 2 and time.monotonic() - t0 < 3 * IDLE_MS / 1000 + 5:
            corr += 1
            assert call(chatty, ApiVersionsRequest[0](), corr).error_code == 0
            waiting = [s for s in names if names[s] not in closed_after]
            for s in select.select(waiting, [], [], 0.3)[0]:
                if s.recv(65536):
                    answered.append(names[s])
                else:
                    closed_after[names[s]] = time.monotonic() - t0
        assert answered == []  # the long poll was cut, not answered
        assert set(closed_after) == {"quiet", "polling"}, closed_after
        # Closed for idleness, not at once: no sooner than half the idle time.
        assert min(closed_after.values()) > IDLE_MS / 2000, closed_after
        assert call(chatty, ApiVersionsRequest[0](), corr + 1).error_code == 0
    finally:
        for s in (quiet, chatty, polling):
            s.close()
