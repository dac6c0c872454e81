#!/bin/bash
# usage: monitor.sh OUTDIR: until OUTDIR/stop exists, attaches perf (mprotect,
# mmap and brk with call stacks) to every furrballs_server started from
# /tmp/arcrise-*, and when one's RSS passes 78 MiB takes its smaps, thread
# list and (gdb) malloc_info and backtraces once. perf.data is kept only for
# a server that passed 78 MiB.
R=$1; mkdir -p $R
declare -A perfpid caught
while [ ! -f $R/stop ]; do
  for pid in $(pgrep -f "^/tmp/arcrise-[a-z]*/service/furrballs_server"); do
    if [ -z "${perfpid[$pid]}" ]; then
      perf record -q -e syscalls:sys_enter_mprotect -e syscalls:sys_enter_mmap \
        -e syscalls:sys_enter_brk --call-graph dwarf,16384 -p $pid \
        -o $R/perf-$pid.data > /dev/null 2>&1 &
      perfpid[$pid]=$!
      tr '\0' ' ' < /proc/$pid/cmdline > $R/cmd-$pid 2>/dev/null
    fi
    rss=$(awk '/VmRSS/{print $2}' /proc/$pid/status 2>/dev/null)
    if [ -n "$rss" ] && [ "$rss" -gt 79872 ] && [ -z "${caught[$pid]}" ]; then
      caught[$pid]=1
      cp /proc/$pid/smaps $R/smaps-$pid 2>/dev/null
      echo "$(date -u +%T) pid $pid rss $rss" >> $R/caught.log
      gdb -p $pid -batch -nx -ex "set pagination off" \
        -ex "call (int)malloc_info(0, stderr)" -ex "thread apply all bt 30" \
        > $R/gdb-$pid.txt 2>&1
    fi
  done
  for pid in "${!perfpid[@]}"; do
    if [ ! -d /proc/$pid ]; then
      wait ${perfpid[$pid]} 2>/dev/null
      [ -z "${caught[$pid]}" ] && rm -f $R/perf-$pid.data $R/cmd-$pid
      unset "perfpid[$pid]"
    fi
  done
  sleep 0.1
done
