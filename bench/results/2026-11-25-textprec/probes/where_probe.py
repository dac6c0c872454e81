import sys, os, json, tempfile, subprocess
sys.path.insert(0, "/work/wt-textprec/bench/memory"); sys.path.insert(0, "/work/wt-textprec/bench/peers")
from servers import Servers, free_port
from where_rss import metrics
from file_pages import executable_pages, file_mappings
bin_dir, out = sys.argv[1], sys.argv[2]
shim = "/tmp/textprec-main/bench/memory/serving_pages_shim.so"
d = tempfile.mkdtemp(); os.makedirs(d + "/logs")
s = Servers(bin_dir, d)
if len(sys.argv) > 3: os.environ["LD_PRELOAD"] = shim
mport = free_port()
try:
    address, pid = s.start("furrballs", 64, "w", ["--metrics_address=127.0.0.1:%d" % mport])
    os.environ.pop("LD_PRELOAD", None)
    subprocess.run([bin_dir + "/bench/memory/fill_bench", "--backend=furrballs_multi", "--address=" + address, "--pid=%d" % pid, "--budget_mb=64", "--key_bytes=24", "--value_bytes=1024", "--threads=4", "--depth=32", "--max_batches=10", "--sample_keys=0", "--cache_aside_ops=0", "--label=w", "--out=" + d + "/f.json"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    metrics(mport)
    json.dump(sorted(executable_pages(pid)), open(out, "w"))
    subprocess.run(["python3", "/work/wt-textprec/bench/memory/file_pages.py", "--pid=%d" % pid], stdout=open(out + ".pages", "w"))
finally:
    s.stop_all()
