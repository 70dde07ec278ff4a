# share.isolation.level (a GROUP config, KIP-932) through confluent-kafka: a transactional
# producer commits one transaction, aborts one and leaves one open; a read_committed share
# group gets only the committed records (nothing past the LSO, nothing aborted), a
# read_uncommitted one gets them all. kafkalite only: Kafka 3.8 serves no share groups.
from __future__ import annotations

import uuid

import confluent_kafka as ck

from tests.integration.test_groups_helpers import RawClient
from tests.integration.test_share_groups import (GROUP_RESOURCE, SET, consumer, make_topic,
                                                 poll_until, share_broker)  # noqa: F401


def set_group_config(bootstrap: str, group: str, name: str, value: str) -> None:
    c = RawClient(bootstrap)
    m = c.schema(44, 1)
    (r,) = c.call(44, 1, validate_only=False, resources=(m.AlterConfigsResource(
        resource_type=GROUP_RESOURCE, resource_name=group, configs=(m.AlterableConfig(
            name=name, config_operation=SET, value=value),)),)).responses
    assert int(r.error_code) == 0, r.error_message


def test_read_committed_share_group(share_broker):  # noqa: F811
    bs = share_broker.bootstrap
    topic, committed_group = make_topic(bs)
    _t, uncommitted_group = make_topic(bs)
    set_group_config(bs, committed_group, "share.isolation.level", "read_committed")
    set_group_config(bs, uncommitted_group, "share.auto.offset.reset", "earliest")
    p = ck.Producer({"bootstrap.servers": bs, "transactional.id": uuid.uuid4().hex})
    p.init_transactions(15)
    for outcome in ("commit", "abort", "open"):
        p.begin_transaction()
        for i in range(3):
            p.produce(topic, value=f"{outcome}-{i}".encode())
        p.flush(15)
        if outcome == "commit":
            p.commit_transaction(15)
        elif outcome == "abort":
            p.abort_transaction(15)
    try:
        rc = consumer(bs, committed_group, topic)
        ru = consumer(bs, uncommitted_group, topic)
        try:
            got_rc = poll_until([rc], lambda s: len(s) >= 3, 20)
            got_rc += poll_until([rc], lambda s: False, 3)
            got_ru = poll_until([ru], lambda s: len(s) >= 9, 20)
        finally:
            rc.close()
            ru.close()
        assert sorted(m.value() for _, m in got_rc) == [b"commit-0", b"commit-1", b"commit-2"]
        assert {m.value()[:4] for _, m in got_ru} == {b"comm", b"abor", b"open"}
    finally:
        p.abort_transaction(15)
