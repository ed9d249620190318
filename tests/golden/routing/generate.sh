#!/usr/bin/env bash
# Regenerates tests/golden/routing/vectors.json from the Java implementations (pulsar-client 4.0.7, Guava).
# With --check: regenerate into a temporary file and fail if it differs from the committed one.
set -euo pipefail
cd "$(dirname "$0")"
mvn -B -q -Dstyle.color=never compile dependency:build-classpath -Dmdep.outputFile=target/classpath.txt
out=vectors.json
if [ "${1:-}" = "--check" ]; then out=$(mktemp); fi
java -cp "target/classes:$(cat target/classpath.txt)" dev.pulsarconnect.routing.RoutingVectors > "$out"
if [ "${1:-}" = "--check" ]; then
  diff -q vectors.json "$out" >/dev/null || { echo "routing vectors are stale: run tests/golden/routing/generate.sh"; exit 1; }
  echo "routing vectors are current"
fi
