# Response diffing: every catalogue case (catalogue*.py) at every version of its API key that
# both kafkalite and Apache Kafka 3.8 advertise (read from both ApiVersions answers at run
# time) and kafka-python's codec speaks; both answers decoded and compared field by field
# after normalise.NORMALISED. A case marked `deliberate` must still differ (its reason is in
# the catalogue); every other case must answer identically.
from __future__ import annotations

import pytest

from compat_tests import wire
from compat_tests.diff import (catalogue_admin, catalogue_groups,  # noqa: F401  (register cases)
                               catalogue_kafka4, catalogue_security, catalogue_txn)
from compat_tests.diff.catalogue import CASES, Case
from compat_tests.diff.conftest import COUNTS, Side
from compat_tests.diff.normalise import differences, normalise


def common_versions(case: Case, lite: Side, kafka: Side) -> list[int]:
    k = case.api_key
    if k not in lite.versions or k not in kafka.versions:
        return []
    lo = max(lite.versions[k][0], kafka.versions[k][0])
    hi = min(lite.versions[k][1], kafka.versions[k][1])
    return [v for v in range(lo, hi + 1) if wire.has_schema(k, v) and case.versions(v)]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_same_answer(case: Case, sides: tuple[Side, Side]) -> None:
    lite, kafka = sides
    versions = common_versions(case, lite, kafka)
    if not versions:
        pytest.skip(f"no version of key {case.api_key} both brokers advertise")
    found: dict[int, list[str]] = {}
    for v in versions:
        a, b = normalise(case.run(lite, v)), normalise(case.run(kafka, v))
        COUNTS["compared"] += 1
        diff = differences(a, b)
        if diff:
            COUNTS["differing"] += 1
            COUNTS["deliberate"] += case.deliberate is not None
            found[v] = diff
    if case.deliberate is None:
        assert not found, "\n".join(f"v{v}: {d}" for v, ds in found.items() for d in ds[:20])
    else:
        assert found, f"no difference left: remove the deliberate mark ({case.deliberate})"


# Keys both serve that kafka-python (this diff's independent codec) cannot encode at any
# version, compared through real clients on both brokers instead: ConsumerGroupHeartbeat
# and ConsumerGroupDescribe by the Java 3.8 client and kafka-consumer-groups.sh
# (tests/clients_extra/test_java_consumer_protocol.py, tests/kafka_tools/
# test_consumer_protocol_tools.py). A key leaving this set needs a case.
NO_CODEC = {68, 69}


def test_catalogue_covers_every_common_key(sides: tuple[Side, Side]) -> None:
    lite, kafka = sides
    common = {k for k in lite.versions if k in kafka.versions} - NO_CODEC
    covered = {c.api_key for c in CASES}
    assert common <= covered, f"API keys both brokers serve with no diff case: {common - covered}"
