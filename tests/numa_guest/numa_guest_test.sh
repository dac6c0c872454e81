#!/usr/bin/env bash
# tests/numa_guest/numa_guest_test.sh: boots a real multi-node NUMA Linux
# under QEMU (TCG) and checks Numatic inside it with numa_guest_probe.
#
#   numa_guest_test.sh --probe=PATH --migrate_probe=PATH --nodes=N
#       --cpus_per_node=C
#
# The guest is the host's Debian kernel plus an initramfs built here from
# busybox (static), the two probes and the shared libraries ldd names. Its
# /init runs the probe three times:
#   full     with every CPU and memory node;
#   taskset  under `taskset -c <CPUs of the last node>`: only that node may
#            remain, the others must be excluded and rejected;
#   cpuset   in a cgroup v2 cpuset whose cpuset.mems is node 0 (what a
#            Kubernetes pod with the Memory Manager gets): only node 0 may
#            remain although every CPU is allowed.
# Every line the probe prints is compared with what this script configured:
# node ids, CPUs per node, the distance matrix (20 + |i - j| between nodes),
# the node every page of each node's block is on (move_pages query), the
# node of hugetlb, transparent-huge (advised, written from another node) and
# PMR memory, GetCurrentNode of a pinned thread, where
# pages went after MovePages, and the one-line start-up summary
# (Topology::Summary: nodes, allowed CPUs, Mems_allowed, excluded nodes, the
# cgroup). A guest that does not power off within
# the timeout, a missing line or any mismatch fails the test.
#
# Then, with every node, numa_guest_migrate_probe once per search routing
# (round_robin, thread_local): a FurrBall with migrate_to_readers, keys
# written from a thread on the first node and read from one on the last
# until they moved (phase 1), then from one on node 1 (node 0 on 2 nodes)
# until they moved again (phase 2); after each phase every moved key's entry
# must be on the reader's node and every other key where it was, per
# move_pages(2). The host checks the probe's verdict and, from its figures
# line per phase, that nothing was misplaced or missing and that at least
# half the keys held off the reader's node moved.
#
# Writes one JUnit test case per check to $XML_OUTPUT_FILE when Bazel sets
# it. Needs qemu-system-x86, linux-image-amd64, busybox-static and cpio.
set -uo pipefail

probe=""
migrate_probe=""
nodes=2
cpus_per_node=1
memory_mib=1024
# Only a hung guest should reach it: a 2-node guest that takes 20 s on a
# quiet machine took 104 s at load 18 on the 2 shared cores (Bazel's medium
# timeout, 300 s, is the next bound).
timeout_s=240
for arg in "$@"; do
  case "$arg" in
    --probe=*) probe=${arg#*=} ;;
    --migrate_probe=*) migrate_probe=${arg#*=} ;;
    --nodes=*) nodes=${arg#*=} ;;
    --cpus_per_node=*) cpus_per_node=${arg#*=} ;;
    --memory_mib=*) memory_mib=${arg#*=} ;;
    --timeout_s=*) timeout_s=${arg#*=} ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done
name="numa_guest_${nodes}node"

passed=0
failed=0
cases=""
xml_escape() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g'; }
record() {  # record NAME OK [MESSAGE]
  local case_name message
  case_name=$(printf '%s' "$1" | xml_escape)
  if [ "$2" = ok ]; then
    passed=$((passed + 1))
    cases+="<testcase classname=\"$name\" name=\"$case_name\"/>"
  else
    failed=$((failed + 1))
    message=$(printf '%s' "${3:-}" | xml_escape)
    cases+="<testcase classname=\"$name\" name=\"$case_name\"><failure message=\"$message\"/></testcase>"
    echo "FAIL: $1: ${3:-}"
  fi
}
finish() {
  if [ -n "${XML_OUTPUT_FILE:-}" ]; then
    printf '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites><testsuite name="%s" tests="%d" failures="%d">%s</testsuite></testsuites>\n' \
      "$name" $((passed + failed)) "$failed" "$cases" >"$XML_OUTPUT_FILE"
  fi
  echo "$name: $passed checks passed, $failed failed"
  [ "$failed" -eq 0 ] && exit 0
  exit 1
}
die() { record "$1" fail "$2"; finish; }

# ---- What the guest needs ---------------------------------------------------

kernel=${NUMA_GUEST_KERNEL:-$(ls /boot/vmlinuz-*-amd64 2>/dev/null | sort -V | tail -n 1)}
[ -n "$kernel" ] && [ -r "$kernel" ] ||
  die setup "no readable kernel /boot/vmlinuz-*-amd64 (install linux-image-amd64)"
for tool in qemu-system-x86_64 cpio gzip ldd; do
  command -v "$tool" >/dev/null || die setup "$tool not found"
done
busybox=$(command -v busybox) || die setup "busybox not found (install busybox-static)"
ldd "$busybox" >/dev/null 2>&1 && die setup "$busybox is not static (install busybox-static)"
[ -x "$probe" ] || die setup "probe binary '$probe' is missing"
[ -x "$migrate_probe" ] ||
  die setup "migrate probe binary '$migrate_probe' is missing"

work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/numa_guest.XXXXXX")
trap 'rm -rf "$work"' EXIT
root="$work/root"
mkdir -p "$root"/{bin,proc,sys,dev,lib/guest}
cp "$busybox" "$root/bin/busybox"
for applet in sh mount cat echo mkdir poweroff taskset; do
  ln -s busybox "$root/bin/$applet"
done
cp -L "$probe" "$root/probe"
cp -L "$migrate_probe" "$root/migrate_probe"
# The dynamic loader must sit at the path compiled into the probes; every
# other library goes into one directory named by LD_LIBRARY_PATH, which
# takes precedence over the probes' $ORIGIN-relative RUNPATH.
while read -r lib; do
  case "$lib" in
    */ld-linux*) mkdir -p "$root$(dirname "$lib")"; cp -L "$lib" "$root$lib" ;;
    *) cp -L "$lib" "$root/lib/guest/" ;;
  esac
