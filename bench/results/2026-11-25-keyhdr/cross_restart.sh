#!/usr/bin/env bash
# Warm restarts across the two entry layouts: main's server writes keys and
# stops gracefully (spilling every page), the branch's server starts on the
# same --data_dir and reads them, writes one more and stops, and main's
# reads all of them again. PageBlobs hold the portable form (entry.h), so
# both ways must work. Usage: cross_restart.sh BIN_ROOT CLI OUT_DIR
set -u
B=$1 CLI=$2 OUT=$3
DATA=$(mktemp -d)
T=--target=127.0.0.1:50871
LONG=$(head -c 250 /dev/zero | tr '\0' 'K')
start() {
  "$B/$1/service/furrballs_server" --listen_address=127.0.0.1:50871 \
    --metrics_address= --memory_mb=64 --spill --data_dir="$DATA" \
    > "$OUT/cross_$2.log" 2>&1 &
  PID=$!
  for _ in $(seq 100); do
    "$CLI" $T get no-such-key >/dev/null 2>&1; [ $? -ne 3 ] && return; sleep 0.1
  done
  echo "$1 did not start"; exit 1
}
stop() { kill -TERM "$PID"; while kill -0 "$PID" 2>/dev/null; do sleep 0.1; done; }
value() { printf 'value-%s-%0*d' "$1" $(( $1 * 40 )) 0; }
start main main1
for i in 1 2 3; do "$CLI" $T set "key-$i" "$(value $i)" >/dev/null; done
"$CLI" $T set "$LONG" "long-key-value" >/dev/null
stop
start keyhdr keyhdr
for i in 1 2 3; do
  [ "$("$CLI" $T get "key-$i")" = "$(value $i)" ] && echo "keyhdr reads main's key-$i: ok" || echo "keyhdr reads main's key-$i: WRONG"
done
[ "$("$CLI" $T get "$LONG")" = "long-key-value" ] && echo "keyhdr reads main's 250-byte key: ok" || echo "keyhdr reads main's 250-byte key: WRONG"
"$CLI" $T set key-4 "$(value 4)" >/dev/null
stop
start main main2
for i in 1 2 3 4; do
  [ "$("$CLI" $T get "key-$i")" = "$(value $i)" ] && echo "main reads key-$i after keyhdr: ok" || echo "main reads key-$i after keyhdr: WRONG"
done
stop
rm -rf "$DATA"
