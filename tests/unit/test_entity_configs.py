# The encodings of cluster/entity_configs.py that Kafka's ZooKeeper mode fixes: Sanitizer's
# names, ScramCredentialUtils' credential text, Double.toString for quota values, the
# entity <-> znode path mapping, and the plan/apply split of the SCRAM store and the quotas
# (the ZooKeeper write goes between them). The znodes as a real Kafka 3.8 writes them are
# compared in tests/cluster/test_entity_configs_zk_vs_kafka.py.
from __future__ import annotations

from kafkalite.broker.quotas import ClientQuotas
from kafkalite.clock import FakeClock
from kafkalite.cluster import entity_configs as ec
from kafkalite.security.scram_store import ScramStore, make_credential, salted_password


def test_sanitize_is_kafkas_url_encoding():
    # observed on Kafka 3.8's znodes: "al ice/é" -> al%20ice%2F%C3%A9, c:1 -> c%3A1, cl*x -> cl%2Ax
    assert ec.sanitize("al ice/é") == "al%20ice%2F%C3%A9"
    assert ec.sanitize("c:1") == "c%3A1"
    assert ec.sanitize("cl*x") == "cl%2Ax"
    assert ec.sanitize("a.b-c_d~") == "a.b-c_d%7E"
    for name in ("al ice/é", "c:1", "cl*x", "a+b", "<default>"):
        assert ec.desanitize(ec.sanitize(name)) == name


def test_quota_values_as_kafka_writes_them():
    assert ec.quota_text("producer_byte_rate", 1024.0) == "1024"
    assert ec.quota_text("request_percentage", 12.5) == "12.5"
    assert ec.quota_text("controller_mutation_rate", 3.0) == "3.0"
    assert ec.quota_text("request_percentage", 12345678.5) == "1.23456785E7"
    assert ec.quota_text("request_percentage", 0.0001) == "1.0E-4"
    assert ec.quota_text("connection_creation_rate", 5.0) == "5"


def test_credential_text_round_trips():
    salt = b"saltsalt"
    cred = make_credential(1, salt, salted_password(1, "pw", salt, 4096), 4096)
    text = ec.encode_credential(cred)
    assert text.startswith("salt=c2FsdHNhbHQ=,stored_key=") and text.endswith(",iterations=4096")
    assert ec.decode_credential(text) == cred


def test_entity_paths_both_ways():
    cases = [((("user", "bob"),), ("users", "bob")),
             ((("user", None),), ("users", "<default>")),
             ((("client-id", "c:1"), ("user", "bob")), ("users", "bob/clients/c%3A1")),
             ((("client-id", None), ("user", None)), ("users", "<default>/clients/<default>")),
             ((("client-id", "cl*x"),), ("clients", "cl%2Ax")),
             ((("ip", "1.2.3.4"),), ("ips", "1.2.3.4"))]
    for entity, path in cases:
        assert ec.entity_path(entity) == path
        assert frozenset(ec.entity_of(*path)) == frozenset(entity)


def test_keys_in_a_java_properties_order():
    data = ec.encode_entity_config({"producer_byte_rate": "1024", "request_percentage": "12.5",
                                    "SCRAM-SHA-256": "x"})
    assert data == (b'{"version":1,"config":{"SCRAM-SHA-256":"x","request_percentage":"12.5",'
                    b'"producer_byte_rate":"1024"}}')


def test_plans_change_nothing_until_applied():
    store = ScramStore(None)
    salt = b"s" * 8
    results, changes = store.plan([], [("u", 1, 4096, salt, salted_password(1, "pw", salt, 4096))])
    assert results == [("u", 0, None)] and store.get("u", 1) is None
    store.apply(changes)
    assert store.get("u", 1) is not None
    quotas = ClientQuotas(None, FakeClock())
    results, changed = quotas.plan([((("client-id", "c"),), [("producer_byte_rate", 10, False)])],
                                   False)
    assert results[0][1] == 0 and quotas.lookup("producer_byte_rate", "x", "c") is None
    quotas.apply(changed)
    assert quotas.lookup("producer_byte_rate", "x", "c") == (10.0, "", "c")
    quotas.set_entity((("client-id", "c"),), {})
    assert quotas.lookup("producer_byte_rate", "x", "c") is None
