# A second SIGTERM/SIGINT during a shutdown that is held open exits at once, non-zero and
# without the clean-shutdown marker, so that the next start recovers (uvicorn's second
# Ctrl-C). The shutdown is held open by a client that pipelined large fetches and reads
# none of the answers: the broker waits for them up to its grace period.
from __future__ import annotations

import os
import signal
import socket
import time

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.consumer import FetchRequest

from kafkalite.testing import BrokerProcess
from tests.helpers.kbatch import build_batch, connect, produce_raw, request_bytes

MARKER = ".kafkalite_cleanshutdown"


def _fetch_frame(topic: str, offset: int, corr: int) -> bytes:
    Req = FetchRequest[11]
    T = Req.FetchTopic
    return request_bytes(Req(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
        topics=[T(topic=topic, partitions=[T.FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20,
            current_leader_epoch=-1, log_start_offset=-1)])]), corr)


def _wait_for_log(bp: BrokerProcess, text: str, since: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in bp.read_log()[since:]:
        assert time.monotonic() < deadline, f"no {text!r} in the log:\n{bp.read_log()[-3000:]}"
        time.sleep(0.02)


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_second_signal_forces_exit_and_next_start_recovers(tmp_path, second) -> None:
    bp = BrokerProcess(data_dir=str(tmp_path / "data"))
    bp.start()
    reader = None
    try:
        admin = KafkaAdminClient(bootstrap_servers=bp.bootstrap)
        admin.create_topics([NewTopic("big", 1, 1)])
        admin.close()
        with connect(bp.bootstrap) as s:
            value = os.urandom(1_000_000)
            for i in range(6):
                assert produce_raw(s, "big", 0, build_batch([(b"k", value, [], None)]),
                                   correlation_id=i + 1).error_code == 0
        reader = socket.create_connection(("127.0.0.1", bp.port))
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        reader.sendall(b"".join(_fetch_frame("big", i % 6, i + 1) for i in range(12)))
        time.sleep(0.5)  # let the broker fill its write buffer towards this client

        mark = len(bp.read_log())
        bp.proc.send_signal(signal.SIGTERM)
        _wait_for_log(bp, "Shutting down", mark)
        time.sleep(0.2)
        assert bp.proc.poll() is None, "the shutdown was not held open: nothing to force"
        t0 = time.monotonic()
        bp.proc.send_signal(second)
        rc = bp.proc.wait(timeout=30)
        forced_in = time.monotonic() - t0
        assert rc != 0
        assert forced_in < 3.0, f"exited {forced_in:.1f}s after the second signal"
        log_text = bp.read_log()[mark:]
        assert "during shutdown: exiting now" in log_text
        assert "Shutdown complete" not in log_text
        assert not os.path.exists(os.path.join(bp.data_dir, MARKER))
        bp.proc = None

        mark = len(bp.read_log())
        bp.start()
        _wait_for_log(bp, "recovering partition tails", mark)
    finally:
        if reader is not None:
            reader.close()
        bp.cleanup()
