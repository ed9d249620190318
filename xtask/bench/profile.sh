#!/usr/bin/env bash
# Samples (perf) pulsar-connect reading a pre-produced JSON topic into blackhole — the bench's
# "ours: pulsar(json, 1p) → blackhole" job — from its first row to its last, and the bare consumer on the same
# topic, and prints the top symbols of each. Used for "Where the time goes" in BENCHMARKS.md.
#
# usage: xtask/bench/profile.sh SERVICE_URL ADMIN_URL TOPIC ROWS [OUT_DIR]
#   TOPIC: a topic holding ROWS seed order rows as JSON (e.g. bench-json-1p-<run id> of a `cargo xtask bench` run)
# Needs perf, target/release/pulsar-connect, target/release/examples/bare_consumer and ./plugins (as after a bench).
set -euo pipefail
cd "$(dirname "$0")/../.."
service_url="$1"; admin_url="$2"; topic="$3"; rows="$4"; out="${5:-target/bench/profile-$(date +%s)}"
mkdir -p "$out"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$out/job.sql" <<SQL
SET 'execution.checkpointing.interval' = '10s';
CREATE TABLE src (order_id BIGINT, order_product_id BIGINT, order_customer_id BIGINT, order_status STRING) WITH ('connector' = 'pulsar', 'topic' = '$topic', 'service-url' = '$service_url', 'admin-url' = '$admin_url', 'format' = 'json', 'scan.startup.mode' = 'earliest');
CREATE TABLE sink (order_id BIGINT, order_product_id BIGINT, order_customer_id BIGINT, order_status STRING) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT * FROM src;
SQL
rows_in() { curl -s "http://127.0.0.1:$port/metrics" | awk '/^pulsar_connect_rows_in_total\{table="src"\}/ { print int($2) }'; }

target/release/pulsar-connect --plugin-dir plugins run "$out/job.sql" --state-dir "$out/state" --fresh \
  --metrics-addr "127.0.0.1:$port" 2> "$out/job.log" &
job=$!
# Start sampling once the job answers on its metrics port (start-up — plugin compilation — not sampled).
until [ -n "$(rows_in)" ]; do sleep 0.05; kill -0 $job; done
perf record -F 1999 -g -p $job -o "$out/ours.perf.data" 2> "$out/perf-ours.log" &
perf_pid=$!
until [ "$(rows_in)" -ge "$rows" ] 2>/dev/null; do sleep 0.05; kill -0 $job; done
kill -INT $perf_pid; wait $perf_pid || true
kill -TERM $job; wait $job || true

perf record -F 1999 -g -o "$out/bare.perf.data" -- \
  target/release/examples/bare_consumer "$service_url" "$topic" "$rows" > "$out/bare.json" 2> "$out/perf-bare.log"

for p in ours bare; do
  perf report -i "$out/$p.perf.data" --no-children -g none --sort dso,sym --stdio 2> /dev/null \
    | grep -v '^#' | grep -v '^$' | grep '%' | head -60 > "$out/$p.top.txt" || true
  echo "== $p: top symbols (self time) -> $out/$p.top.txt"
  head -30 "$out/$p.top.txt"
done
