#!/usr/bin/env bash
# The server binary links the system libraries it runs on from their
# archives (third_party/BUILD) and packs its relative relocations
# (service/BUILD): it loads only the shared libraries that have no archive
# in Debian, and the loader finds a DT_RELR table. Either one lost brings
# back megabytes of idle RSS (docs/build.md, "How the server links"). And
# the functions serving runs are laid out together (BOLT).
#
# usage: furrballs_server_link_test.sh SERVER_BINARY [laid_out|as_linked]
# laid_out (the default) where BOLT lays the server out (-c opt without
# --config=fuzz: tools/bolt/bolt.bzl), as_linked elsewhere.
set -u
usage="usage: furrballs_server_link_test.sh SERVER_BINARY [laid_out|as_linked]"
server=${1:?$usage}
layout=${2:-laid_out}
case "$layout" in
  laid_out | as_linked) ;;
  *)
    echo "$usage"
    exit 2
    ;;
esac

# Shared libraries the server may load: glibc and its loader, the C++
# runtime and prometheus-cpp (no archive in Debian).
allowed='^(ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libstdc\+\+\.so\.6|libgcc_s\.so\.1|libprometheus-cpp-(core|pull)\.so\.[0-9.]+)$'

dynamic=$(readelf --dynamic --wide "$server") || {
  echo "FAIL: readelf cannot read $server"
  exit 1
}
failed=0
needed=$(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' <<<"$dynamic")
if [ -z "$needed" ]; then
  echo "FAIL: no NEEDED entries in $server (is it dynamically linked at all?)"
  failed=1
fi
while read -r lib; do
  [ -z "$lib" ] && continue
  if [[ "$lib" =~ $allowed ]]; then
    echo "ok: loads $lib"
  else
    echo "FAIL: loads $lib, which third_party/BUILD should link from its archive"
    failed=1
  fi
done <<<"$needed"
if grep -q '(RELR)' <<<"$dynamic"; then
  echo "ok: relative relocations packed (DT_RELR)"
else
  echo "FAIL: no DT_RELR: the server is not linked with -z pack-relative-relocs"
  failed=1
fi
# The functions serving runs sit packed at the start of .text, the rest in
# .text.cold (BOLT, tools/bolt/bolt.bzl, with service/serving_functions.txt):
# without it, after a fill the server holds about 1.8 MiB more of its
# binary's pages (docs/memory_bench.md, "The server's code, laid out by
# function"). .bolt.org.text is where BOLT found the code; a list that no
# longer names the binary's functions (a dependency upgrade) leaves the
# packed .text nearly empty.
# The section table, read once: one line per section, "name address size
# flags" (address and size in hex; flags may be empty).
sections=$(readelf --section-headers --wide "$server" |
  sed -n 's/^ *\[ *[0-9]*\] \([^ ]*\) *[A-Z_0-9]* *\([0-9a-f]*\) [0-9a-f]* \([0-9a-f]*\) [0-9a-f]* *\([A-Z]*\) .*/\1 \2 \3 \4/p')
section_addr() { awk -v s="$1" '$1 == s { print $2 }' <<<"$sections"; }
section_size() { awk -v s="$1" '$1 == s { print $3 }' <<<"$sections"; }
packed=$(section_size .text)
bolted=$(section_size .bolt.org.text)
serving=$(section_size .text.serving)
min_packed=$((512 << 10))
max_packed=$((4 << 20))
min_serving=$((1 << 20))
if [ "$layout" = as_linked ]; then
  # Not laid out by BOLT (a sanitizer or fuzzing build): the linker script
  # (service/serving_sections.ld) still gathers serving's input sections.
  if [ -n "$serving" ] && [ $((16#$serving)) -ge $min_serving ]; then
    echo "ok: as linked; .text.serving holds $((16#$serving)) bytes"
  else
    echo "FAIL: .text.serving is ${serving:+0x}${serving:-missing}, under $min_serving bytes:" \
      "regenerate service/serving_sections.ld (bench/memory/serving_sections.py)"
    failed=1
  fi
elif [ -z "$bolted" ] || [ -z "$(section_size .text.cold)" ]; then
  echo "FAIL: no .bolt.org.text or .text.cold: the code was not laid out by BOLT" \
    "(//service:furrballs_server is a bolt_binary, in -c opt without --config=fuzz)"
  failed=1
elif [ -z "$packed" ] || [ $((16#$packed)) -lt $min_packed ] ||
  [ $((16#$packed)) -gt $max_packed ]; then
  echo "FAIL: the packed .text is ${packed:+0x}${packed:-missing}, not within" \
    "[$min_packed, $max_packed] bytes: regenerate service/serving_functions.txt" \
    "(bench/memory/serving_order.py)"
  failed=1
else
  echo "ok: serving's functions packed in .text ($((16#$packed)) bytes), the rest in .text.cold"
  # And the packed functions are serving's: the engine's Get and Set sit
  # in the packed .text (a list of the wrong functions of the right size
  # would still pass the size check above).
  text_start=$(section_addr .text)
  symbols=$(nm --defined-only "$server")
  for fn in _ZN9furrballs17furrball_internal9NodeShard3SetE \
    _ZN9furrballs17furrball_internal9NodeShard3GetE; do
    addr=$(awk -v p="$fn" '$2 ~ /^[TtWw]$/ && index($3, p) == 1 && $3 !~ /\.org\./ { print $1; exit }' <<<"$symbols")
    if [ -z "$addr" ]; then
      echo "FAIL: no function $fn* in $server"
      failed=1
    elif [ $((16#$addr)) -lt $((16#$text_start)) ] ||
      [ $((16#$addr)) -ge $((16#$text_start + 16#$packed)) ]; then
      echo "FAIL: $fn* is at 0x$addr, outside the packed .text: regenerate" \
        "service/serving_functions.txt (bench/memory/serving_order.py)"
      failed=1
    else
      echo "ok: $fn* is in the packed .text"
    fi
  done
fi
# Layout must not cost protection: every section of an executable segment
# is code. (.rodata.serving once followed .fini into the R E segment, 449 KiB
# of constants made executable; the script now page-aligns it, so it starts
# the read-only segment.) One exception: llvm-bolt-15 writes everything it
# rewrites into one new R E segment, the unwind tables and the jump tables
# it moved (.rodata.cold) with the code; these are read-only tables of the
# build, not data the server writes or receives.
bolt_tables='^(\.eh_frame|\.eh_frame_hdr|\.gcc_except_table|\.rodata\.cold)$'
exec_sections=$(readelf --segments --wide "$server" | awk '
  /^Program Headers:/ { headers = 1; next }
  /^ Section to Segment mapping:/ { headers = 0; mapping = 1; next }
  headers && /^  [A-Z]/ && !/^  Type/ { if ($0 ~ / R E /) exec[n] = 1; n++ }
  mapping && /^   [0-9]+ / { if (($1 + 0) in exec) { $1 = ""; print } }')
if [ -z "$exec_sections" ]; then
  echo "FAIL: no executable LOAD segment found in $server"
  failed=1
fi
for section in $exec_sections; do
  flags=$(awk -v s="$section" '$1 == s { print $4 }' <<<"$sections")
  if [[ "$flags" != *X* && ! ( "$section" =~ $bolt_tables && -n "$bolted" ) ]]; then
    echo "FAIL: $section (flags '${flags}') is in an executable segment"
    failed=1
  fi
done
[ "$failed" -ne 0 ] || echo "ok: the executable segment holds code only ($(wc -w <<<"$exec_sections") sections${bolted:+, the unwind and jump tables BOLT wrote included})"
if [ "$failed" -ne 0 ]; then
  echo "FAILED"
  exit 1
fi
echo "PASSED"
