# Spark's Kafka connector (the Java client inside spark-sql-kafka 4.0.0) over SASL_SSL with
# SCRAM-SHA-512 (issue 15), configured only through kafka.* options: security.protocol,
# sasl.mechanism, sasl.jaas.config with ScramLoginModule, ssl.truststore.type=PEM. Against
# kafkalite and the real Kafka 3.8 of tests/integration/test_security_e2e.py (same listener,
# PKI and StandardAuthorizer; alice created by AlterUserScramCredentials and granted ALL on
# the topic prefix and on the connector's group prefix). A batch write of a few records, then
# a batch read returns exactly them; a wrong password makes the read fail. Skipped, with the
# resolver's message, without the connector or Java.
from __future__ import annotations

import uuid

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[spark]')")

from tests.clients_extra.test_java_sasl import grant_prefix, sasl_props  # noqa: E402
from tests.integration.test_security_e2e import PASSWORDS, _create, broker  # noqa: E402,F401

pytestmark = pytest.mark.timeout(600)


def sasl_options(secured, password: str) -> dict[str, str]:
    """The Java client's SASL_SSL settings as the connector's kafka.* options."""
    props = sasl_props(secured.bootstrap, "SASL_SSL", "SCRAM-SHA-512", "alice", password)
    props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": secured.ca})
    return {f"kafka.{k}": v for k, v in props.items()}


def test_batch_write_and_read_over_sasl_ssl_scram(kafka_spark, broker):  # noqa: F811
    spark = kafka_spark
    prefix = f"spark-sasl-{uuid.uuid4().hex[:6]}-"
    grant_prefix(broker, "alice", prefix)
    topic = f"{prefix}events"
    _create(broker, topic)
    options = sasl_options(broker, PASSWORDS["alice"])
    rows = [(f"k{i}", f"value-{i}") for i in range(5)]
    (spark.createDataFrame(rows, "key string, value string").write.format("kafka")
     .options(**options).option("topic", topic).save())

    def read(opts: dict[str, str]):
        return (spark.read.format("kafka").options(**opts).option("subscribe", topic)
                .option("startingOffsets", "earliest").option("endingOffsets", "latest")
                .option("groupIdPrefix", prefix).load())

    got = read(options).selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v",
                                   "offset").collect()
    assert sorted((r["k"], r["v"]) for r in got) == rows
    assert sorted(r["offset"] for r in got) == list(range(len(rows)))
    with pytest.raises(Exception) as refused:
        read({**sasl_options(broker, "not-her-password"),
              "kafka.default.api.timeout.ms": "15000",
              "kafka.request.timeout.ms": "10000"}).collect()
    assert "SaslAuthenticationException" in causes(refused.value), causes(refused.value)


def causes(error: Exception) -> list[str]:
    """The Java exception's class names, down its cause chain."""
    names, cause = [], getattr(error, "java_exception", None)
    while cause is not None and len(names) < 20:
        names.append(cause.getClass().getSimpleName())
        cause = cause.getCause()
    return names
