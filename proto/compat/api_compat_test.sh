#!/usr/bin/env bash
# The shipped furrballs.v1 must satisfy its contract, and the checker must
# catch each kind of breaking change (a checker that cannot fail proves
# nothing): each mutation below is applied to a copy and must be rejected,
# while adding a field must pass.
#
# usage: api_compat_test.sh CHECKER PROTO CONTRACT
set -u
checker=$1 proto=$2 contract=$3
python=${FURRBALLS_PYTHON:-/usr/bin/python3}
protoc=$(command -v protoc)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

check() {  # name, expected exit (0 or 1), sed expression applied to a copy
  local name=$1 want=$2 expr=$3
  mkdir -p "$tmp/$name/furrballs/v1"
  sed -e "$expr" "$proto" >"$tmp/$name/furrballs/v1/furrballs.proto"
  if [ -n "$expr" ] && cmp -s "$proto" "$tmp/$name/furrballs/v1/furrballs.proto"; then
    echo "FAIL $name: the mutation did not apply"; fail=$((fail + 1)); return
  fi
  "$python" "$checker" "$protoc" "$tmp/$name/furrballs/v1/furrballs.proto" \
    "$contract" >"$tmp/$name.out" 2>&1
  local got=$?
  if [ "$got" -eq "$want" ]; then
    echo "ok   $name: $(tail -1 "$tmp/$name.out")"; pass=$((pass + 1))
  else
    echo "FAIL $name: exit $got, wanted $want"; cat "$tmp/$name.out"
    fail=$((fail + 1))
  fi
}

check shipped 0 ''
check add_field 0 's/^  uint64 ttl_remaining_ms = 4;/&\n  bool from_spill = 99;/'
check remove_field 1 '/^  uint64 ttl_remaining_ms = 4;/d'
check reserve_removed_field 0 's/^  uint64 ttl_remaining_ms = 4;/  reserved 4;/'
check change_type 1 's/^  uint64 ttl_remaining_ms = 4;/  int64 ttl_remaining_ms = 4;/'
check rename_field 1 's/^  uint64 ttl_remaining_ms = 4;/  uint64 ttl_left_ms = 4;/'
check renumber_enum 1 's/SET_IF_ABSENT = 1;/SET_IF_ABSENT = 3;/'
check change_rpc 1 's/rpc Get(GetRequest) returns (GetResponse);/rpc Get(stream GetRequest) returns (GetResponse);/'

echo "api_compat_test: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
