import sys, types, subprocess
sys.path.insert(0, "/work/wt-filerss/bench/memory"); sys.path.insert(0, "/work/wt-filerss/bench/peers")
import serving_sections
args = types.SimpleNamespace(bin_dir="/tmp/fs_probe/bolt/bin", budget_mb=64,
    runs="furrballs_multi:64,furrballs_multi:1024,furrballs:1024,furrballs_batched:1024")
pages = serving_sections.touched_pages(args)
out = subprocess.run(["nm", "-S", "--defined-only", "/tmp/fs_probe/bolt/bin/service/furrballs_server"],
                     capture_output=True, text=True).stdout
syms = []
for line in out.splitlines():
    p = line.split()
    if len(p) == 4 and p[2] in "tTwW":
        syms.append((int(p[0], 16), int(p[1], 16), p[3]))
syms.sort()
chosen, total = [], 0
for a, size, name in syms:
    if any(pg in pages for pg in range(a // 4096 * 4096, a + max(size, 1), 4096)):
        chosen.append(name); total += size
print(len(chosen), total / 2**20, file=sys.stderr)
open("/tmp/fs_probe/bolt/order.txt", "w").write("\n".join(chosen) + "\n")
