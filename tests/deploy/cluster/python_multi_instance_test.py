"""The Python ClusterClient against a Furrballs cluster the way Kubernetes
runs it, on loopback: three real furrballs_server processes behind a stand-in
for the headless Service's DNS name (a resolver that returns the pods it
lists), the same scenario as multi_instance_test.cc for the C++ client:

  1. all three up: keys are sharded (each server holds exactly the keys
     rendezvous hashing gives it) and every key hits;
  2. one pod stops (SIGTERM): exactly its keys raise UnavailableError, by
     get and in multi_get, every other key still hits;
  3. DNS drops it: the client re-resolves because of the UNAVAILABLE answers
     (no periodic resolution in this test); its keys move to the survivors
     and miss there, nothing else moves;
  4. it restarts at the same address and DNS lists it again: the keys that
     move are its own third; they miss (cold), all others hit;
  5. it comes back at a new address instead: the shares that change owner.

Shares are printed as "[python-multi-instance] ..." lines. The bounds are the
statistics of rendezvous hashing over KEYS keys (one standard deviation of a
1/3 share is 0.009), not timings.

usage: python3 python_multi_instance_test.py SERVER_BINARY
(run by python_test.sh, which puts tests/clients on the import path for
ServerProcess and run_cases.)
"""
import collections
import os
import sys
import time
import unittest
from typing import Dict, List

import furrballs_client as fb
from python_client_test import ServerProcess, run_cases

KEYS = 3000
SERVER_BINARY = ""


def key(i: int) -> str:
    return f"multi-instance-key-{i}"


def value(i: int) -> bytes:
    return f"value-{i}".encode()


def changed(a: List[str], b: List[str]) -> int:
    return sum(x != y for x, y in zip(a, b))


def say(line: str) -> None:
    print(f"[python-multi-instance] {line}", flush=True)


class Tally:
    """How reads of every key turned out, by owner."""

    def __init__(self) -> None:
        self.hits = 0
        self.misses: Dict[str, int] = collections.Counter()
        self.unavailable: Dict[str, int] = collections.Counter()
        self.other_errors: List[str] = []


