# Share sessions (KIP-932's share fetch sessions, Kafka's ShareSessionCache), sans I/O.
#
# One session per (group, member): ShareFetch with epoch 0 opens it (replacing any old one)
# with the partitions it names; later requests must carry the session's next epoch
# (SHARE_SESSION_NOT_FOUND without a session, INVALID_SHARE_SESSION_EPOCH on a mismatch),
# add the partitions they name and drop the forgotten ones; epoch -1 closes it. Epochs
# run 1, 2, ... and wrap to 1, as ShareRequestMetadata.nextEpoch.
from __future__ import annotations

from dataclasses import dataclass, field

from ..wire.errors import ErrorCode as E

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
Key = tuple[str, int]  # (topic name, partition)


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1
    partitions: dict[Key, None] = field(default_factory=dict)  # ordered set


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class ShareSessions:
    def __init__(self, max_sessions: int):
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def open(self, group_id: str, member_id: str) -> ShareSession | E:
        key = (group_id, member_id)
        if key not in self.sessions and len(self.sessions) >= self.max_sessions:
            return E.share_session_limit_reached
        s = self.sessions[key] = ShareSession(group_id, member_id)
        return s

    def check(self, group_id: str, member_id: str, epoch: int) -> ShareSession | E:
        """The session a non-initial request continues, its epoch moved on; or the error."""
        s = self.sessions.get((group_id, member_id))
        if s is None:
            return E.share_session_not_found
        if epoch == FINAL_EPOCH:
            return s
        if epoch != s.epoch:
            return E.invalid_share_session_epoch
        s.epoch = next_epoch(s.epoch)
        return s

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def forget_topic(self, topic: str) -> None:
        for s in self.sessions.values():
            for key in [k for k in s.partitions if k[0] == topic]:
                del s.partitions[key]
