# The iteration order of a java.util.HashMap, for answers Kafka builds by walking one:
# AlterClientQuotas' results, DescribeClientQuotas' entries, the SCRAM APIs' users. Clients
# see that order, so kafkalite reproduces it instead of using request or sorted order.
#
# A HashMap walks its buckets in index order, (h ^ h >>> 16) & (capacity - 1), and each
# bucket in insertion order (resizing splits buckets without reordering them; small maps
# never treeify). Capacity starts at 16, or at the power of two at or above the requested
# initial capacity, and doubles whenever the size passes 3/4 of it.
from __future__ import annotations

from typing import Callable, Iterable, TypeVar

T = TypeVar("T")
_M = 0xFFFFFFFF


def string_hash(s: str | None) -> int:
    """String.hashCode (over UTF-16 code units); Objects.hashCode(null) is 0."""
    if s is None:
        return 0
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & _M
    return h


def map_hash(entries: Iterable[tuple[str, str | None]]) -> int:
    """AbstractMap.hashCode of a Map<String, String>: the sum of key ^ value hashes."""
    return sum(string_hash(k) ^ string_hash(v) for k, v in entries) & _M


def _capacity(size: int, initial: int | None) -> int:
    cap = 16 if initial is None else max(1, 1 << max(initial - 1, 0).bit_length())
    while size > cap * 3 // 4:  # (int) (capacity * loadFactor), the resize threshold
        cap *= 2
    return cap


def hashmap_order(items: Iterable[T], key_hash: Callable[[T], int],
                  initial_capacity: int | None = None) -> list[T]:
    """`items` (distinct keys, in insertion order) as a HashMap would iterate them."""
    items = list(items)
    mask = _capacity(len(items), initial_capacity) - 1
    return sorted(items, key=lambda it: ((h := key_hash(it)) ^ (h >> 16)) & mask)
