# What received requests may pin in the broker is bounded by bytes: per connection, and
# across connections by queued.max.request.bytes (Kafka's memory pool). Hog clients pipeline
# large requests behind long-poll fetches (which keep their connection's worker busy) and
# never read an answer; the broker's RSS must stay near the bound, and another client must
# still be answered meanwhile.
from __future__ import annotations

import itertools
import socket
import subprocess
import sys
import threading
import time

import psutil
import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import ProduceRequest

from kafkalite.testing import BrokerProcess
from tests.helpers.kbatch import call, connect, recv_frame, request_bytes

MiB = 1 << 20
MAX_REQUEST = 2 * MiB
SECONDS = 6.0


def _frames() -> tuple[bytes, bytes]:
    """A 200 ms long poll on an empty partition, and a Produce of almost MAX_REQUEST bytes
    to a topic that does not exist (answered with an error, nothing stored)."""
    F = FetchRequest[11]
    poll = request_bytes(F(
        replica_id=-1, max_wait_ms=200, min_bytes=MiB, max_bytes=MiB, isolation_level=0,
        session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
        topics=[F.FetchTopic(topic="quiet", partitions=[F.FetchTopic.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=MiB, current_leader_epoch=-1,
            log_start_offset=-1)])]), 1)
    P = ProduceRequest[9]
    T = P.TopicProduceData
    big = request_bytes(P(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        T(name="absent", partition_data=[T.PartitionProduceData(
            index=0, records=bytes(MAX_REQUEST - 200))])]), 2)
    assert len(big) - 4 <= MAX_REQUEST
    return poll, big


def _other_client(bootstrap: str, stop: threading.Event, answers: list[float]) -> None:
    with connect(bootstrap, timeout=30) as s:
        for corr in itertools.count(1):
            if stop.is_set():
                return
            assert call(s, ApiVersionsRequest[0](), corr).error_code == 0
            answers.append(time.monotonic())
            time.sleep(0.2)


# Measured growth on this machine: about 20 MiB in both cases (what is held, plus a request
# being joined and decoded); 58 and 173 MiB before the bounds (16 requests per connection),
# 51 MiB for the 6 hogs with the per-connection bound alone.
@pytest.mark.parametrize("hogs,pool_bytes,bound_mb", [
    (2, -1, 32),         # per connection: about READ_HIGH_WATER (4 MiB) + one request each
    (6, 8 * MiB, 32),    # the pool: 8 MiB + one request, whatever the number of hogs
], ids=["per-connection", "queued.max.request.bytes"])
def test_pipelined_large_requests_pin_bounded_memory(tmp_path, hogs, pool_bytes,
                                                     bound_mb) -> None:
    settings = {"socket.request.max.bytes": str(MAX_REQUEST),
                "queued.max.request.bytes": str(pool_bytes),
                "auto.create.topics.enable": "false"}
    with BrokerProcess(data_dir=str(tmp_path / "data"), settings=settings) as bp:
        admin = KafkaAdminClient(bootstrap_servers=bp.bootstrap)
        admin.create_topics([NewTopic("quiet", 1, 1)])
        admin.close()
        poll, big = _frames()
        with connect(bp.bootstrap) as warm:  # first use of each path allocates for good
            for corr in range(1, 4):
                warm.sendall(poll[:4] + poll[4:8] + corr.to_bytes(4, "big") + poll[12:])
                warm.sendall(big)
                recv_frame(warm)
                recv_frame(warm)
        proc = psutil.Process(bp.proc.pid)
        rss0 = proc.memory_info().rss
        socks = []
        stop = threading.Event()
        answers: list[float] = []
        other = threading.Thread(target=_other_client, args=(bp.bootstrap, stop, answers))
        try:
            for _ in range(hogs):
                s = socket.create_connection(("127.0.0.1", bp.port))
                s.setblocking(False)
                socks.append([s, memoryview(b""), itertools.cycle([poll, big, big, big])])
            other.start()
            peak = rss0
            t0 = time.monotonic()
            while time.monotonic() - t0 < SECONDS:
                for entry in socks:
                    s, rest, cycle = entry
                    try:
                        while True:
                            if not rest:
                                rest = memoryview(next(cycle))
                            rest = rest[s.send(rest):]
                    except BlockingIOError:
                        pass  # the broker stopped reading this client: as designed
                    entry[1] = rest
                peak = max(peak, proc.memory_info().rss)
                time.sleep(0.005)
            during = [t for t in answers if t0 < t < t0 + SECONDS]
        finally:
            stop.set()
            other.join(30)
            for s, _, _ in socks:
                s.close()
        growth_mb = (peak - rss0) / MiB
        assert growth_mb < bound_mb, f"RSS grew by {growth_mb:.0f} MiB"
        assert len(during) >= 3, f"the other client was answered {len(during)} times"
        assert not other.is_alive()
        assert bp.proc.poll() is None


def test_a_pool_smaller_than_one_request_is_refused_at_start(tmp_path) -> None:
    # Kafka's KafkaConfig refuses it with the same sentence.
    r = subprocess.run([sys.executable, "-m", "kafkalite", "serve",
                        "--set", "listeners=PLAINTEXT://127.0.0.1:0",
                        "--set", f"log.dirs={tmp_path}",
                        "--set", "queued.max.request.bytes=1000"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "queued.max.request.bytes must be larger or equal to socket.request.max.bytes" \
        in r.stderr
