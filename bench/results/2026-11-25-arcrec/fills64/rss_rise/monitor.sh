#!/bin/bash
# Dumps the smaps of an arcrec/main furrballs_server whose RSS passes 76 MiB (once per pid).
while [ ! -f /tmp/arcrec-monitor.stop ]; do
  for pid in $(pgrep -f "arcrec-(new|main)/service/furrballs_server"); do
    rss=$(awk '/VmRSS/{print $2}' /proc/$pid/status 2>/dev/null)
    if [ -n "$rss" ] && [ "$rss" -gt 77824 ] && [ ! -f /tmp/arcrec-mon-$pid.smaps ]; then
      cp /proc/$pid/smaps /tmp/arcrec-mon-$pid.smaps 2>/dev/null
      cat /proc/$pid/status > /tmp/arcrec-mon-$pid.status 2>/dev/null
      cat /proc/$pid/cmdline | tr '\0' ' ' > /tmp/arcrec-mon-$pid.cmd
      ls /proc/$pid/task | wc -l >> /tmp/arcrec-mon-$pid.status
      echo "$(date -u +%T) pid $pid rss $rss" >> /tmp/arcrec-mon.log
    fi
  done
  sleep 0.1
done
