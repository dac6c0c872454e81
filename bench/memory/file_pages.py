#!/usr/bin/env python3
"""Which pages of files a process holds: by mapping, ELF section and origin.

Reads /proc/<pid>/smaps (every file mapping's Rss and how much of it is
private copies) and /proc/<pid>/pagemap (which of the mapping's pages are
present; root is not needed for the present bit), then for the executable
itself maps every present page to the ELF section it holds (readelf -SW) and
its code to the symbol it falls in (nm), each symbol to an origin by its name
(gRPC, protobuf, RocksDB, Abseil, OpenSSL, the project's own, the C++
runtime, ...). It also counts the 64 KiB-aligned blocks of the code with any
page present: the kernel maps the page cache's neighbours of a faulting page
with it (fault-around, 64 KiB), so a block with one page that runs costs up
to 16 pages.

  bench/memory/file_pages.py --pid=$(pidof furrballs_server) [--json=out.json]

bench/memory/where_rss.py --file_pages prints the same after its fill.
docs/memory_bench.md ("The server's file pages") has the tables it made.
"""

import argparse
import bisect
import json
import os
import re
import struct
import subprocess
import sys

PAGE = 4096
BLOCK = 64 << 10
MIB = 1024.0 * 1024.0
SMAPS_HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) ([0-9a-f]+) \S+ (\d+)\s*(.*)$")

# Origin of a demangled symbol, first match wins. C symbols of the archives
# are matched by their prefixes.
ORIGINS = [
    ("ours (furrballs)", re.compile(r"furrballs::|^furrballs|Furrball")),
    ("RocksDB", re.compile(r"rocksdb::|^rocksdb_|ROCKSDB|^ZSTD|^LZ4|snappy::|^BZ2|^deflate|"
                           r"^inflate")),
    ("gRPC", re.compile(r"grpc|^gpr_|^census|^upb_|^_upb|^ares_|re2::|^address_sorting|^tsi_|"
                        r"^alts_|envoy|xds|^cq_")),
    ("protobuf", re.compile(r"google::protobuf|^google::")),
    ("Abseil", re.compile(r"absl::")),
    ("OpenSSL", re.compile(r"^(SSL|ssl|EVP|evp|OPENSSL|OSSL|ossl|CRYPTO|crypto|BN|bn_|EC|ec_|RSA|"
                           r"rsa|X509|x509|ASN1|asn1|PEM|BIO|ERR|OBJ|SHA|sha|AES|aes|tls|i2d|"
                           r"d2i)")),
    ("numa, xxHash", re.compile(r"^numa_|^XXH|^_XXH")),
    ("C++ runtime (static parts)", re.compile(r"^std::|^__cxa|^__gnu_cxx|^operator (new|delete)|"
                                              r"^__cxx")),
]


def origin(sym):
    for name, pattern in ORIGINS:
        if pattern.search(sym):
            return name
    return "other"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--pid", type=int, required=True, help="process to read")
    p.add_argument("--json", default="", help="also write every figure to this file")
    p.add_argument("--top", type=int, default=0,
                   help="also list this many symbols with the most present code pages")
    return p.parse_args()


def file_mappings(pid):
    """The process's file-backed mappings with their smaps fields."""
    maps, cur = [], None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            h = SMAPS_HEADER.match(line)
            if h and not line.split()[0].endswith(":"):
                cur = {"start": int(h.group(1), 16), "end": int(h.group(2), 16),
                       "perms": h.group(3), "offset": int(h.group(4), 16),
                       "inode": int(h.group(5)), "path": h.group(6).strip()}
                maps.append(cur)
            elif cur is not None and ":" in line:
                key, _, rest = line.partition(":")
                fields = rest.split()
                if len(fields) == 2 and fields[1] == "kB":
                    cur[key] = int(fields[0]) * 1024
    return [m for m in maps if m["inode"] != 0 and m["path"].startswith("/")]


def present_pages(pid, start, end):
    """Virtual addresses of the present pages in [start, end)."""
    out = []
    with open("/proc/%d/pagemap" % pid, "rb") as f:
        f.seek(start // PAGE * 8)
        data = f.read((end - start) // PAGE * 8)
    for i, (entry,) in enumerate(struct.iter_unpack("<Q", data)):
        if entry >> 63:
            out.append(start + i * PAGE)
    return out


def sections(path):
    """(address, size, name) of the allocated sections of an ELF file."""
    out = []
    text = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True,
                          check=True).stdout
    for line in text.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)"
                     r"\s+\S+\s+(\S*)", line)
        if m and "A" in m.group(4) and int(m.group(2), 16):
            out.append((int(m.group(2), 16), int(m.group(3), 16), m.group(1)))
    return sorted(out)


def symbols(path, demangle=True):
    """Sorted (address, size, name) of the file's code symbols, names
    demangled unless demangle is False."""
    text = subprocess.run(["nm"] + (["-C"] if demangle else []) + ["-S", "--defined-only", path],
                          capture_output=True, text=True, check=True).stdout
    out = []
    for line in text.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4 and parts[2] in ("t", "T", "W", "w", "i"):
            out.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
    out.sort()
    return out


def load_bias(path, exe_maps):
    """What the loader added to the executable's addresses (0 if not PIE)."""
    text = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True,
                          check=True).stdout
    m = re.search(r"^\s*LOAD\s+0x0+\s+(0x[0-9a-f]+)", text, re.M)
    first = min(exe_maps, key=lambda m: m["start"])
    return first["start"] - first["offset"] - int(m.group(1), 16)


