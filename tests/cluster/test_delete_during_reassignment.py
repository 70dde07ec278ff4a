# Deleting a topic while one of its partitions is being reassigned (issue 17): as in Kafka
# 3.8's ZooKeeper mode (TopicDeletionManager marks the topic ineligible while it moves),
# the topic znode and its /admin/delete_topics mark stay (DeleteTopics still answers NONE,
# as Kafka's does); the reassignment stays listed and cannot be cancelled (the topic is
# queued for deletion: UNKNOWN_TOPIC_OR_PARTITION); once the new replica catches up the
# reassignment completes and the deletion resumes.
from __future__ import annotations

import signal

from kafka.protocol.admin import DeleteTopicsRequest

from kafkalite.cluster import zkdata
from kafkalite.wire.errors import ErrorCode
from tests.cluster.test_membership import WAIT_S, brokers, connect, zk  # noqa: F401
from tests.cluster.test_zk_admin_apis import controller_id
from tests.cluster.test_reassignment import TOPIC, alter, cluster_with_topic, listed
from tests.helpers.kbatch import call
from tests.helpers.kbatch import connect as open_socket
from tests.helpers.real_kafka import eventually


def delete(bootstrap: str, timeout_ms: int) -> list:
    with open_socket(bootstrap, timeout=30) as s:
        resp = call(s, DeleteTopicsRequest[3](topic_names=[TOPIC], timeout_ms=timeout_ms))
    return [(r.name, r.error_code) for r in resp.responses]


def scenario(ctl: str, z, moves: tuple[list[int], list[int]], stop, resume) -> dict:
    """Move TOPIC-0 from moves[0] to moves[1] while `stop` halts the one new replica (so the
    move cannot complete), delete the topic, try to cancel, then `resume`: what each step
    answered and the znodes."""
    seen: dict = {}
    stop()
    try:
        seen["alter"] = alter(ctl, {(TOPIC, 0): moves[1]})[2]
        seen["delete"] = delete(ctl, 2000)
        seen["marked"] = z.client.exists(zkdata.delete_topic_path(TOPIC)) is not None
        seen["topic znode"] = z.client.exists(zkdata.topic_path(TOPIC)) is not None
        seen["listed"] = listed(ctl)
        seen["cancel"] = [r[:3] for r in alter(ctl, {(TOPIC, 0): None})[2]]
    finally:
        resume()
    gone = eventually(lambda: (z.client.exists(zkdata.topic_path(TOPIC)),
                               z.client.exists(zkdata.delete_topic_path(TOPIC))),
                      lambda pair: pair == (None, None), timeout=WAIT_S * 2)
    seen["gone after"] = gone == (None, None)
    seen["listed after"] = listed(ctl)
    return seen


def expected(moves: tuple[list[int], list[int]]) -> dict:
    old, new = moves
    gone = [r for r in old if r not in new]
    return {
        "alter": [(TOPIC, 0, 0, None)],
        "delete": [(TOPIC, ErrorCode.none)],  # Kafka 3.8 answers at once: not waiting
        "marked": True, "topic znode": True,
        "listed": (0, [(TOPIC, 0, [*new, *gone], [r for r in new if r not in old], gone)]),
        "cancel": [(TOPIC, 0, ErrorCode.unknown_topic_or_partition)],
        "gone after": True, "listed after": (0, []),
    }


def test_a_topic_being_reassigned_is_deleted_once_the_move_completes(brokers, zk):
    procs, z, cid, _ = cluster_with_topic(brokers, zk, replicas=(1, 2))
    if cid == 3:  # broker 3 is the one stopped: the controller must keep answering
        procs[3].restart()
        cid = eventually(lambda: controller_id(z), lambda c: c in (1, 2), timeout=WAIT_S)
    moves = ([1, 2], [2, 3])
    seen = scenario(procs[cid].bootstrap, z, moves,
                    lambda: procs[3].proc.send_signal(signal.SIGSTOP),
                    lambda: procs[3].proc.send_signal(signal.SIGCONT))
    assert seen == expected(moves)
