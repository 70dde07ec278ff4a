# Kafka 3.8 in ZooKeeper mode, the scenario of test_delete_during_reassignment: DeleteTopics
# on a topic whose partition is being reassigned (the new replica stopped) answers NONE, the
# topic and its deletion mark stay, the cancel is refused, and the topic goes once the move
# completes. Kafka's 3-broker cluster is test_reassignment_vs_kafka's (controller 3).
from __future__ import annotations

import signal

from tests.cluster.test_delete_during_reassignment import expected, scenario
from tests.cluster.test_membership import WAIT_S
from tests.cluster.test_reassignment import TOPIC, create_on, settled
from tests.cluster.test_reassignment_vs_kafka import kafka_cluster  # noqa: F401
from tests.cluster.test_zk_admin_apis import controller_id
from tests.helpers.real_kafka import eventually


def test_delete_during_reassignment_as_kafka(kafka_cluster):
    procs, z = kafka_cluster
    cid = eventually(lambda: controller_id(z), lambda c: c in procs, timeout=WAIT_S)
    assert cid == 3
    moves = ([2, 3], [3, 1])  # broker 1, the new replica, is stopped; 3 answers
    assert eventually(lambda: create_on(procs[cid].bootstrap, moves[0]),
                      lambda r: r.error_code == 0, timeout=WAIT_S).error_code == 0
    settled(z, moves[0])
    seen = scenario(procs[cid].bootstrap, z, moves,
                    lambda: procs[1].proc.send_signal(signal.SIGSTOP),
                    lambda: procs[1].proc.send_signal(signal.SIGCONT))
    assert seen == expected(moves)
