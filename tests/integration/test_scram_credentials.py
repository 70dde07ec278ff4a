# SCRAM credentials (50/51) and `kafka-configs.sh` for quotas and users, against kafkalite
# and the real Kafka 3.8 (`any_broker`): the expectations are Kafka's own answers.
from __future__ import annotations

import os
import subprocess
import uuid

import pytest
from kafka.protocol.admin.users import (AlterUserScramCredentialsRequest,
                                        DescribeUserScramCredentialsRequest)

from tests.helpers.kbatch import call, connect
from tests.helpers.real_kafka import anchor_dir, eventually

A = AlterUserScramCredentialsRequest
D = DescribeUserScramCredentialsRequest
SHA256, SHA512 = 1, 2
NOT_FOUND, DUPLICATE, UNACCEPTABLE, UNSUPPORTED_MECH = 91, 92, 93, 33


def alter(bs, dels=(), ups=()):
    req = A(deletions=[A.ScramCredentialDeletion(name=n, mechanism=m) for n, m in dels],
            upsertions=[A.ScramCredentialUpsertion(name=n, mechanism=m, iterations=i, salt=s,
                                                   salted_password=p)
                        for n, m, i, s, p in ups], version=0)
    with connect(bs) as s:
        return [(r.user, r.error_code, r.error_message) for r in call(s, req).results]


def describe(bs, users):
    req = D(users=None if users is None else [D.UserName(name=u) for u in users], version=0)
    with connect(bs) as s:
        r = call(s, req)
    return r.error_code, r.error_message, [
        (x.user, x.error_code, x.error_message,
         sorted((c.mechanism, c.iterations) for c in x.credential_infos)) for x in r.results]


def test_scram_credentials_as_kafka(any_broker):
    bs = any_broker
    x = uuid.uuid4().hex[:6]
    alice, bob, carl = f"alice{x}", f"bob{x}", f"carl{x}"
    key = b"k" * 32
    assert alter(bs, ups=[(alice, SHA256, 8192, b"salt", key)]) == [(alice, 0, None)]
    refused = [
        ([], [(bob, SHA512, 4096, b"s", key), (bob, SHA256, 4096, b"s", key)],
         [(bob, DUPLICATE, "A user credential cannot be altered twice in the same request")]),
        ([], [(carl, 3, 8192, b"s", key)], [(carl, UNSUPPORTED_MECH, "Unknown SCRAM mechanism")]),
        ([], [(carl, SHA256, 100, b"s", key)], [(carl, UNACCEPTABLE, "Too few iterations")]),
        ([], [(carl, SHA256, 20000, b"s", key)], [(carl, UNACCEPTABLE, "Too many iterations")]),
        ([], [("", SHA256, 8192, b"s", key)], [("", UNACCEPTABLE, "Username must not be empty")]),
        ([(carl, SHA256)], [], [(carl, NOT_FOUND,
                                 "Attempt to delete a user credential that does not exist")]),
        ([(alice, SHA512)], [], [(alice, NOT_FOUND,
                                  "Attempt to delete a user credential that does not exist")]),
        ([], [(carl, SHA512, 8192, b"s", b"")], [(carl, -1, None)]),  # Kafka: empty HMAC key
    ]
    for dels, ups, expected in refused:
        assert alter(bs, dels, ups) == expected, (dels, ups)
    assert alter(bs, ups=[(bob, SHA512, 4096, b"", key)]) == [(bob, 0, None)]
    assert alter(bs, ups=[(alice, SHA512, 16384, b"s2", key)]) == [(alice, 0, None)]
    got = eventually(lambda: describe(bs, [alice, bob, carl, carl]),
                     lambda r: r[2] and r[2][0][3] or True)
    assert got[:2] == (0, "")
    assert sorted(got[2]) == sorted([
        (alice, 0, "", [(SHA256, 8192), (SHA512, 16384)]), (bob, 0, "", [(SHA512, 4096)]),
        (carl, DUPLICATE, "Cannot describe SCRAM credentials for the same user twice in a "
         f"single request: {carl}", [])])
    assert describe(bs, [carl])[2] == [
        (carl, NOT_FOUND, f"Attempt to describe a user credential that does not exist: {carl}",
         [])]
    everyone = [r[0] for r in describe(bs, None)[2]]
    assert {alice, bob} <= set(everyone)
    assert alter(bs, dels=[(alice, SHA256), (bob, SHA512)]) in (
        [(alice, 0, None), (bob, 0, None)], [(bob, 0, None), (alice, 0, None)])
    assert describe(bs, [alice])[2] == [(alice, 0, "", [(SHA512, 16384)])]


def _configs(bs: str, *args: str) -> str:
    tool = os.path.join(anchor_dir() or "", "bin", "kafka-configs.sh")
    out = subprocess.run([tool, "--bootstrap-server", bs, *args], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_kafka_configs_tool_quotas_and_users(any_broker):
    if anchor_dir() is None:
        pytest.skip("no Kafka anchor")
    bs = any_broker
    x = uuid.uuid4().hex[:6]
    client, user = f"c1{x}", f"alice{x}"
    assert _configs(bs, "--alter", "--add-config", "producer_byte_rate=1024,"
                    "consumer_byte_rate=2048", "--entity-type", "clients", "--entity-name",
                    client) == f"Completed updating config for client {client}."
    shown = eventually(lambda: _configs(bs, "--describe", "--entity-type", "clients",
                                        "--entity-name", client), lambda out: "rate" in out)
    assert shown == (f"Quota configs for client-id '{client}' are consumer_byte_rate=2048.0, "
                     "producer_byte_rate=1024.0")
    assert _configs(bs, "--alter", "--add-config",
                    "SCRAM-SHA-256=[iterations=8192,password=alice-secret]",
                    "--entity-type", "users", "--entity-name", user) \
        == f"Completed updating config for user {user}."
    shown = eventually(lambda: _configs(bs, "--describe", "--entity-type", "users",
                                        "--entity-name", user), lambda out: "SCRAM" in out)
    assert shown == f"SCRAM credential configs for user-principal '{user}' are " \
                    "SCRAM-SHA-256=iterations=8192"
