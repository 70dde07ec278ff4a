# The Java client over SASL (java/SaslCheck.java, issue 15) against kafkalite and the real
# Kafka 3.8 configured alike: a topic created, 200 records produced (idempotent) and consumed
# in a group with a commit, then a wrong password refused with SaslAuthenticationException.
# - SASL_SSL with SCRAM-SHA-512: the listener, PKI and users of
#   tests/integration/test_security_e2e.py (alice created by AlterUserScramCredentials, the
#   StandardAuthorizer on); alice gets ALL on the prefixes her topic and group are named with.
# - SASL_PLAINTEXT with PLAIN: the JAAS user alice of tests/integration/sasl_targets.py.
# Classpath and skips as test_java_client.py.
from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import (AclOperation, AclPermissionType, ResourcePatternType,
                                   ResourceType)

from tests.helpers.real_kafka import eventually
from tests.integration.sasl_targets import USERS, target  # noqa: F401  (fixture)
from tests.integration.test_security_e2e import (PASSWORDS, Secured, _create, _produce,
                                                 broker)  # noqa: F401  (fixture)

from ._checks import run_check
from .test_java_client import compile_check

SOURCE = Path(__file__).parent / "java" / "SaslCheck.java"
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def java_sasl(tmp_path_factory) -> list[str]:
    return compile_check(SOURCE, tmp_path_factory.mktemp("java-sasl"))


def grant_prefix(secured: Secured, user: str, prefix: str) -> None:
    """ALL on topics and groups named prefix...; waits (bounded) until the user can write."""
    secured.acl(*[(user, rt, prefix, ResourcePatternType.PREFIXED, AclOperation.ALL,
                   AclPermissionType.ALLOW) for rt in (ResourceType.TOPIC, ResourceType.GROUP)])
    probe = f"{prefix}probe"
    _create(secured, probe)
    assert eventually(lambda: _produce(secured, user, probe, [b"p"]), lambda e: e is None,
                      timeout=30) is None


def test_java_scram_sha_512_over_sasl_ssl(broker, java_sasl):  # noqa: F811
    prefix = f"java-sasl-{uuid.uuid4().hex[:6]}-"
    grant_prefix(broker, "alice", prefix)
    run_check([*java_sasl, broker.bootstrap, "SASL_SSL", "SCRAM-SHA-512", "alice",
               PASSWORDS["alice"], prefix, broker.ca], "JAVA SASL CHECK PASSED",
              f"Java SASL_SSL/SCRAM-SHA-512 check against {broker.kind}")


def test_java_plain_over_sasl_plaintext(target, java_sasl):  # noqa: F811
    user, password = USERS["PLAIN"]
    run_check([*java_sasl, target.bootstrap, "SASL_PLAINTEXT", "PLAIN", user, password,
               "java-plain-"], "JAVA SASL CHECK PASSED",
              f"Java SASL_PLAINTEXT/PLAIN check against {target.kind}")
