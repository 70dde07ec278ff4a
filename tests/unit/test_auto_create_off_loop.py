# Auto-creation does not hold the event loop: Metadata creating a topic (auto.create.topics
# .enable) or an internal one (__consumer_offsets, __transaction_state), and FindCoordinator
# creating its coordinator's topic, await the metadata worker thread's file work, so other
# requests are served meanwhile. Real requests through Broker.dispatch on a real data
# directory; the worker is held busy (a job queued ahead) to see the loop go on without it.
from __future__ import annotations

import asyncio
import threading

from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse
from kafka.protocol.metadata import (ApiVersionsRequest, ApiVersionsResponse,
                                     FindCoordinatorRequest, FindCoordinatorResponse,
                                     MetadataRequest, MetadataResponse)

from tests.unit.test_dispatch import broker, call  # noqa: F401 (broker: a fixture)


def _metadata(names: list[str]):
    Req = MetadataRequest[12]
    return Req(topics=[Req.MetadataRequestTopic(topic_id=None, name=n) for n in names],
               allow_auto_topic_creation=True, include_topic_authorized_operations=False)


def _find_coordinator(key_type: int):
    return FindCoordinatorRequest[3](key="k", key_type=key_type)


async def _while_the_worker_is_held(broker, requests: list[tuple]) -> list:
    """Send `requests` ((request, response class)) while the metadata worker is held busy;
    check that the loop answers other requests meanwhile and that `requests` wait; then
    release the worker and return their responses."""
    gate = threading.Event()
    broker.logs._worker.submit(gate.wait, 5)  # the worker is busy until the gate opens
    try:
        waiting = [asyncio.ensure_future(call(broker, req, resp, corr=i))
                   for i, (req, resp) in enumerate(requests)]
        versions = await asyncio.wait_for(call(broker, ApiVersionsRequest[3](
            client_software_name="t", client_software_version="1"), ApiVersionsResponse), 4)
        assert versions.error_code == 0
        R = DescribeConfigsRequest[1].DescribeConfigsResource
        described = await asyncio.wait_for(call(broker, DescribeConfigsRequest[1](
            resources=[R(resource_type=2, resource_name=n, configuration_keys=None)
                       for n in ("auto-b", "__consumer_offsets", "__transaction_state")],
            include_synonyms=False), DescribeConfigsResponse), 4)
        # Answered while the creations wait: none of their topics exists yet.
        assert [r.error_code for r in described.results] == [3, 3, 3]
        assert not any(f.done() for f in waiting)
    finally:
        gate.set()
    return await asyncio.wait_for(asyncio.gather(*waiting), 10)


async def test_metadata_and_find_coordinator_auto_create_without_holding_the_loop(broker):
    first, second, found = await _while_the_worker_is_held(broker, [
        (_metadata(["auto-b"]), MetadataResponse), (_metadata(["auto-b"]), MetadataResponse),
        (_find_coordinator(0), FindCoordinatorResponse)])
    # Answered as before, at once with the partitions; both requests get the one topic.
    assert [(t.name, t.error_code, t.topic_id, len(t.partitions)) for t in first.topics] == \
        [(t.name, t.error_code, t.topic_id, len(t.partitions)) for t in second.topics] == \
        [("auto-b", 0, broker.logs.get("auto-b").topic_id, 1)]
    assert (found.error_code, found.node_id) == (0, 3)
    assert len(broker.logs.get("__consumer_offsets").partitions) == 50


async def test_internal_topics_auto_created_with_their_settings_without_holding_the_loop(
        broker):
    md, found = await _while_the_worker_is_held(broker, [
        (_metadata(["__consumer_offsets", "__transaction_state"]), MetadataResponse),
        (_find_coordinator(1), FindCoordinatorResponse)])
    assert {t.name: (t.error_code, len(t.partitions), t.is_internal) for t in md.topics} == \
        {"__consumer_offsets": (0, 50, True), "__transaction_state": (0, 50, True)}
    assert (found.error_code, found.node_id) == (0, 3)
    assert broker.logs.get("__consumer_offsets").configs["cleanup.policy"] == "compact"
    assert broker.logs.get("__transaction_state").configs["compression.type"] == \
        "uncompressed"
