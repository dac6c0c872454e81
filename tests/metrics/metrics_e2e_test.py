"""End-to-end test of the metrics pipeline with real components.

Starts the real server (//service:furrballs_server, simulated 4-node
topology) and a real Prometheus (Debian's binary, loopback, temporary TSDB,
1 s scrape interval, loading the shipped deploy/prometheus/alerts.yml), drives
every RPC with //tests/metrics:traffic_driver (errors included), and then:

- lints a live scrape with `promtool check metrics` (no output allowed);
- requires every per-node family to have series for nodes 0-3;
- runs every PromQL expression of every panel of the shipped dashboard
  (deploy/grafana/furrballs.json), template variables resolved the way
  Grafana would, through Prometheus's HTTP API, and requires each to parse
  and return data (at least one finite value; per-node panels: all 4 nodes);
- extracts every alert expression from the shipped alerts.yml, requires each
  to parse and evaluate through the API, and requires Prometheus to have
  loaded exactly those rules and evaluated each without error.

Waiting is bounded polling of the real condition (an endpoint answering, a
target up, a scrape showing the driver's last requests), never a fixed sleep.
Writes JUnit XML with one case per check for the test runner's counts.
"""

import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request
from xml.sax.saxutils import quoteattr, escape

NODES = {"0", "1", "2", "3"}
STATS_CALLS = 3
DEADLINE_S = 90  # bound on each wait
POLL_S = 0.2
JOB = "furrballs"

SERVER = "service/furrballs_server"
DRIVER = "tests/metrics/traffic_driver"
DASHBOARD = "deploy/grafana/furrballs.json"
ALERTS = "deploy/prometheus/alerts.yml"

# Grafana's built-in variables, as Grafana would expand them for a 1 h range
# on a Prometheus that scrapes every 15 s.
BUILTINS = {"__rate_interval": "1m", "__interval": "15s", "__range": "1h"}


def free_ports(n):
    """n distinct free loopback ports (held open together while chosen)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode("utf-8")


def wait_for(what, condition, processes=()):
    """Polls condition() until it returns a truthy value (returned), failing
    after DEADLINE_S or as soon as one of `processes` has exited."""
    deadline = time.monotonic() + DEADLINE_S
    last_error = None
    while time.monotonic() < deadline:
        for name, p, log in processes:
            if p.poll() is not None:
                raise AssertionError(
                    f"{name} exited with {p.returncode} while waiting for "
                    f"{what}; its log:\n{read_tail(log)}")
        try:
            value = condition()
            if value:
                return value
        except (OSError, urllib.error.URLError, ValueError, KeyError, TypeError) as e:
            last_error = e
        time.sleep(POLL_S)
    raise AssertionError(f"timed out after {DEADLINE_S} s waiting for {what}"
                         f" (last error: {last_error})")


def read_tail(path, lines=40):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"


def parse_exposition(text):
    """{family: [labels dict, ...]} for every sample of the text format."""
    sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
    label = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = sample.match(line)
        if not m:
            raise AssertionError(f"unparsable exposition line: {line!r}")
        labels = dict(label.findall(m.group(2) or ""))
        out.setdefault(m.group(1), []).append(labels)
    return out


def alert_expressions(path):
    """(alert name, expr) for every rule of a rule file in this repository's
    style: `- alert: Name`, then `expr:` either inline or as a `|` block.
    PyYAML is not a dependency, so this reads exactly that subset and fails
    loudly on anything else."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    rules = []
    name = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^\s*- alert:\s*(\S+)\s*$", line)
        if m:
            name = m.group(1)
        m = re.match(r"^(\s*)expr:\s*(.*)$", line)
        if m:
            if name is None:
                raise AssertionError(f"{path}:{i + 1}: expr outside an alert")
            indent, rest = len(m.group(1)), m.group(2).strip()
            if rest in ("|", "|-", ">", ">-"):
                block = []
                i += 1
                while i < len(lines) and (not lines[i].strip() or
                                          len(lines[i]) - len(lines[i].lstrip()) > indent):
                    block.append(lines[i].strip())
                    i += 1
                rules.append((name, " ".join(b for b in block if b)))
                name = None
                continue
            rules.append((name, rest.strip("'\"") if rest[:1] in "'\"" else rest))
            name = None
        i += 1
    return rules


