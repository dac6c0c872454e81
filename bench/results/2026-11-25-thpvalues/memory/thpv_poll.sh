#!/bin/bash
# Samples, every 0.5 s, the furrballs_server children of run.py PID $1:
# VMA count (/proc/PID/maps lines), Rss and AnonHugePages (kB) to $2.
parent=$1; out=$2
while kill -0 "$parent" 2>/dev/null; do
  for pid in $(pgrep -P "$parent" -x furrballs_serve 2>/dev/null; pgrep -P "$parent" furrballs_server 2>/dev/null | sort -u); do
    [ -r /proc/$pid/maps ] || continue
    vmas=$(wc -l < /proc/$pid/maps 2>/dev/null)
    rss=$(awk '/^Rss:/{print $2}' /proc/$pid/smaps_rollup 2>/dev/null)
    ahp=$(awk '/^AnonHugePages:/{print $2}' /proc/$pid/smaps_rollup 2>/dev/null)
    echo "$(date -u +%H:%M:%S.%N | cut -c1-12) pid=$pid vmas=$vmas rss_kb=$rss anonhuge_kb=$ahp" >> "$out"
  done
  sleep 0.5
done
