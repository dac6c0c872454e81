#!/usr/bin/env python3
"""Who grew malloc's heaps: from `perf script` of a starve_fill.py --perf
recording (perf.data), the mprotect calls glibc makes to extend a thread
arena's heap (grow_heap) and the brk calls of the main heap, summed by
thread and by the first frames above malloc. Usage: perf_growth.py perf.data"""
import collections, re, subprocess, sys

SKIP = re.compile(r"libc\.so|\(inlined\)|sysmalloc|_int_malloc|_int_realloc|_int_memalign|"
                  r"malloc\+|realloc\+|memalign|gpr_malloc|gpr_realloc|operator new")


def events(path):
    out = subprocess.run(["perf", "script", "-i", path], capture_output=True, text=True).stdout
    ev = None
    for line in out.splitlines():
        if line and not line[0].isspace():
            if ev:
                yield ev
            ev = {"head": line, "frames": []}
        elif line.strip() and ev:
            ev["frames"].append(line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else line)
    if ev:
        yield ev


def main():
    by_stack = collections.Counter()
    by_thread = collections.Counter()
    for ev in events(sys.argv[1]):
        head = ev["head"]
        if "sys_enter_mprotect" in head:
            if not any("grow_heap" in f for f in ev["frames"]):
                continue
            size = int(re.search(r"len: (0x[0-9a-f]+)", head).group(1), 16)
        elif "sys_enter_brk" in head:
            size = 1  # counted, not sized (brk gives the new end, not a length)
        else:
            continue
        m = re.match(r"\s*(\S+)\s+(\d+)", head)
        thread = "%s/%s" % (m.group(1), m.group(2))
        frames = [re.sub(r"\+0x[0-9a-f]+ \(.*\)$|\s+\(.*\)$", "", f)
                  for f in ev["frames"] if not SKIP.search(f)]
        by_stack[(thread, " <- ".join(frames[:6]))] += size
        by_thread[thread] += size
    for t, n in by_thread.most_common():
        print("%8.1f KiB  %s" % (n / 1024, t))
    print()
    for (t, s), n in by_stack.most_common(25):
        print("%8.1f KiB  %s  %s" % (n / 1024, t, s[:400]))


if __name__ == "__main__":
    main()