class MultiInstanceTest(unittest.TestCase):
    def setUp(self) -> None:
        self.servers: List[ServerProcess] = []
        self.listed: List[str] = []  # what the stand-in DNS name resolves to
        self.resolutions = 0

    def tearDown(self) -> None:
        for s in self.servers:
            s.stop()

    def resolver(self, name: str, family: int) -> List[str]:
        self.assertEqual(name, "furrballs.cache.svc.cluster.local:50051")
        self.resolutions += 1
        return list(self.listed)

    def owners(self, cluster: fb.ClusterClient) -> List[str]:
        return [cluster.owner_of(key(i)) for i in range(KEYS)]

    def read_all(self, cluster: fb.ClusterClient) -> Tally:
        """Every key by get(), and again by multi_get(), which must agree."""
        t = Tally()
        batch = cluster.multi_get([key(i) for i in range(KEYS)])
        for i in range(KEYS):
            owner = cluster.owner_of(key(i))
            try:
                e = cluster.get(key(i))
            except fb.UnavailableError:
                t.unavailable[owner] += 1
                self.assertIsInstance(batch[i], fb.UnavailableError, key(i))
                continue
            except fb.FurrballsError as err:
                t.other_errors.append(f"{key(i)}: {err}")
                continue
            if e is not None and e.value == value(i):
                t.hits += 1
                self.assertEqual(batch[i], e, key(i))
            else:
                t.misses[owner] += 1
                self.assertIsNone(batch[i], key(i))
        return t

    def test_one_pod_stops_restarts_and_moves(self) -> None:
        for _ in range(3):
            self.servers.append(ServerProcess(SERVER_BINARY))
        every = [s.target for s in self.servers]
        self.listed = list(every)
        # down_interval=0: every read after the stop goes to the network, so
        # the count of UNAVAILABLE answers is exactly the stopped member's
        # keys. resolve_interval=0: membership changes only after
        # UNAVAILABLE or on resolve(), so each step sees the set it expects.
        cluster = fb.ClusterClient(
            "dns:///furrballs.cache.svc.cluster.local:50051", resolver=self.resolver,
            timeout=5.0, down_interval=0.0, resolve_interval=0.0,
            min_resolve_interval=0.2)
        self.addCleanup(cluster.close)
        cluster.wait_for_ready(20.0)
        self.assertEqual(cluster.endpoints, tuple(sorted(every)))

        # 1. Written in batches split by owner; each server holds exactly its
        #    share, and everything hits.
        for start in range(0, KEYS, 500):
            versions = cluster.multi_set(
                [fb.SetItem(key(i), value(i)) for i in range(start, min(KEYS, start + 500))])
            self.assertTrue(all(isinstance(v, int) for v in versions), versions[:3])
        owners3 = self.owners(cluster)
        owned = collections.Counter(owners3)
        self.assertEqual(len(owned), 3)
        for target in every:
            with fb.Client(target, timeout=5.0) as direct:
                held = direct.multi_get([key(i) for i in range(KEYS)])
            self.assertEqual([i for i in range(KEYS) if held[i] is not None],
                             [i for i in range(KEYS) if owners3[i] == target], target)
        up = self.read_all(cluster)
        self.assertEqual(up.hits, KEYS)
        # touch, delete and set reach the owner too (one key per server).
        for target in every:
            i = owners3.index(target)
            cluster.touch(key(i), 60_000)
            self.assertGreater(cluster.get(key(i)).ttl_remaining_ms, 0)
            self.assertTrue(cluster.delete(key(i)))
            self.assertIsNone(cluster.get(key(i)))
            cluster.set(key(i), value(i))
        say(f"3 servers, {KEYS} keys: " + ", ".join(f"{t} owns {owned[t]}" for t in every)
            + " (each server holds exactly those)")

        # 2. One pod stops: only its keys fail, the others hit.
        stopped = self.servers[2]
        gone = stopped.target
        stopped.stop()
        down = self.read_all(cluster)
        self.assertEqual(dict(down.unavailable), {gone: owned[gone]})
        self.assertEqual(down.hits, KEYS - owned[gone])
        self.assertEqual(sum(down.misses.values()), 0)
        self.assertEqual(down.other_errors, [])
        dead_key = key(owners3.index(gone))
        for call in (lambda: cluster.set(dead_key, b"x"), lambda: cluster.delete(dead_key),
                     lambda: cluster.touch(dead_key, 0)):
            with self.assertRaises(fb.UnavailableError):
                call()
        say(f"{gone} stopped: {owned[gone]} keys UnavailableError (its own, "
            f"{owned[gone] / KEYS:.3f}), {down.hits} hit, 0 other errors")

        # 3. DNS no longer lists it. The next UNAVAILABLE makes the client
        #    look again (rate limited); its keys re-home and miss, no other
        #    key moves.
        self.listed = every[:2]
        before = self.resolutions
        deadline = time.monotonic() + 10
        while len(cluster.endpoints) == 3 and time.monotonic() < deadline:
            victim = next(i for i in range(KEYS) if owners3[i] == gone)
            with self.assertRaises(fb.UnavailableError):
                cluster.get(key(victim))
            time.sleep(0.05)  # bounded poll for the background resolution
        self.assertEqual(cluster.endpoints, tuple(sorted(every[:2])))
        owners2 = self.owners(cluster)
        self.assertEqual(changed(owners3, owners2), owned[gone])
        shrunk = self.read_all(cluster)
        self.assertEqual(sum(shrunk.misses.values()), owned[gone])
        self.assertEqual(shrunk.hits, KEYS - owned[gone])
        self.assertEqual((sum(shrunk.unavailable.values()), shrunk.other_errors), (0, []))
        say(f"DNS dropped it, re-resolved after UNAVAILABLE ({self.resolutions - before} "
            f"lookups): {changed(owners3, owners2)} keys changed owner "
            f"({changed(owners3, owners2) / KEYS:.3f}), {sum(shrunk.misses.values())} miss, "
            f"{shrunk.hits} hit")

        # 4. It restarts at the same address and DNS lists it again: the keys
        #    that move are exactly its old third, cold; the others hit.
        self.servers[2] = ServerProcess(SERVER_BINARY, port=stopped.port)
        self.listed = list(every)
        cluster.resolve()
        cluster.wait_for_ready(20.0)
        owners3again = self.owners(cluster)
        moved_back = changed(owners2, owners3again)
        self.assertEqual(changed(owners3, owners3again), 0)
        self.assertEqual(moved_back, owned[gone])
        self.assertAlmostEqual(moved_back / KEYS, 1 / 3, delta=0.05)
        back = self.read_all(cluster)
        self.assertEqual(dict(back.misses), {gone: owned[gone]})
        self.assertEqual(back.hits, KEYS - owned[gone])
        say(f"restarted at the same address, member set 2 -> 3: {moved_back} keys moved "
            f"({moved_back / KEYS:.3f}; ideal 1/3), all back to it; "
            f"{sum(back.misses.values())} miss (cold), {back.hits} hit")

        # 5. The same pod at a new address (a new pod IP): a different third
        #    becomes its, so half the keys differ from the original owners.
        self.servers[2].stop()
        self.servers[2] = ServerProcess(SERVER_BINARY)
        self.listed = every[:2] + [self.servers[2].target]
        cluster.resolve()
        owners_new = self.owners(cluster)
        from_two, from_three = changed(owners2, owners_new), changed(owners3, owners_new)
        self.assertAlmostEqual(from_two / KEYS, 1 / 3, delta=0.05)
        self.assertAlmostEqual(from_three / KEYS, 1 / 2, delta=0.05)
        say(f"back at a new address {self.servers[2].target}: {from_two} keys "
            f"({from_two / KEYS:.3f}; ideal 1/3) moved from the 2-member set, {from_three} "
            f"({from_three / KEYS:.3f}; ideal 1/2) differ from the original owners")


def main() -> int:
    global SERVER_BINARY
    SERVER_BINARY = os.path.abspath(sys.argv[1])
    return run_cases("python_multi_instance_test", MultiInstanceTest)


if __name__ == "__main__":
    sys.exit(main())
