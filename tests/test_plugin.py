# kafkalite's pytest plugin as a user meets it: a fresh pytest process in a directory of the
# user's own (its own ini file and conftest), picking the plugin up through its entry point.
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from kafkalite.admin_wire import AdminWire
from kafkalite.testing import BrokerProcess
from kafkalite.wire.errors import ErrorCode, KafkaError

import pytest

# What the user's tests look at goes through confluent-kafka, which warns about nothing.
USER_TESTS = '''
import sys
from confluent_kafka import Producer

SEEN = {}

def partitions(bootstrap, topic):
    md = Producer({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return len(md.topics[topic].partitions) if topic in md.topics else None

def test_settings_reach_the_session_broker(kafka_broker, kafka_topic):
    topic = kafka_topic(partitions=-1, name="kept-until-the-test-ends")
    assert partitions(kafka_broker, topic) == EXPECTED_PARTITIONS
    assert "kafka" not in sys.modules  # no kafka-python in the user's run

def test_topics_of_an_earlier_test_are_deleted(kafka_broker):
    assert partitions(kafka_broker, "kept-until-the-test-ends") is None

def test_fresh_broker_is_a_broker_of_its_own(kafka_broker, kafka_broker_fresh, kafka_topic):
    assert kafka_broker_fresh != kafka_broker
    topic = kafka_topic(partitions=-1)
    assert partitions(kafka_broker_fresh, topic) == EXPECTED_PARTITIONS
    assert partitions(kafka_broker, topic) is None
    SEEN["fresh"] = kafka_broker_fresh

def test_each_test_gets_another_fresh_broker(kafka_broker_fresh):
    assert kafka_broker_fresh != SEEN["fresh"]
    md = Producer({"bootstrap.servers": kafka_broker_fresh}).list_topics(timeout=10)
    assert [t for t in md.topics if not t.startswith("__")] == []
'''


def run_user_pytest(directory: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:randomly", "-W", "error::DeprecationWarning", "."],
                          cwd=directory, capture_output=True, text=True, timeout=180)


def test_ini_option_configures_the_brokers_and_topics_are_deleted(tmp_path):
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nkafkalite_broker_config =\n    num.partitions=5\n"
        "    group.initial.rebalance.delay.ms=0\n")
    (tmp_path / "test_user.py").write_text("EXPECTED_PARTITIONS = 5\n" + USER_TESTS)
    r = run_user_pytest(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "4 passed" in r.stdout and "warning" not in r.stdout.lower()


def test_a_conftest_overrides_the_config_fixture(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nkafkalite_broker_config = ["num.partitions=5"]\n')
    (tmp_path / "conftest.py").write_text(textwrap.dedent('''
        import pytest

        @pytest.fixture(scope="session")
        def kafka_broker_config():
            return {"num.partitions": "3"}
    '''))
    (tmp_path / "test_user.py").write_text("EXPECTED_PARTITIONS = 3\n" + USER_TESTS)
    r = run_user_pytest(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "4 passed" in r.stdout


def test_a_malformed_ini_setting_is_a_usage_error(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\nkafkalite_broker_config = num.partitions\n")
    (tmp_path / "test_user.py").write_text("EXPECTED_PARTITIONS = 1\n" + USER_TESTS)
    r = run_user_pytest(tmp_path)
    assert r.returncode != 0
    assert "kafkalite_broker_config: expected key=value, got 'num.partitions'" in \
        r.stdout + r.stderr


def test_admin_wire_creates_and_deletes_with_kafkas_error_names(tmp_path):
    with BrokerProcess(data_dir=str(tmp_path / "data")) as broker, \
            AdminWire(broker.bootstrap) as admin:
        admin.create_topic("orders", 2, {"retention.ms": "60000"})
        with pytest.raises(KafkaError) as exc:
            admin.create_topic("orders", 2)
        assert exc.value.code == ErrorCode.topic_already_exists
        assert "TOPIC_ALREADY_EXISTS" in str(exc.value)
        with pytest.raises(KafkaError, match="INVALID_CONFIG"):
            admin.create_topic("other", 1, {"retention.ms": "soon"})
        assert admin.delete_topics(["orders", "never-made"]) == {
            "orders": ErrorCode.none, "never-made": ErrorCode.unknown_topic_or_partition}