def executable_pages(pid, maps=None):
    """Link-time addresses of the process's present pages of its executable."""
    exe = os.readlink("/proc/%d/exe" % pid)
    exe_maps = [m for m in (maps or file_mappings(pid)) if m["path"] == exe]
    # The pagemap first: reading the file (readelf) fills the page cache,
    # not the process's mappings, but the order keeps that obvious.
    raw = []
    for m in exe_maps:
        raw += present_pages(pid, m["start"], m["end"])
    bias = load_bias(exe, exe_maps)
    return [a - bias for a in raw]


def main():
    args = parse_args()
    pid = args.pid
    exe = os.readlink("/proc/%d/exe" % pid)
    maps = file_mappings(pid)
    by_file = {}
    for m in maps:
        f = by_file.setdefault(m["path"], {"rss": 0, "anonymous": 0, "mappings": []})
        f["rss"] += m.get("Rss", 0)
        f["anonymous"] += m.get("Anonymous", 0)
        f["mappings"].append({"perms": m["perms"], "size": m["end"] - m["start"],
                              "rss": m.get("Rss", 0), "anonymous": m.get("Anonymous", 0)})
    print("| file | mapping (perms: Rss / of it private copies, KiB) | Rss, MiB |")
    print("| --- | --- | --- |")
    total = 0
    for path, f in sorted(by_file.items(), key=lambda kv: -kv[1]["rss"]):
        total += f["rss"]
        # Mappings of the same permissions summed (a mapping split into
        # many, e.g. by madvise, would make a long line).
        perms = {}
        for x in f["mappings"]:
            p = perms.setdefault(x["perms"], [0, 0])
            p[0] += x["rss"]
            p[1] += x["anonymous"]
        parts = ["%s %d/%d" % (k, v[0] >> 10, v[1] >> 10) for k, v in perms.items()]
        print("| %s | %s | %.2f |" % (os.path.basename(path), ", ".join(parts), f["rss"] / MIB))
    print("| total | | %.2f |" % (total / MIB))

    pages = executable_pages(pid, maps)
    secs = sections(exe)
    sec_pages = {}
    sec_starts = [s[0] for s in secs]
    for a in pages:
        # A page can hold the ends of two sections: charged to each.
        i = bisect.bisect_right(sec_starts, a + PAGE - 1) - 1
        while i >= 0 and secs[i][0] + secs[i][1] > a:
            sec_pages[secs[i][2]] = sec_pages.get(secs[i][2], 0) + 1
            i -= 1
    print("\nthe executable's present pages by section (%s):" % os.path.basename(exe))
    print("| section | size, KiB | present, KiB |")
    print("| --- | --- | --- |")
    for addr, size, name in secs:
        if size >= 16 << 10 or sec_pages.get(name):
            print("| %s | %d | %d |" % (name, size >> 10, sec_pages.get(name, 0) * 4))

    # The code: .text and, in a binary laid out by the linker script,
    # .text.serving; in one laid out by BOLT, .text and .text.cold (its
    # .bolt.org.text and the .text.serving inside it are the code as linked,
    # not counted: nothing runs there but what BOLT could not move).
    bolted = any(s[2] == ".bolt.org.text" for s in secs)
    code_names = (".text", ".text.cold") if bolted else (".text", ".text.serving")
    code = [s for s in secs if s[2] in code_names]
    code_bytes = sum(size for _, size, _ in code)
    code_pages = [a for a in pages if any(b <= a < b + size for b, size, _ in code)]
    blocks = sorted({a // BLOCK for a in code_pages})
    code_blocks = len({a // BLOCK for b, size, _ in code for a in range(b, b + size, PAGE)})
    syms = symbols(exe)
    sym_starts = [s[0] for s in syms]
    by_origin, by_sym = {}, {}
    for a in code_pages:
        # Bytes of each symbol in the page, so a page of many small
        # functions is shared among their origins.
        i = max(bisect.bisect_right(sym_starts, a) - 1, 0)
        while i < len(syms) and syms[i][0] < a + PAGE:
            s, size, name = syms[i]
            overlap = min(s + size, a + PAGE) - max(s, a)
            if overlap > 0:
                o = origin(name)
                by_origin[o] = by_origin.get(o, 0) + overlap
                by_sym[name] = by_sym.get(name, 0) + overlap
            i += 1
    text_origin = {}
    for s, size, name in syms:
        if any(b <= s < b + n for b, n, _ in code):
            o = origin(name)
            text_origin[o] = text_origin.get(o, 0) + size
    print("\nthe executable's code: %.2f MiB present of %.2f MiB; %d of %d 64 KiB blocks"
          " have a page present (%.1f present pages per such block)"
          % (len(code_pages) * PAGE / MIB, code_bytes / MIB, len(blocks), code_blocks,
             len(code_pages) / max(len(blocks), 1)))
    print("| origin (by symbol name) | code linked, MiB | present, MiB |")
    print("| --- | --- | --- |")
    for o, b in sorted(text_origin.items(), key=lambda kv: -kv[1]):
        print("| %s | %.2f | %.2f |" % (o, b / MIB, by_origin.get(o, 0) / MIB))
    if args.top:
        print("\nsymbols with the most present code (KiB):")
        for name, b in sorted(by_sym.items(), key=lambda kv: -kv[1])[:args.top]:
            print("  %7.1f  %s" % (b / 1024.0, name[:150]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"files": by_file, "sections": sec_pages, "origins": by_origin,
                       "code_pages": len(code_pages), "code_blocks": len(blocks),
                       "executable": exe, "present_pages": pages}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
