#!/usr/bin/env bash
# Runs the Flink peer's four example jobs against a broker and writes one JSON report per job.
# usage: bench/flink-peer/run-all.sh SERVICE_URL [ROWS=1000000] [OUT_DIR=bench/flink-peer/results/latest]
# Needs: java 17, maven (to build the jar once), and PYTHON (default /work/main/.venv/bin/python) with pulsar-client.
# Topics get a fresh suffix per invocation, so runs never see each other's data or subscriptions.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
service_url="$1"; rows="${2:-1000000}"; out="${3:-$here/results/latest}"
python="${PYTHON:-/work/main/.venv/bin/python}"
jar="$here/target/flink-peer.jar"
[ -f "$jar" ] || mvn -B -q -f "$here/pom.xml" package
mkdir -p "$out"
run="$(date +%s)"
json_topic="persistent://public/default/flink-peer-json-$run"
avro_topic="persistent://public/default/flink-peer-avro-$run"
sink_topic="persistent://public/default/flink-peer-sink-$run"
peer() { java -Xmx512m -jar "$jar" --service-url "$service_url" --timeout 900 "$@"; }

echo "== produce $rows JSON order rows (python client) to $json_topic"
"$python" "$here/produce_orders.py" "$service_url" "$json_topic" "$rows"
echo "== produce $rows Avro order rows (Flink datagen -> avro -> pulsar) to $avro_topic"
peer --sql "$here/jobs/datagen-json-pulsar.sql" --topic "$avro_topic" --var FORMAT=avro --var ROWS="$rows" --report "$out/produce-avro.json" >/dev/null

echo "== pulsar(json) -> blackhole";  peer --sql "$here/jobs/pulsar-json-blackhole.sql" --topic "$json_topic" --expect "$rows" --report "$out/pulsar-json-blackhole.json" >/dev/null
echo "== pulsar(avro) -> blackhole";  peer --sql "$here/jobs/pulsar-avro-blackhole.sql" --topic "$avro_topic" --expect "$rows" --report "$out/pulsar-avro-blackhole.json" >/dev/null
echo "== pulsar(raw) -> blackhole";   peer --sql "$here/jobs/pulsar-raw-blackhole.sql" --topic "$json_topic" --expect "$rows" --report "$out/pulsar-raw-blackhole.json" >/dev/null
echo "== datagen -> json -> pulsar";  peer --sql "$here/jobs/datagen-json-pulsar.sql" --topic "$sink_topic" --var ROWS="$rows" --report "$out/datagen-json-pulsar.json" >/dev/null

printf '%-26s %9s %12s %14s %12s %10s\n' job rows "rows/s" "rows/s(steady)" "cpu-s/1M" "peakRSS MB"
for f in pulsar-json-blackhole pulsar-avro-blackhole pulsar-raw-blackhole datagen-json-pulsar; do
  "$python" - "$out/$f.json" "$f" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:<26} {r['rows']:>9} {r['rows_per_second']:>12} {r['rows_per_second_from_first_row']:>14} {r['cpu_seconds_per_million_rows']:>12} {r['peak_rss_mb']:>10}  ({r['outcome']})")
PY
done
