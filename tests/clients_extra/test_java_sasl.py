# The Java client over SASL (java/ClientsCheck.java, issue 15) against kafkalite and the real
# Kafka 3.8 configured alike: a topic created, 200 records produced (idempotent) and consumed
# in a group with a commit, then a wrong password refused with SaslAuthenticationException;
# configured with Kafka's client properties only (sasl.jaas.config with Kafka's login modules).
# - SASL_SSL with SCRAM-SHA-512: the listener, PKI and users of
#   tests/integration/test_security_e2e.py (alice created by AlterUserScramCredentials, the
#   StandardAuthorizer on); alice gets ALL on the prefixes her topic and group are named with.
# - SASL_PLAINTEXT with PLAIN: the JAAS user alice of tests/integration/sasl_targets.py.
# Classpath and skips as test_java_client.py.
from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import (AclOperation, AclPermissionType, ResourcePatternType,
                                   ResourceType)

from tests.helpers.real_kafka import eventually
from tests.integration.sasl_targets import USERS, target  # noqa: F401  (fixture)
from tests.integration.test_security_e2e import (PASSWORDS, Secured, _create, _produce,
                                                 broker)  # noqa: F401  (fixture)

from .test_java_client import java_clients, run_clients_check  # noqa: F401  (fixture)

pytestmark = pytest.mark.timeout(600)
MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
           "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


def sasl_props(bootstrap: str, protocol: str, mechanism: str, user: str,
               password: str) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap, "security.protocol": protocol,
            "sasl.mechanism": mechanism,
            "sasl.jaas.config": f'{MODULES[mechanism]} required username="{user}" '
                                f'password="{password}";'}


def grant_prefix(secured: Secured, user: str, prefix: str) -> None:
    """ALL on topics and groups named prefix...; waits (bounded) until the user can write."""
    secured.acl(*[(user, rt, prefix, ResourcePatternType.PREFIXED, AclOperation.ALL,
                   AclPermissionType.ALLOW) for rt in (ResourceType.TOPIC, ResourceType.GROUP)])
    probe = f"{prefix}probe"
    _create(secured, probe)
    assert eventually(lambda: _produce(secured, user, probe, [b"p"]), lambda e: e is None,
                      timeout=30) is None


def test_java_scram_sha_512_over_sasl_ssl(broker, java_clients):  # noqa: F811
    prefix = f"java-sasl-{uuid.uuid4().hex[:6]}-"
    grant_prefix(broker, "alice", prefix)
    props = sasl_props(broker.bootstrap, "SASL_SSL", "SCRAM-SHA-512", "alice",
                       PASSWORDS["alice"])
    props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": broker.ca})
    run_clients_check(java_clients, prefix, props,
                      f"Java SASL_SSL/SCRAM-SHA-512 check against {broker.kind}")


def test_java_plain_over_sasl_plaintext(target, java_clients):  # noqa: F811
    props = sasl_props(target.bootstrap, "SASL_PLAINTEXT", "PLAIN", *USERS["PLAIN"])
    run_clients_check(java_clients, "java-plain-", props,
                      f"Java SASL_PLAINTEXT/PLAIN check against {target.kind}")
