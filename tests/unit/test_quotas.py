# The quota arithmetic and stores, sans-I/O, on a FakeClock: Kafka's windows and throttle
# formula, the user/client-id precedence, persistence, and SCRAM keys per RFC 7677.
from __future__ import annotations

import base64
import hashlib
import hmac

from kafkalite.broker.quota_rate import Rate, record_and_throttle
from kafkalite.broker.quotas import PRODUCE, REQUEST, ClientQuotas
from kafkalite.clock import FakeClock
from kafkalite.javahash import hashmap_order, string_hash
from kafkalite.security.scram_store import ScramStore, salted_password


def test_rate_is_measured_over_at_least_ten_windows():
    clock = FakeClock()
    rate = Rate()
    rate.record(1000, clock.monotonic_ms())
    assert rate.measure(clock.monotonic_ms()) == 100.0  # 1000 / 10 s, not / 0 s
    clock.advance(15_000)
    rate.record(1000, clock.monotonic_ms())
    # 11 s later the first window has expired; the new one alone is left.
    assert rate.measure(clock.monotonic_ms()) == 100.0


def test_throttle_is_the_time_for_the_rate_to_fall_back_to_the_quota():
    now = FakeClock().monotonic_ms()
    rate = Rate()
    assert record_and_throttle(rate, 1000, 100, now) == 0  # exactly at the bound
    # 2000 over 10 s = 200/s, twice the bound: (200 - 100) / 100 * 10 s.
    assert record_and_throttle(rate, 1000, 100, now) == 10_000


def test_precedence_and_shared_rates():
    clock = FakeClock()
    q = ClientQuotas(None, clock)
    q.alter([([("client-id", None)], [(PRODUCE, 1000, False)])], False)
    assert q.lookup(PRODUCE, "ANONYMOUS", "a") == (1000, "", "a")
    q.alter([([("user", None)], [(PRODUCE, 2000, False)])], False)
    assert q.lookup(PRODUCE, "ANONYMOUS", "a") == (2000, "ANONYMOUS", "")
    q.alter([([("user", "ANONYMOUS"), ("client-id", "a")], [(PRODUCE, 3000, False)])], False)
    assert q.lookup(PRODUCE, "ANONYMOUS", "a") == (3000, "ANONYMOUS", "a")
    assert q.lookup(PRODUCE, "ANONYMOUS", "b") == (2000, "ANONYMOUS", "")
    assert q.lookup(REQUEST, "ANONYMOUS", "a") is None
    assert q.record(PRODUCE, "b", 20_000) == 0  # 20000 / 10 s = the bound
    # "c" shares the default user's rate with "b": (2010 - 2000) / 2000 * 10 s.
    assert q.record(PRODUCE, "c", 100) == 50
    assert q.record(PRODUCE, "a", 30_000) == 0  # its own entity, its own rate


def test_request_throttle_is_capped_at_one_window():
    q = ClientQuotas(None, FakeClock())
    q.alter([([("client-id", "x")], [(REQUEST, 1, False)])], False)
    assert q.request_time("x", 10**9) == 1000  # 100 %-seconds against 1 %: capped


def test_quotas_and_credentials_persist(tmp_path):
    q = ClientQuotas(str(tmp_path), FakeClock())
    q.alter([([("user", "u"), ("client-id", None)], [(PRODUCE, 5, False)])], False)
    again = ClientQuotas(str(tmp_path), FakeClock())
    again.load()
    assert again.describe([], False) == [((("client-id", None), ("user", "u")),
                                          [(PRODUCE, 5.0)])]
    s = ScramStore(str(tmp_path))
    s.alter([], [("alice", 1, 4096, b"salt", b"k" * 32)])
    s2 = ScramStore(str(tmp_path))
    s2.load()
    assert s2.get("alice", 1) == s.get("alice", 1)
    assert b"k" * 32 not in (tmp_path / "scram-credentials.json").read_bytes()


def test_scram_keys_verify_rfc7677_exchange():
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    store = ScramStore(None)
    store.alter([], [("user", 1, 4096, salt, salted_password(1, "pencil", salt, 4096))])
    cred = store.get("user", 1)
    auth = (b"n=user,r=rOprNGfwEbeRWgbNEkqO,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF"
            b"$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2Ra"
            b"TCAfuxFIlj)hNlF$k0")
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    signature = hmac.new(cred.stored_key, auth, "sha256").digest()
    client_key = bytes(a ^ b for a, b in zip(proof, signature))
    assert hashlib.sha256(client_key).digest() == cred.stored_key
    assert base64.b64encode(hmac.new(cred.server_key, auth, "sha256").digest()) \
        == b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_java_hashmap_order():
    # Orders observed from Kafka 3.8's answers.
    assert hashmap_order(["carl", "yan", "abe", "alice"], string_hash) == \
        ["abe", "carl", "yan", "alice"]
    assert hashmap_order(["user", "ip"], string_hash, 2) == ["user", "ip"]
    assert hashmap_order(["user", "client-id"], string_hash, 2) == ["client-id", "user"]