done < <(ldd "$probe" "$migrate_probe" | grep -o '^[[:space:]].*/[^ ]*' | grep -o '/[^ ]*' | sort -u)

last=$((nodes - 1))
range() { [ "$1" -eq "$2" ] && echo "$1" || echo "$1-$2"; }
node_cpus() { range $(($1 * cpus_per_node)) $(($1 * cpus_per_node + cpus_per_node - 1)); }
all_cpus=$(range 0 $((nodes * cpus_per_node - 1)))
online=$(range 0 "$last")

cat >"$root/init" <<EOF
#!/bin/sh
export PATH=/bin LD_LIBRARY_PATH=/lib/guest
mount -t proc proc /proc
mount -t sysfs sysfs /sys
echo "NUMATIC_GUEST_BOOTED online=\$(cat /sys/devices/system/node/online)"
for node in /sys/devices/system/node/node*; do
  echo 2 > \$node/hugepages/hugepages-2048kB/nr_hugepages
done
/probe --label=full
/migrate_probe --routing=round_robin
/migrate_probe --routing=thread_local
taskset -c $(node_cpus "$last") /probe --label=taskset
if mount -t cgroup2 none /sys/fs/cgroup &&
   echo +cpuset > /sys/fs/cgroup/cgroup.subtree_control &&
   mkdir /sys/fs/cgroup/mems0 &&
   echo 0 > /sys/fs/cgroup/mems0/cpuset.mems; then
  sh -c 'echo \$\$ > /sys/fs/cgroup/mems0/cgroup.procs && exec /probe --label=cpuset'
else
  echo "NUMATIC_GUEST_FAILURE cpuset could not create the cgroup"
fi
echo NUMATIC_GUEST_DONE
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initrd.gz" ||
  die setup "building the initramfs failed"

# ---- Boot -------------------------------------------------------------------

qemu=(qemu-system-x86_64 -accel tcg -cpu max -nodefaults -display none
  -monitor none -serial "file:$work/console.log" -no-reboot
  -m "${memory_mib}M"
  -smp "$((nodes * cpus_per_node)),sockets=$nodes,cores=$cpus_per_node,threads=1"
  -kernel "$kernel" -initrd "$work/initrd.gz"
  -append "console=ttyS0 quiet loglevel=1 panic=-1")
for ((k = 0; k < nodes; k++)); do
  qemu+=(-object "memory-backend-ram,id=m$k,size=$((memory_mib / nodes))M"
    -numa "node,nodeid=$k,cpus=$(node_cpus $k),memdev=m$k")
