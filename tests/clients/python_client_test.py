"""End-to-end test of the Python client (clients/python/furrballs_client)
against the real furrballs_server binary on a free loopback port.

usage: python3 python_client_test.py SERVER_BINARY

Runs with Debian's python3 (python3-grpcio, python3-protobuf). Writes JUnit XML
to $XML_OUTPUT_FILE when Bazel sets it, so each case is counted, and ends
with the line "N passed, N failed".
"""
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.request
from typing import List, Optional, Sequence
from xml.sax.saxutils import quoteattr

import grpc

import furrballs_client as fb
from furrballs_client.errors import error_for, is_over_response_limit

SERVER_BINARY: Optional[str] = None


class ServerProcess:
    """The server binary on 127.0.0.1:`port` (0: a free port) with extra
    `flags`; `port` is read from its stdout. Also used by tests/deploy/
    cluster's Python test, which restarts a server at the port it had, and by
    tests/security's."""

    def __init__(self, binary: str, port: int = 0, flags: Sequence[str] = ()) -> None:
        self.proc = subprocess.Popen(
            [binary, f"--listen_address=127.0.0.1:{port}", "--simulate_nodes=4",
             "--memory_mb=64", "--shutdown_deadline_ms=2000", *flags],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            # Metrics off (see tests/clients/lib.sh): the fixed default port
            # would collide between servers running side by side.
            env={**os.environ, "FURRBALLS_METRICS_ADDRESS": ""})
        self.port = 0
        lines: List[str] = []
        deadline = time.monotonic() + 60
        # Bounded: stops at the serving line, at EOF (the server died), or
        # after 60 s.
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"serving furrballs\.v1\.Cache on 127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if not self.port:
            self.stop()
            raise RuntimeError("server did not start:\n" + "".join(lines))

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()