def dashboard_targets(dashboard):
    """(panel title, expr) of every target of every panel, rows included."""
    out = []

    def walk(panels):
        for p in panels:
            walk(p.get("panels", []))
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((p.get("title", "?"), t["expr"]))
    walk(dashboard.get("panels", []))
    for row in dashboard.get("rows", []):  # pre-5.0 layout
        walk(row.get("panels", []))
    return out


class Stack:
    """The server and Prometheus, started once for all checks."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="metrics_e2e_",
                                    dir=os.environ.get("TEST_TMPDIR"))
        self.logs = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR", self.tmp)
        self.procs = []

    def run(self):
        grpc_port, metrics_port, prom_port = free_ports(3)
        self.instance = f"127.0.0.1:{metrics_port}"
        self.metrics_url = f"http://{self.instance}/metrics"
        self.prom = f"http://127.0.0.1:{prom_port}"

        self.start("server", [
            # NodeJob dispatch, so the dashboard's queue and batch panels
            # have data (direct mode has no queues).
            SERVER, "--simulate_nodes=4", "--memory_mb=64", "--dispatch=nodejob",
            f"--listen_address=127.0.0.1:{grpc_port}",
            f"--metrics_address={self.instance}",
            "--shutdown_deadline_ms=2000"])
        wait_for("the server's /metrics", lambda: http_get(self.metrics_url),
                 self.procs)

        config = os.path.join(self.tmp, "prometheus.yml")
        with open(config, "w", encoding="utf-8") as f:
            f.write(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - {os.path.abspath(ALERTS)}
scrape_configs:
  - job_name: {JOB}
    static_configs:
      - targets: ['{self.instance}']
""")
        self.start("prometheus", [
            "prometheus", f"--config.file={config}",
            f"--storage.tsdb.path={os.path.join(self.tmp, 'tsdb')}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
            "--log.level=warn"])
        wait_for("the target to be up", self.target_up, self.procs)

        self.pre_traffic_scrape = self.metrics_text()
        driver = subprocess.run(
            [DRIVER, f"--target=127.0.0.1:{grpc_port}",
             f"--stats_calls={STATS_CALLS}"],
            capture_output=True, text=True, timeout=DEADLINE_S)
        if driver.returncode != 0:
            raise AssertionError(f"traffic_driver failed:\n{driver.stdout}{driver.stderr}")
        # The driver's last requests are Stats calls, each counted before it
        # was answered: once a scrape has them, it has all the traffic. One
        # more scrape after that puts two post-traffic samples in every
        # rate() window.
        seen = wait_for("a scrape after the traffic", self.stats_scraped, self.procs)
        wait_for("one more scrape", lambda: self.last_scrape() != seen, self.procs)
        self.post_traffic_scrape = self.metrics_text()

    def start(self, name, argv):
        log = os.path.join(self.logs, f"{name}.log")
        with open(log, "w") as f:
            p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)
        self.procs.append((name, p, log))

    def stop(self):
        for name, p, _ in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    def metrics_text(self):
        return http_get(self.metrics_url)

    def api(self, path, **params):
        url = f"{self.prom}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        try:
            body = http_get(url, timeout=10)
        except urllib.error.HTTPError as e:  # 400 carries the parse error
            body = e.read().decode("utf-8")
        return json.loads(body)

    def target(self):
        for t in self.api("targets")["data"]["activeTargets"]:
            if t["labels"].get("instance") == self.instance:
                return t
        return None

    def target_up(self):
        t = self.target()
        return t is not None and t["health"] == "up"

    def last_scrape(self):
        return self.target()["lastScrape"]

    def stats_scraped(self):
        r = self.query(f'sum(furrballs_requests_total{{job="{JOB}",op="stats",code="OK"}})')
        result = r["data"]["result"]
        if r["status"] == "success" and result and float(result[0]["value"][1]) >= STATS_CALLS:
            return self.last_scrape()
        return None

    def query(self, expr):
        return self.api("query", query=expr)

    def series_label_values(self, selector, label):
        r = self.api("series", **{"match[]": selector})
        assert r["status"] == "success", r
        return sorted({s[label] for s in r["data"] if label in s})