done
for ((i = 0; i < nodes; i++)); do
  for ((j = i + 1; j < nodes; j++)); do
    qemu+=(-numa "dist,src=$i,dst=$j,val=$((20 + j - i))")
  done
done

echo "booting $nodes-node guest: ${qemu[*]}"
start=$SECONDS
timeout "$timeout_s" "${qemu[@]}" </dev/null >"$work/qemu.out" 2>&1
rc=$?
tr -d '\r' <"$work/console.log" >"$work/guest.log" 2>/dev/null
echo "---- guest console ($((SECONDS - start)) s, qemu exit $rc) ----"
cat "$work/guest.log"
echo "----"
if [ "$rc" -eq 124 ]; then
  record boot fail "the guest did not power off within ${timeout_s} s"
elif [ "$rc" -ne 0 ]; then
  record boot fail "qemu exited with $rc: $(tail -n 5 "$work/qemu.out")"
elif ! grep -q '^NUMATIC_GUEST_BOOTED' "$work/guest.log"; then
  record boot fail "the guest never ran /init"
else
  record boot ok
fi
# Without a booted guest every other check would fail too; one failure
# that says why is clearer.
[ "$failed" -eq 0 ] || finish

# ---- Checks -----------------------------------------------------------------

expect() {  # expect CHECK_NAME EXACT_LINE
  if grep -qxF -- "$2" "$work/guest.log"; then
    record "$1" ok
  else
    local label=${2#NUMATIC_GUEST* }
    label=${label%% *}
    record "$1" fail "expected line '$2'; the guest printed: $(grep -E "^NUMATIC_GUEST(_RESULT)? $label " "$work/guest.log" | tr '\n' '|')"
  fi
}
expect_summary() {  # expect_summary CHECK_NAME LABEL PIECE...: the label's
  # summary line contains every piece (node sizes vary, so not the whole line)
  local check=$1 label=$2 line piece missing=""
  shift 2
  line=$(grep -m1 "^NUMATIC_GUEST $label summary=" "$work/guest.log")
  for piece in "$@"; do
    [[ "$line" == *"$piece"* ]] || missing+="'$piece' "
  done
  if [ -n "$line" ] && [ -z "$missing" ]; then
    record "$check" ok
  else
    record "$check" fail "missing ${missing:-the line}; the guest printed: ${line:-nothing}"
  fi
}
excluded_list() {  # "node a (reason), node b (reason)" for nodes $1..$2
  local out="" j
  for ((j = $1; j <= $2; j++)); do out+="node $j ($3), "; done
  echo "${out%, }"
}
distances() {  # the distance row of node $1 among nodes $2..$3
  local row="" j
  for ((j = $2; j <= $3; j++)); do
    if [ "$j" -eq "$1" ]; then row+="10,"; else row+="$((20 + (j > $1 ? j - $1 : $1 - j))),"; fi
  done
  echo "${row%,}"
}

expect sysfs_online "NUMATIC_GUEST_BOOTED online=$online"

expect full_topology "NUMATIC_GUEST full online=$online nodes=$online allowed_cpus=$all_cpus excluded= rejected=$nodes:NO_SUCH_NODE"
for ((k = 0; k < nodes; k++)); do
  expect "full_node$k" "NUMATIC_GUEST full node=$k cpus=$(node_cpus $k) distances=$(distances $k 0 "$last") memory=$k huge=hugetlb@$k thp=thp@$k pmr=$k pinned=$k/$k moved=$(((k + 1) % nodes))"
done
expect full_result "NUMATIC_GUEST_RESULT full failures=0"

expect taskset_topology "NUMATIC_GUEST taskset online=$online nodes=$last allowed_cpus=$(node_cpus "$last") excluded=$(range 0 $((last - 1))) rejected=0:NO_SUCH_NODE"
expect taskset_node "NUMATIC_GUEST taskset node=$last cpus=$(node_cpus "$last") distances=10 memory=$last huge=hugetlb@$last thp=thp@$last pmr=$last pinned=$last/$last moved=$last"
expect taskset_result "NUMATIC_GUEST_RESULT taskset failures=0"

expect cpuset_topology "NUMATIC_GUEST cpuset online=$online nodes=0 allowed_cpus=$all_cpus excluded=$(range 1 "$last") rejected=1:NO_SUCH_NODE"
expect cpuset_node "NUMATIC_GUEST cpuset node=0 cpus=$(node_cpus 0) distances=10 memory=0 huge=hugetlb@0 thp=thp@0 pmr=0 pinned=0/0 moved=0"
expect cpuset_result "NUMATIC_GUEST_RESULT cpuset failures=0"

# The one-line start-up summary names the nodes, their source and the
# cgroup for each restriction (before /init mounts cgroup2 the guest has no
# cgroup to name).
full_nodes=""
for ((k = 0; k < nodes; k++)); do full_nodes+="node $k: CPUs $(node_cpus $k) ($cpus_per_node), "; done
expect_summary full_summary full "numa: serving node(s) $online of $online online (${full_nodes%%, *}," \
  "); allowed CPUs $all_cpus ($((nodes * cpus_per_node))), Mems_allowed $online; cgroup "
expect_summary taskset_summary taskset \
  "numa: serving node(s) $last of $online online (node $last: CPUs $(node_cpus "$last") ($cpus_per_node), " \
  "); allowed CPUs $(node_cpus "$last") ($cpus_per_node), Mems_allowed $online; excluded $(excluded_list 0 $((last - 1)) "no allowed CPUs"); cgroup "
expect_summary cpuset_summary cpuset \
  "numa: serving node(s) 0 of $online online (node 0: CPUs $(node_cpus 0) ($cpus_per_node), " \
  "); allowed CPUs $all_cpus ($((nodes * cpus_per_node))), Mems_allowed 0; excluded $(excluded_list 1 "$last" "memory not allowed"); cgroup /mems0"

# The migration probes: their verdict, and their figures checked here too.
check_migrate() {  # check_migrate ROUTING
  local label="migrate_$1" phase reader line field value problems
  expect "${label}_result" "NUMATIC_GUEST_RESULT $label failures=0"
  for phase in 1 2; do
    # Phase 1 reads from the last node, phase 2 from node 1 (node 0 on a
    # 2-node guest).
    if [ "$phase" -eq 1 ]; then reader=$last; elif [ "$nodes" -gt 2 ]; then reader=1; else reader=0; fi
    line=$(grep -m1 "^NUMATIC_GUEST $label phase=$phase " "$work/guest.log")
    if [ -z "$line" ]; then
      record "${label}_phase${phase}" fail "no figures line from the probe"
      continue
    fi
    declare -A got=()
    for field in $line; do
      [[ "$field" == *=* ]] && got[${field%%=*}]=${field#*=}
    done
    problems=""
    [ "${got[nodes]:-}" = "$online" ] || problems+="nodes=${got[nodes]:-?} (want $online); "
    [ "${got[writer]:-}" = 0 ] || problems+="writer=${got[writer]:-?} (want 0); "
    [ "${got[reader]:-}" = "$reader" ] || problems+="reader=${got[reader]:-?} (want $reader); "
    [ "${got[checked]:-}" = "${got[keys]:-x}" ] || problems+="checked ${got[checked]:-?} of ${got[keys]:-?} keys; "
    [ "${got[misplaced]:-}" = 0 ] || problems+="misplaced=${got[misplaced]:-?}; "
    [ "${got[missing]:-}" = 0 ] || problems+="missing=${got[missing]:-?}; "
    value=${got[movable]:-0}
    if ! [ "$value" -gt 0 ] 2>/dev/null || ! [ $((2 * ${got[moved]:-0})) -ge "$value" ]; then
      problems+="moved=${got[moved]:-?} of movable=$value (want at least half); "
    fi
    unset got
    if [ -z "$problems" ]; then
      record "${label}_phase${phase}" ok
    else
      record "${label}_phase${phase}" fail "${problems%; }; the guest printed: $line"
    fi
  done
}
check_migrate round_robin
check_migrate thread_local

if grep -q '^NUMATIC_GUEST_FAILURE' "$work/guest.log"; then
  record probe_self_checks fail "$(grep '^NUMATIC_GUEST_FAILURE' "$work/guest.log" | tr '\n' '|')"
else
  record probe_self_checks ok
fi
expect guest_finished "NUMATIC_GUEST_DONE"
finish
