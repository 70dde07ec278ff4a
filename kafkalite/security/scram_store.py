# SCRAM credentials (RFC 5802, RFC 7677) as Kafka's ScramControlManager keeps them: per user
# and mechanism (1 SCRAM-SHA-256, 2 SCRAM-SHA-512) the salt, the iteration count, StoredKey =
# H(HMAC(SaltedPassword, "Client Key")) and ServerKey = HMAC(SaltedPassword, "Server Key").
# Neither the password nor the salted password is kept: the client sends the salted password
# (AlterUserScramCredentials) and only the two derived keys are stored, which is all a SASL
# SCRAM exchange needs to verify a client and prove the server. Persisted atomically under
# the data directory's .kafkalite/ and loaded at start; in a ZooKeeper cluster they live in
# /config/users instead (cluster/entity_configs.py writes and follows them). No network I/O.
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from typing import Any, Iterable

from ..fileio import atomic_write
from ..javahash import hashmap_order, string_hash
from ..wire.errors import ErrorCode

MECHANISMS = {1: ("SCRAM-SHA-256", "sha256"), 2: ("SCRAM-SHA-512", "sha512")}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # ScramMechanism's bounds, for both hashes
DUPLICATE = "A user credential cannot be altered twice in the same request"


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def salted_password(mechanism: int, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i) of RFC 5802: what a client sends as salted_password."""
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism][1], password.encode(), salt, iterations)


def make_credential(mechanism: int, salt: bytes, salted: bytes,
                    iterations: int) -> ScramCredential:
    digest = MECHANISMS[mechanism][1]
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    return ScramCredential(salt, hashlib.new(digest, client_key).digest(),
                           hmac.new(salted, b"Server Key", digest).digest(), iterations)


def _name_error(user: str, mechanism: int) -> tuple[int, str] | None:
    if not user:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in MECHANISMS:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


class ScramStore:
    def __init__(self, state_dir: str | None):
        self.path = os.path.join(state_dir, "scram-credentials.json") if state_dir else None
        self.creds: dict[str, dict[int, ScramCredential]] = {}  # user -> mechanism -> cred

    def load(self) -> None:
        if self.path is None or not os.path.exists(self.path):
            return
        with open(self.path, "rb") as f:
            data = json.loads(f.read())
        for user, mechs in data.items():
            self.creds[user] = {int(m): ScramCredential(
                base64.b64decode(c["salt"]), base64.b64decode(c["stored_key"]),
                base64.b64decode(c["server_key"]), c["iterations"]) for m, c in mechs.items()}

    def _save(self) -> None:
        if self.path is None:
            return
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        data = {user: {str(m): {"salt": b64(c.salt), "stored_key": b64(c.stored_key),
                                "server_key": b64(c.server_key), "iterations": c.iterations}
                       for m, c in mechs.items()} for user, mechs in self.creds.items()}
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        atomic_write(self.path, json.dumps(data, indent=1).encode())

    def get(self, user: str, mechanism: int) -> ScramCredential | None:
        """For SASL SCRAM: the stored credential, or None."""
        return self.creds.get(user, {}).get(mechanism)

    def alter(self, deletions: Iterable[tuple[str, int]],
              upsertions: Iterable[tuple[str, int, int, bytes, bytes]]
              ) -> list[tuple[str, int, str | None]]:
        """(user, error code, message) per user: successful deletions, then successful
        upsertions, then errors, each group as Kafka's HashMap walks it. A user named twice
        in one request is DUPLICATE_RESOURCE and none of its changes apply."""
        results, changes = self.plan(deletions, upsertions)
        self.apply(changes)
        return results

    def plan(self, deletions: Iterable[tuple[str, int]],
             upsertions: Iterable[tuple[str, int, int, bytes, bytes]]
             ) -> tuple[list[tuple[str, int, str | None]], dict[str, dict[int, Any]]]:
        """alter's answer and the changes it makes ({user: {mechanism: credential, or None
        to delete}}) without making them: in a cluster they go to ZooKeeper first."""
        deletions, upsertions = list(deletions), list(upsertions)
        dels: dict[str, int] = {}
        ups: dict[str, tuple[int, int, bytes, bytes]] = {}
        errors: dict[str, tuple[int, str | None]] = {}
        for user, mech in deletions:
            if user in errors:
                continue
            if dels.pop(user, None) is not None:
                errors[user] = (ErrorCode.duplicate_resource, DUPLICATE)
                continue
            err = _name_error(user, mech) or (
                None if self.get(user, mech) else
                (ErrorCode.resource_not_found,
                 "Attempt to delete a user credential that does not exist"))
            if err:
                errors[user] = err
            else:
                dels[user] = mech
        for user, mech, iterations, salt, salted in upsertions:
            if user in errors:
                continue
            if dels.pop(user, None) is not None or ups.pop(user, None) is not None:
                errors[user] = (ErrorCode.duplicate_resource, DUPLICATE)
                continue
            err = _name_error(user, mech)
            if err is None and iterations < MIN_ITERATIONS:
                err = (ErrorCode.unacceptable_credential, "Too few iterations")
            elif err is None and iterations > MAX_ITERATIONS:
                err = (ErrorCode.unacceptable_credential, "Too many iterations")
            if err:
                errors[user] = err
            else:
                ups[user] = (mech, iterations, salt, salted)
        if any(not salted for _, _, _, salted in ups.values()):
            # Kafka's HMAC refuses an empty key: the whole request fails, every user named
            # in it answered UNKNOWN_SERVER_ERROR, sorted (getErrorResponse).
            users = sorted({u for u, _ in deletions} | {u[0] for u in upsertions})
            return [(u, ErrorCode.unknown_server_error, None) for u in users], {}
        changes: dict[str, dict[int, Any]] = {u: {m: None} for u, m in dels.items()}
        for user, (mech, iterations, salt, salted) in ups.items():
            changes[user] = {mech: make_credential(mech, salt, salted, iterations)}
        ok = [(u, ErrorCode.none, None) for u in hashmap_order(dels, string_hash)]
        ok += [(u, ErrorCode.none, None) for u in hashmap_order(ups, string_hash)]
        return ok + [(u, *errors[u]) for u in hashmap_order(errors, string_hash)], changes

    def apply(self, changes: dict[str, dict[int, Any]]) -> None:
        """Set or (None) delete credentials: {user: {mechanism: credential or None}}."""
        for user, mechs in changes.items():
            for mech, cred in mechs.items():
                if cred is None:
                    self.creds.get(user, {}).pop(mech, None)
                else:
                    self.creds.setdefault(user, {})[mech] = cred
            if user in self.creds and not self.creds[user]:
                del self.creds[user]
        if changes:
            self._save()

    def follow_zookeeper(self, keep: Iterable[str]) -> None:
        """In a ZooKeeper cluster the credentials live in ZooKeeper (/config/users), which
        the broker then follows: nothing is kept in the local file any more, and only the
        users of the static configuration (kafkalite.sasl.scram.users) stay until
        ZooKeeper says otherwise."""
        self.path = None
        keep = set(keep)
        self.creds = {u: m for u, m in self.creds.items() if u in keep}

    def describe(self, users: list[str] | None
                 ) -> list[tuple[str, int, str, list[tuple[int, int]]]]:
        """(user, error code, message, [(mechanism, iterations)]) as ScramImage.describe:
        no users (null or empty) means all of them."""
        repeated: dict[str, bool] = {}
        for user in (users or list(self.creds)):
            repeated[user] = user in repeated
        out = []
        for user in hashmap_order(repeated, string_hash):
            if repeated[user]:
                out.append((user, ErrorCode.duplicate_resource, "Cannot describe SCRAM "
                            f"credentials for the same user twice in a single request: {user}",
                            []))
            elif user in self.creds:
                infos = [(m, c.iterations) for m, c in sorted(self.creds[user].items())]
                out.append((user, ErrorCode.none, "", infos))
            else:
                out.append((user, ErrorCode.resource_not_found, "Attempt to describe a user "
                            f"credential that does not exist: {user}", []))
        return out
