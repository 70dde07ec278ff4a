# The inter-broker security configuration against Apache Kafka 3.8 in ZooKeeper mode: the
# start-up refusals of tests/unit/test_inter_broker_config.py are Kafka's own lines (each
# configuration started on both, both refuse it with that line), and the configuration of
# test_inter_broker_security.py (PLAINTEXT + SASL_SSL listeners, PEM stores,
# inter.broker.listener.name=SASL_SSL with SCRAM-SHA-512, the ACL authorizer with the broker
# user as super user) replicates an RF=3 topic on three Kafka brokers as on three kafkalite
# ones. Kafka keeps SCRAM credentials in ZooKeeper (/config/users/<user>), written here
# before its brokers start, as `kafka-configs.sh --zookeeper` bootstraps them.
from __future__ import annotations

import base64
import os
import secrets
import subprocess
import sys
import tempfile
import uuid
from types import SimpleNamespace

import pytest

from kafkalite.cluster import zkdata
from kafkalite.security.scram_store import MIN_ITERATIONS, make_credential, salted_password
from kafkalite.wire.errors import ErrorCode
from tests.cluster.test_inter_broker_security import (  # noqa: F401 (pki: a fixture)
    ADMIN, BROKER_PASSWORD, TOPIC, client_conf, create_topic, isr, pki, produce, replica_fetch,
    secure_settings)
from tests.cluster.test_membership import WAIT_S, Zk
from tests.cluster.test_replication import log_bytes
from tests.helpers.real_kafka import anchor_dir, eventually, unavailable_reason
from tests.helpers.zookeeper import ZkModeKafka
from tests.unit.test_inter_broker_config import REFUSALS

KAFKALITE_ONLY = ("kafkalite.",)


def kafka_start_output(props: dict[str, str]) -> str:
    """What Kafka 3.8 (ZooKeeper mode) prints when started with `props`, bounded."""
    with tempfile.TemporaryDirectory(prefix="kafka-cfg-") as d:
        path = os.path.join(d, "server.properties")
        lines = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:1/none",
                 "zookeeper.connection.timeout.ms": "1000", "log.dirs": f"{d}/logs", **props}
        with open(path, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in lines.items())
        script = os.path.join(anchor_dir() or "", "bin", "kafka-server-start.sh")
        out = subprocess.run([script, path], capture_output=True, text=True, timeout=90,
                             env={**os.environ, "LOG_DIR": f"{d}/applogs",
                                  "KAFKA_HEAP_OPTS": "-Xmx128M"})
        return out.stdout + out.stderr


def kafkalite_start_output(props: dict[str, str]) -> tuple[int, str]:
    cmd = [sys.executable, "-m", "kafkalite", "serve", "--set",
           "zookeeper.connect=127.0.0.1:1/none", "--set", "zookeeper.connection.timeout.ms=1000"]
    with tempfile.TemporaryDirectory(prefix="kafkalite-cfg-") as d:
        for k, v in {"log.dirs": d, **props}.items():
            cmd += ["--set", f"{k}={v}"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return out.returncode, out.stdout + out.stderr


@pytest.fixture(scope="module")
def kafka_runs():
    if (reason := unavailable_reason()) is not None:
        pytest.skip(reason)


@pytest.mark.parametrize("props, message", REFUSALS)
def test_kafka_and_kafkalite_refuse_the_same_configurations_alike(kafka_runs, props, message):
    assert message in kafka_start_output(props)
    code, text = kafkalite_start_output(props)
    assert code != 0 and message in text


def scram_user_config(password: str) -> bytes:
    """Kafka's /config/users/<user> for SCRAM-SHA-512 (ScramCredentialUtils' text form)."""
    salt = secrets.token_bytes(32)
    cred = make_credential(2, salt, salted_password(2, password, salt, MIN_ITERATIONS),
                           MIN_ITERATIONS)
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    return zkdata.encode_topic_config({"SCRAM-SHA-512": (
        f"salt={b64(cred.salt)},stored_key={b64(cred.stored_key)},"
        f"server_key={b64(cred.server_key)},iterations={cred.iterations}")})


def test_kafka_replicates_over_sasl_ssl_with_the_same_configuration(kafka_runs, zookeeper,
                                                                     pki):
    chroot = f"/kafka-ref-{uuid.uuid4().hex}"
    setup = Zk(zookeeper)
    try:
        for user, password in (("broker", BROKER_PASSWORD), ADMIN):
            setup.client.create(chroot + zkdata.entity_config_path("users", user),
                                scram_user_config(password), makepath=True)
    finally:
        setup.close()
    settings = {k: v for k, v in secure_settings(pki).items()
                if not k.startswith(KAFKALITE_ONLY)}
    procs = {i: ZkModeKafka(zookeeper + chroot, broker_id=i, settings=dict(settings))
             for i in (1, 2, 3)}
    z = None
    try:
        for b in procs.values():
            b.settings["listeners"] = (f"PLAINTEXT://127.0.0.1:{b.port},"
                                       f"SASL_SSL://127.0.0.1:{b.port + 1}")
            b.start()
        z = Zk(zookeeper + chroot)
        conf = client_conf(pki, procs)
        create_topic(conf, TOPIC, [[1, 2, 3]])
        assert produce(conf, TOPIC, [f"v{i}".encode() * 20 for i in range(300)]) == []
        assert eventually(lambda: isr(z), lambda s: s == {1, 2, 3}, timeout=WAIT_S) == {1, 2, 3}
        logs = {i: SimpleNamespace(data_dir=os.path.join(b.data_dir, "logs"))
                for i, b in procs.items()}
        leader_bytes = log_bytes(logs[1])
        for i in (2, 3):
            assert eventually(lambda i=i: log_bytes(logs[i]), lambda b: b == leader_bytes,
                              timeout=WAIT_S) == leader_bytes
        # KafkaApis: a follower's Fetch without CLUSTER_ACTION, TOPIC_AUTHORIZATION_FAILED
        answer = replica_fetch(procs[1].bootstrap, 2, TOPIC)
        assert answer.error_code == ErrorCode.topic_authorization_failed
    finally:
        if z is not None:
            z.close()
        for b in procs.values():
            b.kill()
            b.cleanup()
