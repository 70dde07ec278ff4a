# Configuration: Kafka property names from a file, KAFKALITE_* variables and --set; unknown
# properties warn, invalid values stop the start with exit code 2.
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from kafka import KafkaAdminClient

from kafkalite.config import ConfigError, load_config
from kafkalite.testing import BrokerProcess, free_port


def test_precedence_file_env_set(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("# comment\nnum.partitions=3\nlog.segment.bytes: 2048\nnode.id=7\n")
    env = {"KAFKALITE_NUM_PARTITIONS": "5", "KAFKALITE_LOG_RETENTION_HOURS": "2"}
    cfg = load_config(str(props), ["node.id=4"], environ=env)
    assert cfg["num.partitions"] == 5          # env beats the file
    assert cfg["log.segment.bytes"] == 2048    # file beats defaults
    assert cfg.node_id == 4                    # --set beats everything
    assert cfg.retention_ms == 2 * 3_600_000


def test_retention_resolution_order():
    assert load_config(None, ["log.retention.minutes=3"], environ={}).retention_ms == 180_000
    assert load_config(None, ["log.retention.minutes=3", "log.retention.ms=10"],
                       environ={}).retention_ms == 10
    assert load_config(None, [], environ={}).retention_ms == 168 * 3_600_000


@pytest.mark.parametrize("setting", ["num.partitions=zero", "num.partitions=0",
                                     "auto.create.topics.enable=maybe",
                                     "log.message.timestamp.type=WallClock",
                                     "listeners=nonsense"])
def test_invalid_values_raise(setting):
    with pytest.raises(ConfigError):
        load_config(None, [setting], environ={})


def test_invalid_value_exits_2_with_message(tmp_path):
    r = subprocess.run([sys.executable, "-m", "kafkalite", "serve", "--set",
                        f"log.dirs={tmp_path}", "--set", "num.partitions=-4"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "num.partitions" in r.stderr


def test_unknown_property_warns_and_broker_starts(tmp_path):
    bp = BrokerProcess(data_dir=str(tmp_path / "d"), settings={"no.such.property": "1"})
    with bp:
        admin = KafkaAdminClient(bootstrap_servers=bp.bootstrap)
        assert isinstance(admin.list_topics(), list)
        admin.close()
    assert "no.such.property" in bp.read_log()
    assert "isn't a known config" in bp.read_log()


def test_environment_variables_configure_the_broker(tmp_path):
    port = free_port()
    env = dict(os.environ, KAFKALITE_LISTENERS=f"PLAINTEXT://127.0.0.1:{port}",
               KAFKALITE_LOG_DIRS=str(tmp_path / "envdata"), KAFKALITE_NUM_PARTITIONS="4")
    proc = subprocess.Popen([sys.executable, "-m", "kafkalite", "serve"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
        p.produce("env-topic", b"x")
        assert p.flush(30) == 0
        md = admin.list_topics("env-topic", timeout=10)
        assert len(md.topics["env-topic"].partitions) == 4
        assert os.path.isdir(tmp_path / "envdata" / "env-topic-3")
    finally:
        proc.terminate()
        proc.wait(30)


def test_json_log_format(tmp_path):
    import json
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kafkalite", "serve", "--log-format", "json",
                             "--set", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                             "--set", f"log.dirs={tmp_path}"],
                            stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(20):  # up to the "listening" line: the SIGTERM handler is set by then
            record = json.loads(proc.stderr.readline())
            assert record["level"] in ("INFO", "WARNING")
            assert record["logger"].startswith("kafkalite")
            if "listening" in record["message"]:
                break
        else:
            raise AssertionError("no 'listening' log record")
    finally:
        proc.terminate()
        rest = proc.communicate(timeout=30)[1]
    assert proc.returncode == 0
    assert all(json.loads(x) for x in rest.splitlines() if x.strip())


def test_initial_rebalance_delay_is_0_without_a_config_file_and_kafkas_3000_with_one(tmp_path):
    # Kafka's code default is 3000 ms; its shipped server.properties sets 0 for development.
    assert load_config(environ={})["group.initial.rebalance.delay.ms"] == 0
    f = tmp_path / "server.properties"
    f.write_text("num.partitions=2\n")
    assert load_config(str(f), environ={})["group.initial.rebalance.delay.ms"] == 3000
    f.write_text("group.initial.rebalance.delay.ms=250\n")
    assert load_config(str(f), environ={})["group.initial.rebalance.delay.ms"] == 250
    env = {"KAFKALITE_GROUP_INITIAL_REBALANCE_DELAY_MS": "1500"}
    assert load_config(environ=env)["group.initial.rebalance.delay.ms"] == 1500
    assert load_config(sets=["group.initial.rebalance.delay.ms=7"],
                       environ={})["group.initial.rebalance.delay.ms"] == 7

