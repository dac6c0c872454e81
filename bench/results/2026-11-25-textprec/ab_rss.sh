#!/bin/bash
# The A/B runs of README.md: where_rss.py (1 KiB) then run.py (64 B and
# 1 KiB), 3 rounds each, main and new interleaved, every binary evicted from
# the page cache before each start (evict.py).
# usage: ab_rss.sh MAIN_BIN_DIR NEW_BIN_DIR [where|fill|both]
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
main=$1; new=$2; what=${3:-both}
evict() { python3 "$here/evict.py" "$main/service/furrballs_server" "$new/service/furrballs_server"; }
if [ "$what" != fill ]; then
  for r in 1 2 3; do
    for v in main new; do
      dir=$main; [ $v = new ] && dir=$new
      evict
      python3 "$root/bench/memory/where_rss.py" --bin_dir="$dir" --value_bytes=1024 \
        --json="$here/where-$v-$r.json" > "$here/where-$v-$r.txt" 2>&1
      echo "where $v $r: $(grep -i 'file pages' "$here/where-$v-$r.txt" | head -1)"
    done
  done
fi
if [ "$what" != where ]; then
  for r in 1 2 3; do
    for v in main new; do
      dir=$main; [ $v = new ] && dir=$new
      evict
      python3 "$root/bench/memory/run.py" --bin_dir="$dir" --out_dir="$here/fill-$v-$r" \
        > "$here/fill-$v-$r.log" 2>&1
      echo "fill $v $r: done ($?)"
    done
  done
fi
