# Consumer groups with unmodified kafka-python, confluent-kafka and aiokafka consumers, each
# in its own process, against a real broker over real sockets: three members split a
# six-partition topic (with the range or the roundrobin assignor, as DescribeGroups
# confirms); a member that closes hands its partitions over at once (LeaveGroup); a member
# killed with SIGKILL loses them when its session times out.
from __future__ import annotations

import uuid

import pytest

from kafka.admin import KafkaAdminClient

from .test_groups_helpers import Worker, wait_split

CASES = [("kafka-python", "range"), ("confluent", "roundrobin"), ("aiokafka", "roundrobin")]


@pytest.mark.parametrize("lib,strategy", CASES)
def test_three_members_split_then_close_and_kill(lib, strategy, kafka_broker, kafka_topic,
                                                 tmp_path):
    topic = kafka_topic(partitions=6)
    group = f"clients-{lib}-{uuid.uuid4().hex[:8]}"
    workers = [Worker(lib, kafka_broker, topic, group, tmp_path / f"{lib}-{i}.jsonl",
                      strategy=strategy) for i in range(3)]
    try:
        wait_split(workers, 6, 90, "three members to split six partitions")
        assert sorted(len(w.assignment()) for w in workers) == [2, 2, 2]
        admin = KafkaAdminClient(bootstrap_servers=kafka_broker, client_id="clients-test")
        try:
            d = admin.describe_groups([group])[group]
        finally:
            admin.close()
        assert (d["group_state"], d["protocol_data"], len(d["members"])) \
            == ("Stable", strategy, 3)

        closed = workers[0]
        closed.stop()
        assert not closed.alive
        wait_split(workers[1:], 6, 60, "the closed member's partitions to move")

        killed = workers[1]
        before = set(killed.assignment())
        killed.kill()
        wait_split(workers[2:], 6, 60, "the killed member's partitions to move")
        assert before <= set(workers[2].assignment())
    finally:
        for w in workers:
            w.stop()
