#!/usr/bin/env python3
"""One 64 MiB / 64 B fill of a furrballs_server, as bench/memory/run.py runs it
(same server flags, same fill_bench arguments), with the server's RSS sampled
every 20 ms and, the first time it passes --threshold_mb, a picture of it:
smaps, then (--gdb) malloc_info and every thread's backtrace.

--starve pins every thread of the server, once it listens, to CPU 0 and runs
two busy loops pinned there too (the server gets about a third of one CPU).

Prints one line: max RSS, RSS at the end, resident keys, keys per MiB.
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            text = f.read()
    except OSError:
        return None, None
    rss = re.search(r"VmRSS:\s+(\d+)", text)
    anon = re.search(r"RssAnon:\s+(\d+)", text)
    return (int(rss.group(1)) if rss else None, int(anon.group(1)) if anon else None)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin_dir", required=True)
    p.add_argument("--out", required=True, help="directory for this fill's files")
    p.add_argument("--starve", action="store_true")
    p.add_argument("--load", type=int, default=0,
                   help="busy loops beside the server, on any CPU (no pinning)")
    p.add_argument("--threshold_mb", type=float, default=78.0)
    p.add_argument("--gdb", action="store_true")
    p.add_argument("--heaptrack", action="store_true",
                   help="attach heaptrack before the fill (its file in --out)")
    p.add_argument("--perf", action="store_true",
                   help="perf-record the server's mprotect/mmap/brk calls (how malloc "
                   "grows an arena, maps a new one, or the brk heap) with call stacks; "
                   "perf.data kept only when the RSS passed --threshold_mb")
    p.add_argument("--server_flags", default="")
    p.add_argument("--value_bytes", type=int, default=64)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    port = random.randint(20000, 60000)
    work = tempfile.mkdtemp(prefix="starve-fill-")
    log_path = os.path.join(args.out, "server.log")
    argv = [os.path.join(args.bin_dir, "service", "furrballs_server"),
            "--listen_address=127.0.0.1:%d" % port, "--metrics_address=",
            "--memory_mb=64"] + args.server_flags.split()
    log = open(log_path, "w")
    server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=work)
    deadline = time.time() + 60
    while True:
        with open(log_path) as f:
            if "furrballs: serving" in f.read():
                break
        if server.poll() is not None or time.time() > deadline:
            sys.exit("server did not start; see " + log_path)
        time.sleep(0.05)
    busy = []
    if args.starve:
        subprocess.run(["taskset", "-a", "-p", "-c", "0", str(server.pid)],
                       stdout=subprocess.DEVNULL, check=True)
        for _ in range(2):
            busy.append(subprocess.Popen(["taskset", "-c", "0", "sh", "-c",
                                          "while :; do :; done"]))
    tracker = None
    if args.heaptrack:
        tracker = subprocess.Popen(["heaptrack", "-p", str(server.pid), "-o",
                                    os.path.join(os.path.abspath(args.out), "heaptrack")],
                                   stdout=open(os.path.join(args.out, "heaptrack.log"), "w"),
                                   stderr=subprocess.STDOUT)
        time.sleep(8)  # gdb injects the tracker
    perf = None
    if args.perf:
        perf = subprocess.Popen(["perf", "record", "-q", "-e", "syscalls:sys_enter_mprotect",
                                 "-e", "syscalls:sys_enter_mmap", "-e", "syscalls:sys_enter_brk",
                                 "--call-graph", "dwarf,16384", "-p", str(server.pid),
                                 "-o", os.path.join(args.out, "perf.data")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
    for _ in range(args.load):
        busy.append(subprocess.Popen(["sh", "-c", "while :; do :; done"]))
    samples = []
    trigger = {"done": False, "last": 0, "n": 0}
    stop = threading.Event()

    def capture(rss):
        shutil.copy("/proc/%d/smaps" % server.pid, os.path.join(args.out, "smaps-at-rise"))
        with open(os.path.join(args.out, "status-at-rise"), "w") as f:
            f.write("rss_kib %d at %.3f s\n" % (rss, time.time() - t0))
        with open(os.path.join(args.out, "threads-at-rise"), "w") as f:
            for tid in sorted(os.listdir("/proc/%d/task" % server.pid), key=int):
                try:
                    with open("/proc/%d/task/%s/stat" % (server.pid, tid)) as st:
                        f.write(st.read())
                except OSError:
                    pass
        if args.gdb:
            with open(os.path.join(args.out, "gdb-at-rise.txt"), "w") as f:
                subprocess.run(["gdb", "-p", str(server.pid), "-batch", "-nx",
                                "-ex", "set pagination off",
                                "-ex", "call (int)malloc_info(0, stderr)",
                                "-ex", "thread apply all bt 30"],
                               stdout=f, stderr=subprocess.STDOUT)

    def sample():
        while not stop.is_set():
            rss, anon = rss_kib(server.pid)
            if rss is None:
                break
            try:
                threads = len(os.listdir("/proc/%d/task" % server.pid))
            except OSError:
                threads = 0
            samples.append((time.time() - t0, rss, anon, threads))
            if rss > args.threshold_mb * 1024 and not trigger["done"]:
                trigger["done"] = True
                trigger["last"] = rss
                capture(rss)
            elif trigger["done"] and rss > trigger["last"] + 4096 and trigger["n"] < 8:
                # Higher still: the smaps again (which mapping grew on).
                trigger["last"], trigger["n"] = rss, trigger["n"] + 1
                shutil.copy("/proc/%d/smaps" % server.pid,
                            os.path.join(args.out, "smaps-at-%d-kib" % rss))
            time.sleep(0.02)

    t0 = time.time()
    sampler = threading.Thread(target=sample)
    sampler.start()
    out_json = os.path.join(args.out, "fill.json")
    fill = [os.path.join(args.bin_dir, "bench", "memory", "fill_bench"),
            "--backend=furrballs_multi", "--address=127.0.0.1:%d" % port,
            "--pid=%d" % server.pid, "--budget_mb=64", "--key_bytes=24",
            "--value_bytes=%d" % args.value_bytes, "--threads=4", "--depth=32",
            "--min_growth=0.005", "--max_batches=10", "--max_seconds=100",
            "--sample_keys=1000", "--seed=1", "--cache_aside_ops=0", "--zipf_theta=0.99",
            "--label=starve", "--out=" + out_json]
    with open(os.path.join(args.out, "driver.log"), "w") as dlog:
        rc = subprocess.run(fill, stdout=dlog, stderr=subprocess.STDOUT).returncode
    stop.set()
    sampler.join()
    for b in busy:
        b.kill()
        b.wait()
    shutil.copy("/proc/%d/smaps" % server.pid, os.path.join(args.out, "smaps-at-end"))
    perf_events = None
    if perf:
        perf.send_signal(2)
        perf.wait()
        script = subprocess.run(["perf", "script", "-F", "event", "-i",
                                 os.path.join(args.out, "perf.data")],
                                capture_output=True, text=True).stdout
        perf_events = len(script.splitlines())
        with open(os.path.join(args.out, "heap-growth.txt"), "w") as f:
            subprocess.run([sys.executable, os.path.join(os.path.dirname(
                os.path.abspath(__file__)), "perf_growth.py"),
                os.path.join(args.out, "perf.data")], stdout=f, stderr=subprocess.DEVNULL)
        if not trigger["done"]:
            os.remove(os.path.join(args.out, "perf.data"))
    if args.gdb:
        with open(os.path.join(args.out, "malloc-info-at-end.txt"), "w") as f:
            subprocess.run(["gdb", "-p", str(server.pid), "-batch", "-nx",
                            "-ex", "call (int)malloc_info(0, stderr)"],
                           stdout=f, stderr=subprocess.STDOUT)
    with open("/proc/%d/stat" % server.pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu_s = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    server.terminate()
    server.wait()
    if tracker:
        tracker.wait()
    shutil.rmtree(work, ignore_errors=True)
    with open(os.path.join(args.out, "rss.tsv"), "w") as f:
        f.write("t_s\trss_kib\trss_anon_kib\tthreads\n")
        for t, r, a, n in samples:
            f.write("%.3f\t%d\t%d\t%d\n" % (t, r, a or 0, n))
    res = {}
    if rc == 0:
        with open(out_json) as f:
            res = json.load(f)
    max_rss = max(x[1] for x in samples) / 1024
    end_rss = samples[-1][1] / 1024
    keys = res.get("after_fill", {}).get("resident")
    summary = {"max_rss_mib": round(max_rss, 1), "end_rss_mib": round(end_rss, 1),
               "fill_rc": rc, "server_cpu_s": cpu_s, "risen": trigger["done"],
               "resident": keys, "perf_events": perf_events, "after_fill": res.get("after_fill")}
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print("max %.1f MiB end %.1f MiB risen %s cpu %.1f s keys %s perf %s threads %d-%d" % (
        max_rss, end_rss, trigger["done"], cpu_s, keys, perf_events, min(x[3] for x in samples),
        max(x[3] for x in samples)))


if __name__ == "__main__":
    main()
