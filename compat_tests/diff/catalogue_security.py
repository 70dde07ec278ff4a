# Diff cases for the security APIs as a client meets them on a PLAINTEXT listener of a broker
# with no authorizer (the diff's two brokers): SECURITY_DISABLED for the ACL APIs, and what
# Kafka answers to SASL requests where no SASL is configured. The authenticated and
# authorized paths are compared in tests/integration/test_sasl_*.py, test_acls.py and
# test_acl_enforcement.py, each against both brokers.
from __future__ import annotations

from typing import Any

from compat_tests.diff.catalogue import case
from compat_tests.diff.conftest import Side

ACL_ANY = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
           "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}


@case("describe-acls-no-authorizer", 29)
def _(s: Side, v: int) -> Any:
    return s.call(29, v, ACL_ANY)


@case("create-acls-no-authorizer", 30)
def _(s: Side, v: int) -> Any:
    return s.call(30, v, {"creations": [{
        "resource_type": 2, "resource_name": "diff-acl", "resource_pattern_type": 3,
        "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}]})


@case("delete-acls-no-authorizer", 31)
def _(s: Side, v: int) -> Any:
    return s.call(31, v, {"filters": [ACL_ANY]})


@case("sasl-handshake-on-plaintext", 17)
def _(s: Side, v: int) -> Any:
    return s.call(17, v, {"mechanism": "PLAIN"})


@case("sasl-authenticate-on-plaintext", 36)
def _(s: Side, v: int) -> Any:
    return s.call(36, v, {"auth_bytes": b"\x00alice\x00secret"})
