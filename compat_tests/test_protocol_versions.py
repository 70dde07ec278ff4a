# Every API key the target advertises in ApiVersions, at every advertised version from min to
# max, as raw requests encoded and decoded by kafka-python's independent codec. One test per API
# key kafka-python has a schema for; it runs each advertised version on a fresh connection and
# fails listing every version that failed. Versions kafka-python cannot encode are skipped and
# counted; the count is printed at the end of the run ("compat: protocol ... cases").
from __future__ import annotations

import pytest

from compat_tests import conftest, protocol_cases_admin, protocol_cases_groups  # noqa: F401
from compat_tests import wire
from compat_tests.protocol_cases import CHECKS, Ctx, generic_check

KEY_NAMES = {}
for _k, _pair in wire.SCHEMAS.items():
    KEY_NAMES[_k] = _pair["request"].__name__.removesuffix("Request")


@pytest.fixture(scope="module")
def ctx(target):
    return Ctx(target)


@pytest.mark.parametrize("api_key", sorted(wire.SCHEMAS), ids=lambda k: f"{k}-{KEY_NAMES[k]}")
def test_every_advertised_version(ctx, target, api_key):
    if api_key not in target.versions:
        pytest.skip(f"target does not advertise {KEY_NAMES[api_key]} ({api_key})")
    lo, hi = target.versions[api_key]
    failures, ran = [], 0
    for v in range(lo, hi + 1):
        if not wire.has_schema(api_key, v):
            conftest.count_protocol_cases(
                target, "skipped", f"{KEY_NAMES[api_key]} v{v}: no kafka-python schema")
            continue
        conftest.count_protocol_cases(target, "run")
        ran += 1
        try:
            with target.conn() as conn:
                if api_key in CHECKS:
                    CHECKS[api_key](ctx, conn, v)
                else:
                    generic_check(ctx, conn, v, api_key)
        except Exception as e:  # every version is tried; all failures are reported together
            failures.append(f"v{v}: {type(e).__name__}: {e}")
    if failures:
        pytest.fail(f"{KEY_NAMES[api_key]} ({api_key}) advertised v{lo}-{hi}, "
                    f"{len(failures)} of {ran} failed:\n" + "\n".join(failures))
    if not ran:
        pytest.skip(f"kafka-python has no schema for any of v{lo}-{hi}")


def test_advertised_keys_without_schema(target):
    """Keys kafka-python cannot encode at all are listed as skipped, never silently dropped."""
    missing = sorted(set(target.versions) - set(wire.SCHEMAS))
    for k in missing:
        lo, hi = target.versions[k]
        conftest.count_protocol_cases(target, "skipped",
                                      f"API key {k} v{lo}-{hi}: no kafka-python schema",
                                      n=hi - lo + 1)
    if missing:
        pytest.skip(f"no kafka-python schema for advertised API keys {missing}")


# What the client matrix needs; Apache Kafka 3.8 advertises all of them.
REQUIRED_KEYS = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit",
                 9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
                 13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups",
                 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
                 21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
                 32: "DescribeConfigs", 33: "AlterConfigs", 37: "CreatePartitions",
                 42: "DeleteGroups", 44: "IncrementalAlterConfigs", 47: "OffsetDelete",
                 60: "DescribeCluster"}


def test_required_keys_advertised(target):
    missing = {k: n for k, n in REQUIRED_KEYS.items() if k not in target.versions}
    assert not missing, f"not advertised: {missing}"


# The API keys Apache Kafka 3.8.0 advertises as a single KRaft node (the anchor's serve.sh).
KAFKA_38_KEYS = {0, 1, 2, 3, *range(8, 52), 55, 57, 60, 61, 64, 65, 66, 68, 69, 74, 75}
# Keys Kafka serves that kafkalite does not, each one a row of COMPATIBILITY.md's known
# differences: ACLs (29-31), delegation tokens (38-41), UpdateFeatures (57),
# UnregisterBroker (64) and ListClientMetricsResources (74). Kept exact:
# a key kafkalite starts serving must leave this set, so the set never goes stale.
NOT_SERVED_BY_KAFKALITE = {38, 39, 40, 41, 57, 64, 74}


def test_advertised_keys_against_kafka_38(target):
    keys = set(target.versions)
    if target.kind == "kafka":
        assert keys == KAFKA_38_KEYS
    elif target.kind == "kafkalite":
        assert KAFKA_38_KEYS - keys == NOT_SERVED_BY_KAFKALITE, \
            "NOT_SERVED_BY_KAFKALITE must list exactly the Kafka 3.8 keys kafkalite lacks"
    else:
        pytest.skip("an external target may be another Kafka version")