class ClientTest(unittest.TestCase):
    """Every method against a real server, with the Client's defaults
    (batching on; a call alone in flight goes unary). The subclasses below
    run the same cases with every call unary and with every call batched."""

    server: ServerProcess
    client_options: dict = {}

    @classmethod
    def setUpClass(cls) -> None:
        cls.server = ServerProcess(SERVER_BINARY)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.stop()

    def setUp(self) -> None:
        self.client = fb.Client(self.server.target, timeout=10.0, **self.client_options)

    def tearDown(self) -> None:
        self.client.close()

    def test_set_then_get(self) -> None:
        version = self.client.set(b"py-k", b"v\x00w", ttl_ms=60000)
        self.assertGreater(version, 0)
        e = self.client.get(b"py-k")
        self.assertIsInstance(e, fb.Entry)
        self.assertEqual(e.value, b"v\x00w")
        self.assertEqual(e.version, version)
        self.assertGreater(e.ttl_remaining_ms, 0)
        self.assertLessEqual(e.ttl_remaining_ms, 60000)

    def test_str_keys_and_values_are_utf8(self) -> None:
        self.client.set("py-ключ", "значение")
        self.assertEqual(self.client.get("py-ключ".encode()).value, "значение".encode())

    def test_miss_returns_none(self) -> None:
        self.assertIsNone(self.client.get("py-never-written"))

    def test_conditional_sets(self) -> None:
        v1 = self.client.set("py-cas", "a", if_absent=True)
        with self.assertRaises(fb.AlreadyExistsError) as cm:
            self.client.set("py-cas", "b", if_absent=True)
        self.assertEqual(cm.exception.code, grpc.StatusCode.ALREADY_EXISTS)
        v2 = self.client.set("py-cas", "c", if_version=v1)
        self.assertNotEqual(v1, v2)
        with self.assertRaises(fb.AbortedError) as cm:
            self.client.set("py-cas", "d", if_version=v1)
        self.assertEqual(cm.exception.code, grpc.StatusCode.ABORTED)
        with self.assertRaises(fb.NotFoundError):
            self.client.set("py-cas-missing", "d", if_version=1)
        with self.assertRaises(ValueError):
            self.client.set("py-cas", "e", if_absent=True, if_version=v2)
        self.assertEqual(self.client.get("py-cas").value, b"c")

    def test_delete(self) -> None:
        self.client.set("py-del", "x")
        self.assertTrue(self.client.delete("py-del"))
        self.assertFalse(self.client.delete("py-del"))
        self.assertIsNone(self.client.get("py-del"))

    def test_touch(self) -> None:
        self.client.set("py-touch", "x")
        self.client.touch("py-touch", 30000)
        ttl = self.client.get("py-touch").ttl_remaining_ms
        self.assertGreater(ttl, 0)
        self.assertLessEqual(ttl, 30000)
        with self.assertRaises(fb.NotFoundError) as cm:
            self.client.touch("py-touch-missing", 10)
        self.assertEqual(cm.exception.code, grpc.StatusCode.NOT_FOUND)

    def test_multi_get_keeps_request_order_and_fails_only_the_bad_key(self) -> None:
        keys = [f"py-mg-{i}" for i in range(30)]
        for i, k in enumerate(keys):
            if i % 3:
                self.client.set(k, f"v{i}")
        keys[7] = ""
        got = self.client.multi_get(keys)
        self.assertEqual(len(got), len(keys))
        for i, e in enumerate(got):
            if i == 7:
                self.assertIsInstance(e, fb.InvalidArgumentError)
                self.assertIn("item 7", e.message)
            elif i % 3:
                self.assertEqual(e.value, f"v{i}".encode())
            else:
                self.assertIsNone(e)
        self.assertEqual(self.client.multi_get([]), [])

    def test_multi_set_reports_each_item(self) -> None:
        self.client.set("py-ms-taken", "x")
        results = self.client.multi_set([
            fb.SetItem("py-ms-a", "1"),
            fb.SetItem("py-ms-taken", "2", if_absent=True),
            fb.SetItem("py-ms-b", "3", ttl_ms=40000),
            fb.SetItem("", "4"),
        ])
        self.assertEqual(len(results), 4)
        self.assertIsInstance(results[0], int)
        self.assertIsInstance(results[1], fb.AlreadyExistsError)
        self.assertEqual(results[1].code, grpc.StatusCode.ALREADY_EXISTS)
        self.assertIsInstance(results[2], int)
        self.assertIsInstance(results[3], fb.InvalidArgumentError)
        b = self.client.get("py-ms-b")
        self.assertEqual((b.value, b.version), (b"3", results[2]))

    def test_stats(self) -> None:
        for i in range(20):
            self.client.set(f"py-st-{i}", "v")
        stats = self.client.stats()
        self.assertEqual([s.node for s in stats], [0, 1, 2, 3])
        self.assertGreaterEqual(sum(s.sets for s in stats), 20)
        self.assertTrue(all(s.memory_limit_bytes > 0 for s in stats))

    def test_invalid_argument_carries_code_and_message(self) -> None:
        with self.assertRaises(fb.InvalidArgumentError) as cm:
            self.client.get("")
        self.assertEqual(cm.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertTrue(cm.exception.message)
        self.assertIsInstance(cm.exception, fb.FurrballsError)
        with self.assertRaises(fb.InvalidArgumentError):
            self.client.set("k" * 251, "v")

    def test_zero_timeout_expires_at_once(self) -> None:
        for call in (lambda: self.client.get("py-k", timeout=0),
                     lambda: self.client.set("py-k", "v", timeout=0),
                     lambda: self.client.multi_get(["py-k"], timeout=-1)):
            with self.assertRaises(fb.DeadlineExceededError) as cm:
                call()
            self.assertEqual(cm.exception.code, grpc.StatusCode.DEADLINE_EXCEEDED)

    def test_deadline_of_a_server_that_never_answers(self) -> None:
        # A listener that never accepts: the kernel completes the TCP
        # handshake into its backlog, then nothing answers, as with a hung
        # server. The call must end at its deadline.
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen(16)
            port = silent.getsockname()[1]
            with fb.Client(f"127.0.0.1:{port}", timeout=0.3, **self.client_options) as hung:
                with self.assertRaises(fb.DeadlineExceededError) as cm:
                    hung.get("k")
        self.assertEqual(cm.exception.code, grpc.StatusCode.DEADLINE_EXCEEDED)

    def test_unreachable_server_is_unavailable(self) -> None:
        with fb.Client("127.0.0.1:1", timeout=10.0, **self.client_options) as dead:
            with self.assertRaises(fb.UnavailableError) as cm:
                dead.get("k")
        self.assertEqual(cm.exception.code, grpc.StatusCode.UNAVAILABLE)


class UnaryClientTest(ClientTest):
    client_options = {"batch_streams": 0}


class BatchedClientTest(ClientTest):
    """Every get/set/delete/touch as an operation of a Batch message, on
    two streams: results, per-operation errors and deadlines as unary."""

    client_options = {"batch_streams": 2, "batch_lone_calls": True}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_threads(count: int, work) -> None:
    """Runs work(t) for t in range(count), each on its own thread, and
    waits for all of them."""
    workers = [threading.Thread(target=work, args=(t,)) for t in range(count)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


class BatchingTest(unittest.TestCase):
    """What reaches the server, read from its request counters
    (furrballs_requests_total on its metrics port)."""

    server: ServerProcess
    metrics_port: int

    @classmethod
    def setUpClass(cls) -> None:
        cls.metrics_port = free_port()
        cls.server = ServerProcess(
            SERVER_BINARY, flags=[f"--metrics_address=127.0.0.1:{cls.metrics_port}"])

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.stop()

    def requests(self, op: str) -> int:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        return int(sum(float(n) for n in re.findall(
            r'^furrballs_requests_total\{[^}]*op="%s"[^}]*\} (\S+)$' % op, text, re.M)))

    def unary_requests(self) -> int:
        return sum(self.requests(op) for op in ("get", "set", "delete", "touch"))

    def test_concurrent_threads_share_messages_and_keep_their_results(self) -> None:
        threads, per_thread = 16, 100
        failures: List[str] = []
        messages0, unary0 = self.requests("batch"), self.unary_requests()
        with fb.Client(self.server.target, timeout=10.0) as client:
            def work(t: int) -> None:
                for i in range(per_thread):
                    key, value = f"pb-{t}-{i}", f"v{t}/{i}".encode()
                    try:
                        version = client.set(key, value)
                        e = client.get(key)
                        if e is None or e.value != value or e.version != version:
                            failures.append(f"{key}: read {e}")
                        if i % 25 == 0:
                            try:
                                client.get("")
                                failures.append("empty key accepted")
                            except fb.InvalidArgumentError:
                                pass
                            try:
                                client.get(key, timeout=0)
                                failures.append("zero timeout answered")
                            except fb.DeadlineExceededError:
                                pass
                            if not client.delete(key):
                                failures.append(f"{key}: not deleted")
                    except fb.FurrballsError as err:
                        failures.append(f"{key}: {err}")

            run_threads(threads, work)
        self.assertEqual(failures, [])
        messages = self.requests("batch") - messages0
        unary = self.unary_requests() - unary0
        # Zero-timeout calls fail in the client and never reach the server.
        ops = threads * per_thread * 2 + threads * (per_thread // 25) * 2
        self.assertGreater(messages, 0)
        self.assertLess(messages + unary, ops,
                        f"{messages} messages and {unary} unary calls for {ops} ops")

    def test_callers_released_by_one_answer_go_together(self) -> None:
        # 16 threads of 50 gets each, all batched. The callers one answer
        # releases must share the next message: about one message per round
        # (51 here), where a batcher that sends the next message before it
        # hands out the answers sends it with whatever filled meanwhile and
        # the released callers wait a round trip for the one after.
        threads, rounds = 16, 50
        failures: List[str] = []
        with fb.Client(self.server.target, timeout=10.0,
                       batch_lone_calls=True) as client:
            client.set("pb-chain", "v")
            messages0 = self.requests("batch")
            start = threading.Barrier(threads)

            def work(_: int) -> None:
                start.wait()
                for _ in range(rounds):
                    try:
                        e = client.get("pb-chain")
                        if e is None or e.value != b"v":
                            failures.append(f"read {e}")
                    except fb.FurrballsError as err:
                        failures.append(str(err))

            run_threads(threads, work)
        self.assertEqual(failures, [])
        messages = self.requests("batch") - messages0
        self.assertLessEqual(messages, rounds + rounds // 5,
                             f"{messages} messages for {threads * rounds} ops")

    def test_lone_caller_goes_unary(self) -> None:
        messages0, unary0 = self.requests("batch"), self.unary_requests()
        with fb.Client(self.server.target, timeout=10.0) as client:
            version = client.set("pb-lone", "v")
            self.assertEqual(client.get("pb-lone").version, version)
            client.touch("pb-lone", ttl_ms=0)
            self.assertTrue(client.delete("pb-lone"))
        self.assertEqual(self.requests("batch") - messages0, 0)
        self.assertEqual(self.unary_requests() - unary0, 4)


class ResponseLimitTest(unittest.TestCase):
    """Issue 14: concurrent plain gets coalesce into one Batch message whose
    answer may hold only --max_response_bytes of values; a get whose value
    did not fit there is answered RESOURCE_EXHAUSTED by the server, and the
    client sends it again alone, so each caller gets the one value it asked
    for. Answers here hold two values of 200 KiB at most."""

    KEYS, VALUE_BYTES = 8, 200 << 10

    server: ServerProcess

    @classmethod
    def setUpClass(cls) -> None:
        cls.server = ServerProcess(SERVER_BINARY, flags=[
            "--max_value_bytes=262144", "--max_response_bytes=524288"])

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.stop()

    def test_concurrent_gets_over_the_response_limit_all_succeed(self) -> None:
        values = [bytes([ord("a") + k]) * self.VALUE_BYTES for k in range(self.KEYS)]
        failures: List[str] = []
        # A barrier per round lines the callers up, so that most rounds put
        # several gets in one message (the first goes alone, the rest wait).
        rounds = 10
        barrier = threading.Barrier(self.KEYS)
        with fb.Client(self.server.target, timeout=10.0) as client:
            for k, value in enumerate(values):
                client.set(f"big-{k}", value)

            def work(k: int) -> None:
                for _ in range(rounds):
                    barrier.wait()
                    try:
                        e = client.get(f"big-{k}")
                        if e is None or e.value != values[k]:
                            failures.append(f"big-{k}: wrong value")
                    except fb.FurrballsError as err:
                        failures.append(f"big-{k}: {err}")

            workers = [threading.Thread(target=work, args=(k,)) for k in range(self.KEYS)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
        self.assertEqual(failures, [])

    def test_only_the_response_limit_is_resent(self) -> None:
        # Told apart by the flag the server's message names: a full queue
        # or memory is returned to the caller as before.
        exhausted = grpc.StatusCode.RESOURCE_EXHAUSTED
        self.assertTrue(is_over_response_limit(error_for(
            exhausted, "Batch op 3: not answered: the values already in this answer "
            "reach the limit of 524288 bytes (--max_response_bytes); ask for this "
            "key again in another call", "Get")))
        self.assertFalse(is_over_response_limit(error_for(
            exhausted, "the owning node's request queue is full; retry later", "Get")))
        self.assertFalse(is_over_response_limit(error_for(
            grpc.StatusCode.INVALID_ARGUMENT, "(--max_response_bytes)", "Get")))


class XmlResult(unittest.TextTestResult):
    """Also keeps each case's outcome for the JUnit XML."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.cases: List[str] = []

    def _name(self, test) -> str:
        return quoteattr(test.id().rsplit(".", 1)[-1])

    def addSuccess(self, test) -> None:
        super().addSuccess(test)
        self.cases.append(f"<testcase name={self._name(test)}/>")

    def _bad(self, test, err, tag: str) -> None:
        text = self._exc_info_to_string(err, test)
        self.cases.append(f"<testcase name={self._name(test)}><{tag} "
                          f"message={quoteattr(text[-2000:])}/></testcase>")

    def addFailure(self, test, err) -> None:
        super().addFailure(test, err)
        self._bad(test, err, "failure")

    def addError(self, test, err) -> None:
        super().addError(test, err)
        self._bad(test, err, "error")


def run_cases(suite_name: str, *cases: type) -> int:
    """Runs the unittest cases, writes the JUnit XML and the closing count
    line; the exit status (0 only if some case ran and none failed)."""
    suite = unittest.TestSuite(
        unittest.defaultTestLoader.loadTestsFromTestCase(c) for c in cases)
    result = unittest.TextTestRunner(verbosity=2, resultclass=XmlResult).run(suite)
    # A setUpClass error (the server did not start) is one error case and
    # no test runs, so the run fails rather than passing empty.
    failed = len(result.failures) + len(result.errors)
    passed = len(result.cases) - failed
    xml_path = os.environ.get("XML_OUTPUT_FILE")
    if xml_path:
        with open(xml_path, "w", encoding="utf-8") as f:
            f.write('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>'
                    f'<testsuite name="{suite_name}" tests="{len(result.cases)}" '
                    f'failures="{failed}">{"".join(result.cases)}</testsuite></testsuites>\n')
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


def main() -> int:
    global SERVER_BINARY
    SERVER_BINARY = os.path.abspath(sys.argv[1])
    return run_cases("python_client_test", ClientTest, UnaryClientTest,
                     BatchedClientTest, BatchingTest, ResponseLimitTest)


if __name__ == "__main__":
    sys.exit(main())
