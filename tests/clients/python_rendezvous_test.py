"""Tests of the Python cluster client that need no server: the rendezvous
vectors shared with //clients/cpp:rendezvous_test (so the two clients agree
on every owner), the hashing's properties, and ClusterClient's membership
(targets, address formatting, re-resolution and its rate limit, the down
mark) against a fake resolver and ports nobody listens on.

usage: python3 python_rendezvous_test.py VECTORS_FILE

Ends with "N passed, N failed" and writes JUnit XML to $XML_OUTPUT_FILE.
"""
import socket
import sys
import threading
import time
import unittest
from typing import List

import grpc

import furrballs_client as fb
from furrballs_client.cluster import _dns_host_port
from python_client_test import run_cases

VECTORS = ""


def endpoints(n: int) -> List[str]:
    return [f"10.0.0.{i}:50051" for i in range(n)]


def dead_ports(n: int) -> List[int]:
    """n loopback ports that were free a moment ago (bound, then closed)."""
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class VectorsTest(unittest.TestCase):
    def test_shared_vectors(self) -> None:
        import xxhash
        seed, ring, checked = 0, None, 0
        wrong: List[str] = []  # every mismatch, so that one run shows them all
        with open(VECTORS, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                line = line.rstrip("\n")
                if not line or line.startswith("#"):
                    continue
                fields = line.split(" ")
                if fields[0] == "seed":
                    seed = int(fields[1])
                elif fields[0] == "endpoints":
                    ring = fb.Rendezvous(fields[1:], seed)
                elif fields[0] == "endpoint_seed":
                    got = xxhash.xxh3_64_intdigest(fields[1].encode(), seed=seed)
                    if got != int(fields[2], 16):
                        wrong.append(f"line {n}: {line}: computed {got:016x}")
                    checked += 1
                elif fields[0] == "owner":
                    got = ring.owner_endpoint(fields[1])
                    if got != fields[2]:
                        wrong.append(f"line {n}: {line}: computed {got}")
                    checked += 1
                else:
                    self.fail(f"line {n}: unknown record {fields[0]}")
        if wrong:
            self.fail("vectors disagree:\n" + "\n".join(wrong))
        self.assertGreater(checked, 40)


class RendezvousTest(unittest.TestCase):
    def test_order_and_duplicates_do_not_matter(self) -> None:
        a = fb.Rendezvous(endpoints(5))
        b = fb.Rendezvous(list(reversed(endpoints(5))) + [endpoints(5)[2]])
        self.assertEqual(a.endpoints, b.endpoints)
        for i in range(1000):
            self.assertEqual(a.owner_endpoint(f"key-{i}"), b.owner_endpoint(f"key-{i}"))

    def test_owner_has_the_highest_score(self) -> None:
        r = fb.Rendezvous(endpoints(7))
        for i in range(300):
            o = r.owner(f"key-{i}")
            self.assertEqual(r.score(o, f"key-{i}"),
                             max(r.score(e, f"key-{i}") for e in range(len(r))))

    def test_ties_go_to_the_smaller_endpoint(self) -> None:
        r = fb.Rendezvous(["b:1", "a:1", "c:1"])
        r._seeds = [7, 7, 7]  # every endpoint scores every key alike
        self.assertEqual(r.owner_endpoint("k"), "a:1")

    def test_str_and_bytes_keys_agree(self) -> None:
        r = fb.Rendezvous(endpoints(4))
        self.assertEqual(r.owner("ключ"), r.owner("ключ".encode("utf-8")))

    def test_adding_an_endpoint_moves_a_quarter_all_to_it(self) -> None:
        three, four = fb.Rendezvous(endpoints(3)), fb.Rendezvous(endpoints(4))
        moved = 0
        for i in range(20000):
            before, after = three.owner_endpoint(f"key-{i}"), four.owner_endpoint(f"key-{i}")
            if before != after:
                moved += 1
                self.assertEqual(after, endpoints(4)[3])
        self.assertTrue(0.22 < moved / 20000 < 0.28, moved)

    def test_bad_seed(self) -> None:
        with self.assertRaises(ValueError):
            fb.Rendezvous(endpoints(2), seed=1 << 64)


class MembershipTest(unittest.TestCase):
    def test_targets(self) -> None:
        self.assertEqual(_dns_host_port("dns:///svc.ns:50051"), "svc.ns:50051")
        self.assertEqual(_dns_host_port("dns:svc.ns:50051"), "svc.ns:50051")
        self.assertEqual(_dns_host_port("svc.ns:50051"), "svc.ns:50051")
        with self.assertRaises(ValueError):
            _dns_host_port("dns://8.8.8.8/svc.ns:50051")

    def test_getaddrinfo_formats_like_the_cpp_client(self) -> None:
        self.assertEqual(fb.resolve_with_getaddrinfo("127.0.0.1:7000"), ["127.0.0.1:7000"])
        self.assertEqual(fb.resolve_with_getaddrinfo("[::1]:7000", socket.AF_INET6),
                         ["[::1]:7000"])
        self.assertEqual(fb.resolve_with_getaddrinfo("[0:0::0:1]:7000", socket.AF_INET6),
                         ["[::1]:7000"])
        with self.assertRaises(fb.InvalidArgumentError):
            fb.resolve_with_getaddrinfo("no-port")
        with self.assertRaises(fb.NotFoundError):
            fb.resolve_with_getaddrinfo("no-such-host.invalid:1")

    def test_empty_lists_are_rejected(self) -> None:
        with self.assertRaises(ValueError):
            fb.ClusterClient([])
        with fb.ClusterClient(endpoints(2)) as c:
            with self.assertRaises(ValueError):
                c.set_endpoints([])
            self.assertEqual(c.endpoints, tuple(endpoints(2)))
            with self.assertRaises(fb.FurrballsError):
                c.resolve()  # a list cluster has no name

    def test_owners_match_the_ring(self) -> None:
        with fb.ClusterClient(endpoints(3), hash_seed=42) as c:
            ring = fb.Rendezvous(endpoints(3), 42)
            for i in range(100):
                self.assertEqual(c.owner_of(f"k{i}"), ring.owner_endpoint(f"k{i}"))

    def test_failed_or_empty_resolution_keeps_members(self) -> None:
        answers = [["10.0.0.1:1", "10.0.0.2:1"]]

        def resolver(name: str, family: int) -> List[str]:
            a = answers[0]
            if isinstance(a, Exception):
                raise a
            return a

        with fb.ClusterClient("dns:///svc:1", resolver=resolver, resolve_interval=0) as c:
            self.assertEqual(c.endpoints, ("10.0.0.1:1", "10.0.0.2:1"))
            answers[0] = fb.UnavailableError(grpc.StatusCode.UNAVAILABLE, "hiccup")
            with self.assertRaises(fb.UnavailableError):
                c.resolve()
            answers[0] = []
            with self.assertRaises(fb.NotFoundError):
                c.resolve()
            self.assertEqual(c.endpoints, ("10.0.0.1:1", "10.0.0.2:1"))
            answers[0] = ["10.0.0.3:1"]
            self.assertEqual(c.resolve(), ["10.0.0.3:1"])

    def test_periodic_resolution(self) -> None:
        calls = []

        def resolver(name: str, family: int) -> List[str]:
            calls.append(time.monotonic())
            return [f"10.0.0.{len(calls)}:1"]

        with fb.ClusterClient("svc:1", resolver=resolver, resolve_interval=0.05,
                              min_resolve_interval=0.0) as c:
            deadline = time.monotonic() + 5
            while len(calls) < 4 and time.monotonic() < deadline:
                time.sleep(0.01)  # bounded poll for the background thread
            self.assertGreaterEqual(len(calls), 4)
            self.assertNotEqual(c.endpoints, ("10.0.0.1:1",))

    def test_unavailable_triggers_one_rate_limited_resolution(self) -> None:
        ports = dead_ports(2)
        members = [f"127.0.0.1:{p}" for p in ports]
        calls = []
        lock = threading.Lock()

        def resolver(name: str, family: int) -> List[str]:
            with lock:
                calls.append(time.monotonic())
            return members

        # No periodic resolution: only the first and those after UNAVAILABLE.
        with fb.ClusterClient("svc:1", resolver=resolver, resolve_interval=0,
                              min_resolve_interval=0.5, down_interval=0.0,
                              timeout=2.0) as c:
            self.assertEqual(len(calls), 1)
            for i in range(20):  # 20 UNAVAILABLEs within the rate window
                with self.assertRaises(fb.UnavailableError):
                    c.get(f"k{i}")
            time.sleep(0.3)
            self.assertEqual(len(calls), 2, "one resolution for the burst")
            time.sleep(1.0)
            # Failures during the pause that follows a resolution add up to
            # one more resolution after it, not one each.
            self.assertLessEqual(len(calls), 3)
            if len(calls) == 3:
                self.assertGreaterEqual(calls[2] - calls[1], 0.5)

    def test_down_mark_fails_fast_and_only_the_dead_member(self) -> None:
        port, = dead_ports(1)
        dead = f"127.0.0.1:{port}"
        with fb.ClusterClient([dead, "127.0.0.1:1"], down_interval=5.0, timeout=2.0) as c:
            key = next(f"k{i}" for i in range(100) if c.owner_of(f"k{i}") == dead)
            with self.assertRaises(fb.UnavailableError):
                c.get(key)
            t = time.monotonic()
            with self.assertRaises(fb.UnavailableError) as cm:
                c.get(key)
            self.assertLess(time.monotonic() - t, 0.05)
            self.assertIn("marked down", cm.exception.message)
            other = next(f"k{i}" for i in range(100) if c.owner_of(f"k{i}") != dead)
            results = c.multi_get([key, other])
            self.assertIn("marked down", results[0].message)
            self.assertNotIn("marked down", results[1].message)


def main() -> int:
    global VECTORS
    VECTORS = sys.argv[1]
    return run_cases("python_rendezvous_test", VectorsTest, RendezvousTest, MembershipTest)


if __name__ == "__main__":
    sys.exit(main())
