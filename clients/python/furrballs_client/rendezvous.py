"""Rendezvous (highest-random-weight) hashing of keys onto endpoints, bit for
bit the scheme of the C++ client (clients/cpp/rendezvous.h).

Thread safety: a Rendezvous is immutable after construction and may be shared
by threads.

Every (endpoint, key) pair gets a pseudo-random score and a key belongs to the
endpoint with the highest score, so changing the member set moves only the
keys that must move: removing an endpoint moves exactly its keys, adding the
n-th takes about 1/n of them, a server restarted at the same address keeps
all of its own. The score is XXH3-64 of the key bytes seeded with the
endpoint's seed, which is XXH3-64 of the endpoint string (UTF-8) under the
cluster seed. Ties (probability 2^-64 per pair) go to the smaller endpoint
string. C++ and Python clients with the same seed and endpoint strings agree
on every owner; tests/clients/rendezvous_vectors.txt pins this for both.

XXH3 comes from Debian's python3-xxhash (xxHash 0.8.1, as libxxhash-dev).
"""
from __future__ import annotations

from typing import Iterable, List, Tuple, Union

import xxhash

_U64 = (1 << 64) - 1


def _bytes(x: Union[str, bytes]) -> bytes:
    return x.encode("utf-8") if isinstance(x, str) else bytes(x)


class Rendezvous:
    """The owners of keys among a fixed set of endpoints.

    ``endpoints`` may come in any order and with duplicates; they are kept
    sorted (as byte strings, like the C++ std::string order) and deduplicated,
    and owner() returns an index into ``endpoints``. ``seed`` is an unsigned
    64-bit integer.
    """

    def __init__(self, endpoints: Iterable[str], seed: int = 0) -> None:
        if not 0 <= seed <= _U64:
            raise ValueError(f"seed {seed} is not an unsigned 64-bit integer")
        # Sorting the UTF-8 bytes matches std::string's (unsigned char) order
        # even for non-ASCII names.
        unique = sorted({_bytes(e) for e in endpoints})
        self.endpoints: Tuple[str, ...] = tuple(e.decode("utf-8") for e in unique)
        self._seeds: List[int] = [xxhash.xxh3_64_intdigest(e, seed=seed) for e in unique]
        self.seed = seed

    def __len__(self) -> int:
        return len(self.endpoints)

    def score(self, index: int, key: Union[str, bytes]) -> int:
        """The score of ``key`` on endpoints[index]; exposed for tests."""
        return xxhash.xxh3_64_intdigest(_bytes(key), seed=self._seeds[index])

    def owner(self, key: Union[str, bytes]) -> int:
        """Index into ``endpoints`` of the key's owner. REQUIRES: len(self) > 0."""
        k = _bytes(key)
        best, best_score = 0, -1
        for i, s in enumerate(self._seeds):
            score = xxhash.xxh3_64_intdigest(k, seed=s)
            # Strictly greater: on a tie the earlier (smaller) endpoint keeps it.
            if score > best_score:
                best, best_score = i, score
        return best

    def owner_endpoint(self, key: Union[str, bytes]) -> str:
        """The endpoint string of the key's owner."""
        return self.endpoints[self.owner(key)]
