# Time-based retention, seen from the wire: the log start offset moves past expired records.
#
# Kafka (3.8.0 UnifiedLog.deleteRetentionMsBreachedSegments / deletableSegments): a segment
# whose largest record timestamp is older than retention.ms is deleted at the next retention
# check (log.retention.check.interval.ms, 300000 by default); when every segment is breached the
# active one is rolled first, so the log start offset reaches the log end. Records stamped an
# hour ago with retention.ms=60000 are breached at once, so only the check interval matters:
# the test needs a target that checks every few seconds, read with DescribeConfigs (else it
# starts a broker of the same kind that does: conftest.target_with).
from __future__ import annotations

import time

import pytest

from compat_tests.clients_common import wait_for
from compat_tests.protocol_cases import batch, list_offset, produce

MAX_INTERVAL_MS = 5000


@pytest.fixture
def retention_target(target, target_with):
    interval = int(target.broker_config("log.retention.check.interval.ms"))
    if interval <= MAX_INTERVAL_MS:
        return target
    if not target.spawned:
        pytest.skip(f"needs log.retention.check.interval.ms <= {MAX_INTERVAL_MS}; "
                    f"target has {interval}")
    return target_with({"log.retention.check.interval.ms": "1000"})


def test_expired_records_are_deleted(retention_target):
    t = retention_target
    topic = t.create_topic(config={"retention.ms": "60000"})
    kept = t.create_topic()
    hour_ago = int(time.time() * 1000) - 3_600_000
    for name in (topic, kept):
        part = produce(t, name, batch([(None, b"old-%d" % i, []) for i in range(3)],
                                      timestamp=hour_ago))
        assert part.error_code == 0, part
    # Kafka's first check comes 30 s after the broker started (LogManager's initial delay).
    wait_for("expired records deleted", lambda: list_offset(t, topic, -2) == 3, timeout=60)
    # The default retention (7 days) keeps the same records on the other topic.
    assert list_offset(t, kept, -2) == 0
    # The partition keeps working after its segments went.
    assert produce(t, topic, batch([(None, b"new", [])])).base_offset == 3
