# The file work of a topic's life (CreateTopics, CreatePartitions, AlterConfigs on a topic,
# DeleteTopics) runs off the event loop's thread, and is done (durably) when the request's
# answer is built. Real requests through Broker.dispatch on a real data directory; the
# os functions are observed (the real ones run) to learn which thread called them.
from __future__ import annotations

import asyncio
import json
import os
import threading

import pytest
from kafka.protocol.admin import (AlterConfigsRequest, AlterConfigsResponse,
                                  CreatePartitionsRequest, CreatePartitionsResponse,
                                  CreateTopicsRequest, CreateTopicsResponse,
                                  DeleteTopicsRequest, DeleteTopicsResponse)

from kafkalite.config import BrokerConfig
from kafkalite.log.manager import LogManager

from tests.unit.test_dispatch import broker, call  # noqa: F401 (broker: a fixture)

OBSERVED = ("fsync", "replace", "rename", "unlink", "mkdir", "open")


@pytest.fixture
def calls(monkeypatch) -> list[tuple[str, int]]:
    """(function, thread id) of each os call in OBSERVED, in order; the real call runs."""
    seen: list[tuple[str, int]] = []
    for name in OBSERVED:
        real = getattr(os, name)

        def observed(*args, _real=real, _name=name, **kw):
            seen.append((_name, threading.get_ident()))
            return _real(*args, **kw)
        monkeypatch.setattr(os, name, observed)
    return seen




def _meta(broker, name: str) -> dict:
    with open(os.path.join(broker.logs.meta_dir, name + ".json")) as f:
        return json.load(f)


def _on_loop(calls, loop_thread: int) -> list[str]:
    return [name for name, thread in calls if thread == loop_thread]


async def test_create_topics_writes_and_fsyncs_off_the_loop(broker, calls):
    Topic = CreateTopicsRequest.CreatableTopic
    req = CreateTopicsRequest[5](
        topics=[Topic(name="many", num_partitions=40, replication_factor=1, assignments=[],
                      configs=[("retention.ms", "1234")])],
        timeout_ms=5000, validate_only=False)
    resp = await call(broker, req, CreateTopicsResponse[5])
    assert [(t.name, t.error_code) for t in resp.topics] == [("many", 0)]
    loop = threading.get_ident()
    assert _on_loop(calls, loop) == []
    assert ("fsync", loop) not in calls and any(n == "fsync" for n, _t in calls)
    # Answered: the metadata file and every partition are there already.
    assert _meta(broker, "many")["partitions"] == 40
    assert _meta(broker, "many")["configs"] == {"retention.ms": "1234"}
    assert all(os.path.isdir(os.path.join(broker.logs.data_dir, f"many-{p}"))
               for p in range(40))
    assert len(broker.logs.get("many").partitions) == 40


async def test_create_partitions_and_alter_configs_write_off_the_loop(broker, calls):
    broker.create_topic("grow", 2)
    calls.clear()
    Topic = CreatePartitionsRequest.CreatePartitionsTopic
    req = CreatePartitionsRequest[1](topics=[Topic(name="grow", count=30, assignments=None)],
                                     timeout_ms=5000, validate_only=False)
    resp = await call(broker, req, CreatePartitionsResponse[1])
    assert [(r.name, r.error_code) for r in resp.results] == [("grow", 0)]
    loop = threading.get_ident()
    assert calls and _on_loop(calls, loop) == []
    assert _meta(broker, "grow")["partitions"] == 30
    assert len(broker.logs.get("grow").partitions) == 30

    calls.clear()
    R = AlterConfigsRequest.AlterConfigsResource
    req = AlterConfigsRequest[1](resources=[R(resource_type=2, resource_name="grow", configs=[
        R.AlterableConfig(name="retention.ms", value="99")])], validate_only=False)
    resp = await call(broker, req, AlterConfigsResponse[1])
    assert [r.error_code for r in resp.responses] == [0]
    assert calls and _on_loop(calls, loop) == []
    assert _meta(broker, "grow") == {"name": "grow", "topic_id": _meta(broker, "grow")[
        "topic_id"], "partitions": 30, "configs": {"retention.ms": "99"}, "internal": False}
    assert broker.logs.partition("grow", 29).config.retention_ms == 99


async def test_delete_topics_closes_and_renames_off_the_loop(broker, calls):
    broker.create_topic("gone", 50)
    for p in range(50):  # queued flushes that the deletion waits for
        broker.logs.partition("gone", p).schedule_flush()
    calls.clear()
    req = DeleteTopicsRequest[4](topic_names=["gone"], timeout_ms=5000)
    resp = await call(broker, req, DeleteTopicsResponse[4])
    assert [(r.name, r.error_code) for r in resp.responses] == [("gone", 0)]
    loop = threading.get_ident()
    assert _on_loop(calls, loop) == []
    assert [n for n, _t in calls].count("rename") == 50
    assert not os.path.exists(os.path.join(broker.logs.meta_dir, "gone.json"))
    assert not any(n.startswith("gone-") and n[5:].isdigit()
                   for n in os.listdir(broker.logs.data_dir))
    # The name is free at once, for the same requests.
    assert broker.logs.get("gone") is None
    assert len(broker.create_topic("gone", 3).partitions) == 3


async def test_a_deletion_then_a_recreation_reach_the_disk_in_that_order(tmp_path):
    m = LogManager(BrokerConfig({"log.dirs": str(tmp_path)}))
    m.open()
    old = await m.create_topic_async("again", 4)
    task = asyncio.ensure_future(m.delete_topic_async("again"))
    for _ in range(10):  # until the deletion is queued on the worker (not done)
        if m.get("again") is None:
            break
        await asyncio.sleep(0)
    assert m.get("again") is None and not task.done()
    new = m.create_topic("again", 2)  # a blocking caller (auto-creation) meanwhile
    await task
    assert new.topic_id != old.topic_id
    m.close()
    m = LogManager(BrokerConfig({"log.dirs": str(tmp_path)}))
    m.open()
    try:
        again = m.get("again")
        assert again is not None and again.topic_id == new.topic_id
        assert len(again.partitions) == 2
    finally:
        m.close()


async def test_concurrent_creations_of_one_name_create_it_once(tmp_path):
    m = LogManager(BrokerConfig({"log.dirs": str(tmp_path)}))
    m.open()
    try:
        results = await asyncio.gather(*(m.create_topic_async("once", 3) for _ in range(2)),
                                       return_exceptions=True)
        made = [r for r in results if not isinstance(r, BaseException)]
        refused = [r for r in results if isinstance(r, BaseException)]
        assert len(made) == 1 and len(refused) == 1
        assert "already exists" in str(refused[0])
        assert m.get("once") is made[0]
    finally:
        m.close()
