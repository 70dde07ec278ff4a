"""Topic configs Kafka 3.x deprecated but still accepts (issue 10 item 12):
message.format.version, message.downconversion.enable, message.timestamp.difference.max.ms,
and an empty cleanup.policy. Accepted and described as Kafka describes them, invalid values
refused with Kafka's INVALID_CONFIG messages. Tests run against kafkalite and the real Kafka
(`any_broker`) or compare the two field by field."""
from __future__ import annotations

import uuid

import pytest
from kafka.protocol.admin import CreateTopicsRequest

from tests.helpers.kbatch import build_batch, call, connect, produce_raw
from tests.helpers.kconfigs import TOPIC, describe
from tests.helpers.real_kafka import create_topic

DEPRECATED = {"message.format.version": "0.10.0", "message.downconversion.enable": "false",
              "message.timestamp.difference.max.ms": "1000"}
BROKER_SYNONYM = {"message.format.version": "log.message.format.version",
                  "message.downconversion.enable": "log.message.downconversion.enable",
                  "message.timestamp.difference.max.ms":
                      "log.message.timestamp.difference.max.ms"}
KAFKA_DEFAULTS = {"message.format.version": "3.0-IV1", "message.downconversion.enable": "true",
                  "message.timestamp.difference.max.ms": str(2**63 - 1)}
TOPIC_CONFIG, DEFAULT_CONFIG, INVALID_CONFIG = 1, 5, 40


def _describe(bootstrap: str, topic: str, keys: list[str]) -> dict:
    code, _message, configs = describe(bootstrap, TOPIC, topic, keys, docs=True)
    assert code == 0
    return configs


def _create(bootstrap: str, topic: str, configs: dict[str, str]) -> tuple:
    Req = CreateTopicsRequest[7]
    T = Req.CreatableTopic
    req = Req(topics=[T(name=topic, num_partitions=1, replication_factor=1, assignments=[],
                        configs=[T.CreatableTopicConfig(name=k, value=v)
                                 for k, v in configs.items()])],
              timeout_ms=15000, validate_only=True)
    with connect(bootstrap) as s:
        t = call(s, req).topics[0]
    return t.error_code, t.error_message


def test_described_as_kafka_describes_them(kafka_broker, real_kafka):
    """The same topics on both brokers: the same DescribeConfigs entries, documentation
    present or absent alike."""
    keys = [*DEPRECATED, "cleanup.policy"]
    name = f"deprecated-{uuid.uuid4().hex[:10]}"
    answers = []
    for bootstrap in (kafka_broker, real_kafka):
        create_topic(bootstrap, name, {**DEPRECATED, "cleanup.policy": ""})
        create_topic(bootstrap, name + "-defaults")
        answers.append((_describe(bootstrap, name, keys),
                        _describe(bootstrap, name + "-defaults", keys)))
    assert answers[0] == answers[1]


def test_accepted_with_their_values(any_broker):
    name = f"deprecated-{uuid.uuid4().hex[:10]}"
    create_topic(any_broker, name, {**DEPRECATED, "cleanup.policy": ""})
    create_topic(any_broker, name + "-defaults")
    keys = [*DEPRECATED, "cleanup.policy"]
    configs = _describe(any_broker, name, keys)
    for key, value in DEPRECATED.items():
        entry = configs[key]
        assert (entry[0], entry[2]) == (value, TOPIC_CONFIG)
        assert entry[4] == [(key, value, TOPIC_CONFIG),
                            (BROKER_SYNONYM[key], KAFKA_DEFAULTS[key], DEFAULT_CONFIG)]
    assert configs["cleanup.policy"][:3] == ("", False, TOPIC_CONFIG)
    defaults = _describe(any_broker, name + "-defaults", keys)
    assert {k: (v[0], v[2]) for k, v in defaults.items() if k in DEPRECATED} == \
        {k: (v, DEFAULT_CONFIG) for k, v in KAFKA_DEFAULTS.items()}
    # Neither deleted nor compacted: a keyless record is accepted.
    with connect(any_broker) as s:
        assert produce_raw(s, name, 0, build_batch([(None, b"v", [], -1)])).error_code == 0


@pytest.mark.parametrize("configs, message", [
    ({"message.format.version": "2.8.1"}, None),
    ({"message.format.version": "3.0-IV1"}, None),
    ({"message.format.version": "abc"},
     "Invalid value abc for configuration message.format.version: Version abc is not a "
     "valid version"),
    ({"message.format.version": "4.5"},
     "Invalid value 4.5 for configuration message.format.version: Version 4.5 is not a "
     "valid version"),
    ({"message.downconversion.enable": "maybe"},
     "Invalid value maybe for configuration message.downconversion.enable: Expected value to "
     "be either true or false"),
    ({"message.timestamp.difference.max.ms": "-1"},
     "Invalid value -1 for configuration message.timestamp.difference.max.ms: Value must be "
     "at least 0"),
    ({"cleanup.policy": " compact , delete "}, None),
    ({"cleanup.policy": "compact,"},
     "Invalid value  for configuration cleanup.policy: String must be one of: compact, "
     "delete"),
])
def test_validated_as_kafka_validates_them(any_broker, configs, message):
    expected = (0, None) if message is None else (INVALID_CONFIG, message)
    assert _create(any_broker, f"dep-{uuid.uuid4().hex[:10]}", configs) == expected
