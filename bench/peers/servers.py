"""Starting and stopping the servers the benchmarks compare, on loopback.

Shared by bench/peers/run.py and bench/memory/run.py. Every server is a child
process of the caller, started with a memory budget and stopped by its pid
(Servers.stop_all also on failure or Ctrl-C). Also what both harnesses print:
their progress lines, VmRSS of a pid, load average, machine facts, tool and
package versions.
"""

import hashlib
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time


class Progress:
    """One line per step on stderr and in log_path: step count, elapsed time,
    what runs."""

    def __init__(self, name, total, log_path):
        self.name = name
        self.total = total
        self.done = 0
        self.start = time.time()
        self.log = open(log_path, "a")

    def step(self, text):
        self.done += 1
        elapsed = int(time.time() - self.start)
        line = "[%s %2d/%d %02d:%02d] %s" % (
            self.name, self.done, self.total, elapsed // 60, elapsed % 60, text)
        print(line, file=sys.stderr, flush=True)
        self.log.write(line + "\n")
        self.log.flush()

    def note(self, text):
        self.log.write(text + "\n")
        self.log.flush()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited with %s" % proc.returncode)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("nothing listens on port %d after %d s" % (port, timeout))


# Furrballs' last start-up line: it prints its configuration and memory plan
# after the port accepts connections (service/main.cc), so a reader of its
# log or its RSS must wait for this, not for the port alone.
FURRBALLS_STARTED = "furrballs: serving "


def wait_log_line(path, line, proc, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(path) as f:
            if line in f.read():
                return
        if proc.poll() is not None:
            raise RuntimeError("server exited with %s" % proc.returncode)
        time.sleep(0.01)
    raise RuntimeError("no %r in its log after %d s" % (line.strip(), timeout))


def rss_bytes(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return -1


def cpu_seconds(pid):
    """CPU time of process pid (user + system, all its threads, those ended
    included), from its CPU-time clock (clock_getcpuclockid(pid), which Linux
    encodes as ((~pid) << 3) | 2 and lets any process read). The same total
    as utime + stime in /proc/PID/stat, which the kernel derives from it, but
    in nanoseconds where /proc counts 10 ms ticks: a Batch cell of 150,000
    ops at 0.6 us per op is 9 ticks, so one tick more or less moved a
    cell's figure by 11%."""
    return time.clock_gettime(((~pid) << 3) | 2)


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def tool_version(argv):
    try:
        out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=30).stdout
        return out.strip().splitlines()[0] if out.strip() else "?"
    except (OSError, subprocess.TimeoutExpired):
        return "not found"


def deb_version(package):
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return out.stdout.strip() or "not installed"


def evict_from_page_cache(path):
    """Drops a server binary's pages from the page cache before it starts.

    What the kernel maps around a fault (fault-around) depends on which of
    the file's pages are cached and in what folios: a binary Bazel just wrote
    (llvm-bolt's large writes) showed 2.6 MiB more code pages after the same
    fill than the same bytes read back from disk (docs/memory_bench.md, "The
    server's code, laid out by function"). Evicted, every server starts as
    after a reboot or from a fresh container image, whichever build or copy
    it is. Pages that a running process maps stay (and so do shared
    libraries'); fsync first, because dirty pages are not dropped."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError:
        pass
    finally:
        os.close(fd)


def binary_identity(path):
    """What names one build of a binary: its content hash, size and mtime.

    The checkout's commit (machine_basics) says what the sources were when
    the run started, not which build ran: results compare binaries copied
    aside from other commits and worktrees. This tells them apart."""
    try:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        st = os.stat(path)
    except OSError as e:
        return "unreadable (%s)" % e.strerror
    built = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(st.st_mtime))
    return "%s: sha256 %s, %d bytes, built %s" % (
        os.path.realpath(path), digest.hexdigest()[:16], st.st_size, built)


def machine_basics(root):
    """Host, CPU, memory, OS and the commit of the checkout at `root`."""
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kib = int(f.readline().split()[1])
    commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           text=True).stdout.split("\n")
    # This run's own results directory may be tracked (a reference run).
    dirty = [line for line in dirty
             if line.strip() and not line[3:].startswith("bench/results/")]
    return {
        "host": socket.gethostname(),
        "kernel": platform.release(),
        "cpu": model,
        "cpus": os.cpu_count(),
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "os": platform.freedesktop_os_release().get("PRETTY_NAME", "?")
        if hasattr(platform, "freedesktop_os_release") else "?",
        "furrballs_commit": commit + (
            " (working tree with %d modified tracked files)" % len(dirty) if dirty else ""),
    }


class Servers:
    """The servers this run started; stop_all() ends each by its pid."""

    def __init__(self, bin_dir, out_dir):
        self.bin_dir = bin_dir
        self.out_dir = out_dir
        self.procs = {}
        self.logs = {}
        self.argv = {}

    def start(self, system, memory_mb, tag, furrballs_flags=()):
        """Starts `system` with a budget of memory_mb MiB; returns (address, pid).

        furrballs_flags come after the harness's own Furrballs flags, so they
        can override them. Furrballs counts as started once it also printed
        its start-up lines (FURRBALLS_STARTED), so that what is read next
        (its log, its idle RSS) is read after its start-up. A server that
        exits or does not listen raises RuntimeError with the end of its
        log (logs/<system>-<tag>.log).
        """
        port = free_port()
        log_path = os.path.join(self.out_dir, "logs", "%s-%s.log" % (system, tag))
        log = open(log_path, "w")
        if system == "furrballs":
            argv = [os.path.join(self.bin_dir, "service", "furrballs_server"),
                    "--listen_address=127.0.0.1:%d" % port, "--metrics_address=",
                    "--memory_mb=%d" % memory_mb] + list(furrballs_flags)
        elif system == "empty":
            argv = [os.path.join(self.bin_dir, "bench", "service", "empty_server"),
                    "--address=127.0.0.1:%d" % port]
        elif system == "redis":
            argv = ["redis-server", "--bind", "127.0.0.1", "--port", str(port),
                    "--save", "", "--appendonly", "no", "--protected-mode", "no",
                    "--maxmemory", "%dmb" % memory_mb,
                    "--maxmemory-policy", "allkeys-lru", "--daemonize", "no"]
        elif system == "memcached":
            argv = ["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0",
                    "-m", str(memory_mb)]
            if os.geteuid() == 0:
                argv += ["-u", "root"]
        else:
            raise ValueError(system)
        log.write("$ %s\n" % " ".join(argv))
        log.flush()
        evict_from_page_cache(shutil.which(argv[0]) or argv[0])
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        self.procs[system] = proc
        self.logs[system] = log_path
        self.argv[system] = argv
        try:
            wait_port(port, proc)
            if system == "furrballs":
                wait_log_line(log_path, FURRBALLS_STARTED, proc)
        except RuntimeError as e:
            self.stop(system)
            with open(log_path) as f:
                tail = f.read().strip().splitlines()[-5:]
            raise RuntimeError("%s: %s; its log ends: %s" % (system, e, " | ".join(tail)))
        return "127.0.0.1:%d" % port, proc.pid

    def adopt(self, name, proc):
        """Makes stop(name) and stop_all() end `proc` too (a load driver)."""
        self.procs[name] = proc

    def stop(self, system):
        proc = self.procs.pop(system, None)
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def stop_all(self):
        for system in list(self.procs):
            self.stop(system)

    def stop_on_signals(self):
        """On SIGTERM or SIGINT: stop every server, exit with 128 + the signal."""
        def on_signal(signum, _frame):
            self.stop_all()
            sys.exit(128 + signum)

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