def expand(expr, variables):
    """Replaces $name, ${name} and [[name]] (longest names first)."""
    for name in sorted(variables, key=len, reverse=True):
        value = variables[name]
        expr = expr.replace("${" + name + "}", value)
        expr = expr.replace("[[" + name + "]]", value)
        expr = re.sub(r"\$" + re.escape(name) + r"\b", lambda _: value, expr)
    return expr


class MetricsEndToEndTest(unittest.TestCase):
    stack = None

    @classmethod
    def setUpClass(cls):
        cls.stack = Stack()
        try:
            cls.stack.run()
        except BaseException:
            cls.stack.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.stack is not None:
            cls.stack.stop()

    def promtool_check(self, text):
        r = subprocess.run(["promtool", "check", "metrics"], input=text,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual((r.stdout + r.stderr).strip(), "",
                         "promtool check metrics reported problems")

    def test_scrape_passes_promtool_before_traffic(self):
        self.promtool_check(self.stack.pre_traffic_scrape)

    def test_scrape_passes_promtool_after_traffic(self):
        self.promtool_check(self.stack.post_traffic_scrape)

    def test_every_node_has_series_in_every_per_node_family(self):
        families = parse_exposition(self.stack.post_traffic_scrape)
        per_node = {f: s for f, s in families.items()
                    if any("node" in labels for labels in s)}
        self.assertGreaterEqual(len(per_node), 15, sorted(per_node))
        for family, samples in per_node.items():
            with self.subTest(family=family):
                self.assertEqual({l.get("node") for l in samples}, NODES)

    def test_traffic_is_counted(self):
        families = parse_exposition(self.stack.post_traffic_scrape)
        self.assertIn("furrballs_build_info", families)
        for op in ("get", "set", "delete", "touch", "multi_get", "multi_set",
                   "pipeline", "stats"):
            with self.subTest(op=op):
                r = self.stack.query(
                    f'furrballs_requests_total{{op="{op}",code="OK"}} > 0')
                self.assertTrue(r["data"]["result"], f"no OK {op} requests")
        for code in ("INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "ABORTED"):
            with self.subTest(code=code):
                r = self.stack.query(f'sum(furrballs_requests_total{{code="{code}"}}) > 0')
                self.assertTrue(r["data"]["result"], f"no {code} requests counted")

    def resolve_variables(self, dashboard):
        """The dashboard's template variables, evaluated against Prometheus
        the way Grafana does: a query variable's label_values(selector,
        label) lists that label's values on the matching series; a multi
        variable at "All" becomes the regex (v1|v2|...)."""
        variables = dict(BUILTINS)
        for v in dashboard["templating"]["list"]:
            if v["type"] == "datasource":
                continue
            self.assertEqual(v["type"], "query", v["name"])
            q = v.get("query")
            q = q.get("query") if isinstance(q, dict) else q
            m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\)\s*", q or "")
            self.assertIsNotNone(m, f"variable {v['name']}: unsupported query {q!r}")
            selector = expand(m.group(1), variables)
            values = self.stack.series_label_values(selector, m.group(2))
            self.assertTrue(values, f"variable {v['name']}: {q} has no values")
            if v["name"] == "instance":
                self.assertIn(self.stack.instance, values)
                variables["instance"] = self.stack.instance
            elif v.get("multi") or v.get("includeAll"):
                variables[v["name"]] = "(" + "|".join(re.escape(x) for x in values) + ")"
            else:
                variables[v["name"]] = values[0]
            if v["name"] == "node":
                self.assertEqual(set(values), NODES, "node variable values")
        return variables

    def test_dashboard_panels_parse_and_return_data(self):
        with open(DASHBOARD, encoding="utf-8") as f:
            dashboard = json.load(f)
        variables = self.resolve_variables(dashboard)
        targets = dashboard_targets(dashboard)
        self.assertGreaterEqual(len(targets), 20)
        for title, raw in targets:
            expr = expand(raw, variables)
            with self.subTest(panel=title, expr=expr):
                self.assertNotIn("$", expr, "unresolved template variable")
                r = self.stack.query(expr)
                self.assertEqual(r["status"], "success", r.get("error"))
                result = r["data"]["result"]
                self.assertTrue(result, "no data")
                values = [float(s["value"][1]) for s in result]
                self.assertTrue(any(math.isfinite(x) for x in values),
                                f"no finite value: {values}")
                nodes = {s["metric"]["node"] for s in result if "node" in s["metric"]}
                if nodes:
                    self.assertEqual(nodes, NODES, "per-node panel misses nodes")

    def test_alert_expressions_parse_and_evaluate(self):
        rules = alert_expressions(ALERTS)
        self.assertGreaterEqual(len(rules), 5)
        for name, expr in rules:
            with self.subTest(alert=name):
                r = self.stack.query(expr)
                self.assertEqual(r["status"], "success", r.get("error"))

    def test_prometheus_loaded_and_evaluated_every_alert(self):
        expected = sorted(name for name, _ in alert_expressions(ALERTS))

        def evaluated_rules():
            groups = self.stack.api("rules", type="alert")["data"]["groups"]
            rules = [r for g in groups for r in g["rules"]]
            done = all(not r["lastEvaluation"].startswith("0001-") for r in rules)
            return rules if rules and done else None

        rules = wait_for("every alert rule to be evaluated", evaluated_rules,
                         self.stack.procs)
        self.assertEqual(sorted(r["name"] for r in rules), expected)
        for r in rules:
            with self.subTest(alert=r["name"]):
                self.assertEqual(r["health"], "ok", r.get("lastError"))


class JUnitResult(unittest.TextTestResult):
    """Records every test and subtest outcome for the JUnit XML."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cases = []  # (name, failure text or None)

    def addSuccess(self, test):
        super().addSuccess(test)
        self.cases.append((test.id(), None))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.cases.append((test.id(), self._exc_info_to_string(err, test)))

    def addError(self, test, err):
        super().addError(test, err)
        self.cases.append((test.id(), self._exc_info_to_string(err, test)))

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self.cases.append((subtest.id(), self._exc_info_to_string(err, test)))


def write_junit(path, cases):
    failures = sum(1 for _, f in cases if f)
    with open(path, "w", encoding="utf-8") as out:
        out.write('<?xml version="1.0" encoding="UTF-8"?>\n')
        out.write(f'<testsuites><testsuite name="metrics_e2e_test" '
                  f'tests="{len(cases)}" failures="{failures}">\n')
        for name, failure in cases:
            out.write(f"  <testcase name={quoteattr(name)}>")
            if failure:
                out.write(f"<failure message=\"failed\">{escape(failure)}</failure>")
            out.write("</testcase>\n")
        out.write("</testsuite></testsuites>\n")


def main():
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(MetricsEndToEndTest)
    runner = unittest.TextTestRunner(verbosity=2, resultclass=JUnitResult)
    result = runner.run(suite)
    xml = os.environ.get("XML_OUTPUT_FILE")
    if xml:
        cases = result.cases
        if not cases:  # setUpClass failed before any test ran
            cases = [("setUpClass", "".join(str(e[1]) for e in result.errors) or "no test ran")]
        write_junit(xml, cases)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
