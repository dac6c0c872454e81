"""The Python client against a real furrballs_server with TLS, mTLS and
bearer tokens (docs/security.md), certificates made by make_test_certs.sh.

usage: python_security_test.py SERVER_BINARY MAKE_TEST_CERTS
"""
import os
import subprocess
import sys
import tempfile
import unittest

import furrballs_client as fb
from python_client_test import ServerProcess, run_cases

WRITER = "writer-0123456789abcdef"
READER = "reader-0123456789abcdef"
SERVER_BINARY = ""
MAKE_CERTS = ""


class SecurityTest(unittest.TestCase):
    server: ServerProcess
    certs: str

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR"))
        cls.certs = cls.tmp.name
        subprocess.run([MAKE_CERTS, cls.certs, "one", "two"], check=True)
        tokens = os.path.join(cls.certs, "tokens")
        with open(tokens, "w") as f:
            f.write(f"read-write {WRITER}\nread-only {READER}  # reports\n")
        cls.server = ServerProcess(SERVER_BINARY, flags=[
            f"--tls_cert_file={cls.cert('one-server.crt')}",
            f"--tls_key_file={cls.cert('one-server.key')}",
            f"--tls_client_ca_file={cls.cert('one-ca.crt')}",
            f"--auth_token_file={tokens}"])

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.stop()
        cls.tmp.cleanup()

    @classmethod
    def cert(cls, name: str) -> str:
        return os.path.join(cls.certs, name)

    def client(self, token=None, client_cert="one", **kwargs) -> fb.Client:
        credentials = fb.tls_credentials(
            ca_file=self.cert("one-ca.crt"),
            cert_file=self.cert(f"{client_cert}-client.crt") if client_cert else None,
            key_file=self.cert(f"{client_cert}-client.key") if client_cert else None)
        c = fb.Client(self.server.target, timeout=10.0, credentials=credentials,
                      token=token, **kwargs)
        self.addCleanup(c.close)
        return c

    def test_read_write_token_reads_and_writes(self) -> None:
        c = self.client(WRITER)
        version = c.set("k", b"v")
        self.assertEqual(c.get("k").version, version)
        [written] = c.multi_set([fb.SetItem("a", "1")])
        self.assertEqual(c.get("a").version, written)

    def test_read_only_token_is_denied_writes(self) -> None:
        self.client(WRITER).set("ro", b"v")
        c = self.client(READER)
        self.assertEqual(c.get("ro").value, b"v")
        self.assertEqual(len(c.stats()), 4)
        for write in (lambda: c.set("ro", b"x"), lambda: c.delete("ro"),
                      lambda: c.touch("ro", ttl_ms=0),
                      lambda: c.multi_set([fb.SetItem("ro", "x")])):
            with self.assertRaises(fb.PermissionDeniedError) as e:
                write()
            self.assertIn("read-only", e.exception.message)

    def test_missing_or_unknown_token_is_unauthenticated(self) -> None:
        for token in (None, "unknown-0123456789abcdef"):
            with self.assertRaises(fb.UnauthenticatedError):
                self.client(token).get("k")

    def test_mtls_refuses_a_client_without_an_accepted_certificate(self) -> None:
        for client_cert in (None, "two"):
            with self.assertRaises(fb.UnavailableError):
                self.client(WRITER, client_cert=client_cert).get("k")

    def test_tls_server_name(self) -> None:
        # The target is the IP; the certificate also names localhost.
        self.client(WRITER, tls_server_name="localhost").set("k", b"v")
        with self.assertRaises(fb.UnavailableError):
            self.client(WRITER, tls_server_name="cache.example").get("k")

    def test_cluster_client(self) -> None:
        credentials = fb.tls_credentials(self.cert("one-ca.crt"),
                                         self.cert("one-client.crt"),
                                         self.cert("one-client.key"))
        cluster = fb.ClusterClient([self.server.target], timeout=10.0,
                                   credentials=credentials, token=WRITER,
                                   tls_server_name="localhost")
        self.addCleanup(cluster.close)
        cluster.set("c", b"v")
        self.assertEqual(cluster.multi_get(["c"])[0].value, b"v")

    def test_tls_credentials_needs_both_client_files(self) -> None:
        with self.assertRaises(ValueError):
            fb.tls_credentials(self.cert("one-ca.crt"), cert_file=self.cert("one-client.crt"))


def main() -> int:
    global SERVER_BINARY, MAKE_CERTS
    SERVER_BINARY = os.path.abspath(sys.argv[1])
    MAKE_CERTS = os.path.abspath(sys.argv[2])
    return run_cases("python_security_test", SecurityTest)


if __name__ == "__main__":
    sys.exit(main())
