#!/usr/bin/env bash
# Regenerates host/link/symbol-order.txt (the functions pulsar-connect runs, for lld's
# --symbol-ordering-file; host/build.rs, BENCHMARKS.md "Memory") from two runs under callgrind:
# an idle datagen -> blackhole job (start-up) and a json read of <rows> rows from <topic> into blackhole.
# Run it after a change that moves much code (new dependencies, a toolchain or profile change), then
# rebuild pulsar-connect. Needs valgrind, a built binary and plugins, and a topic with json order rows
# (e.g. one the bench wrote).
#
# Usage: xtask/bench/symbol-order.sh <service-url> <admin-url> <topic> [rows (default 100000)]
set -euo pipefail
cd "$(dirname "$0")/../.."
service=$1 admin=$2 topic=$3 rows=${4:-100000}
bin=target/release/pulsar-connect
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cg=(valgrind --tool=callgrind --demangle=no --dump-instr=no --compress-strings=no)
cols="order_id BIGINT, order_product_id BIGINT, order_customer_id BIGINT, order_status STRING"
cat > "$work/idle.sql" <<SQL
CREATE TABLE gen ($cols) WITH ('connector' = 'datagen', 'rows-per-second' = '1');
CREATE TABLE sink ($cols) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT * FROM gen;
SQL
# Start-up and a few idle checkpoints (valgrind itself takes ~30 s to load the binary's debug info).
timeout -s INT 60 "${cg[@]}" --callgrind-out-file="$work/idle.out" \
  "$bin" --plugin-dir plugins run "$work/idle.sql" --state-dir "$work/state" --fresh >"$work/idle.log" 2>&1 || true
PC_WRAP="${cg[*]} --callgrind-out-file=$work/read.out" \
  python3 xtask/bench/memory.py "$bin" plugins "$service" "$admin" "$topic" "$rows" >/dev/null
sleep 2
python3 xtask/bench/symbol_order.py "$bin" host/link/symbol-order.txt "$work/idle.out" "$work/read.out"
