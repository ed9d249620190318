#!/usr/bin/env bash
# Regenerates the Flink golden vectors (formats and the print connector, vectors/print) into a temporary directory and compares them with the committed ones.
# Exit status: 0 = identical, 1 = they differ (the diff is printed), other = the generator failed.
# Needs Java 17 and Maven (Maven Central reachable, or a warm ~/.m2).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mvn -B -q -Dstyle.color=never -f "$here/flink-formats/pom.xml" compile exec:exec -Dgolden.out="$tmp/vectors"
if diff -r "$here/vectors" "$tmp/vectors"; then
  echo "golden vectors: up to date"
else
  echo "golden vectors: DIFFER from a fresh generation (see above); regenerate with" >&2
  echo "  mvn -B -q -f tests/golden/flink-formats/pom.xml compile exec:exec -Dgolden.out=\$PWD/tests/golden/vectors" >&2
  exit 1
fi
