# The cleaner's dedupe map: key -> offset of its latest record in the dirty section, as
# Kafka's SkimpyOffsetMap. Keys are stored as their MD5 digest (16 bytes), so an entry's
# size does not depend on the key's, and the number of entries is bounded by
# log.cleaner.dedupe.buffer.size the way Kafka bounds it: 24 bytes per slot (digest and
# offset) and a load factor of 0.9, split between the cleaner threads. Python's dict costs
# more per entry than Kafka's open-addressing array (about 5x), so the real memory is a
# small multiple of the setting, but the point where the map is full, and so how far one
# cleaning reaches, is Kafka's.
from __future__ import annotations

import hashlib

BYTES_PER_ENTRY = 16 + 8
LOAD_FACTOR = 0.9


def slots_for(buffer_bytes: int, threads: int = 1) -> int:
    """How many keys a map built from `buffer_bytes` (shared by `threads`) holds."""
    return max(1, int(buffer_bytes // max(threads, 1) * LOAD_FACTOR) // BYTES_PER_ENTRY)


class OffsetMap:
    def __init__(self, slots: int):
        self.slots = slots
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1  # the largest offset put, as Kafka's map.latestOffset

    def __len__(self) -> int:
        return len(self._map)

    def free(self) -> int:
        return self.slots - len(self._map)

    def put(self, key: bytes, offset: int) -> None:
        self._map[hashlib.md5(key).digest()] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset of `key`, -1 when the dirty section does not hold it."""
        return self._map.get(hashlib.md5(key).digest(), -1)

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1
