"""Plans the format cases of ../cases/flink-formats.toml with Flink 1.18.1 itself and compares.

  python3 tests/conformance/flink/check.py

Needs Java 17+ and Maven (the jars are those of tests/golden/flink-formats/pom.xml, from Maven Central).
Each case's first CREATE TABLE is planned with connector 'probe' (src/probe/ProbeFactory.java: a source
builds the decoding format, a sink the encoding format, FactoryUtil validates every option, as the Pulsar
connectors' factories do) and the format options of the case. Cases with `differs` are expected to
disagree; cases with a key format are skipped (the probe has no key).
"""

import pathlib
import re
import subprocess
import sys
import tempfile
import tomllib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from peer_check import case_keys, compare  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def main():
    work = pathlib.Path(tempfile.mkdtemp(prefix="conformance-flink-"))
    cp_file = work / "cp.txt"
    subprocess.run(
        ["mvn", "-q", "dependency:build-classpath", f"-Dmdep.outputFile={cp_file}",
         "-f", str(ROOT / "tests/golden/flink-formats/pom.xml")],
        check=True,
    )
    cp = cp_file.read_text().strip()
    classes = work / "classes"
    sources = [str(p) for p in (HERE / "src").rglob("*.java")]
    subprocess.run(["javac", "-d", str(classes), "-cp", cp, *sources], check=True)
    (classes / "META-INF/services").mkdir(parents=True, exist_ok=True)
    (classes / "META-INF/services/org.apache.flink.table.factories.Factory").write_text(
        (HERE / "META-INF/services/org.apache.flink.table.factories.Factory").read_text())

    cases = tomllib.loads((ROOT / "tests/conformance/cases/flink-formats.toml").read_text())["case"]
    rows, expected = [], {}
    for c in cases:
        m = re.search(r"CREATE TABLE (\w+) \((.*?)\) WITH \((.*?)\);", c["sql"], re.S)
        table, cols, opts = m.groups()
        pairs = re.findall(r"('(?:[^']|'')*')\s*=\s*('(?:[^']|'')*')", opts)
        keep = [f"{k} = {v}" for k, v in pairs
                if k.strip("'").startswith(("format", "value.format", "json.", "csv.", "raw.", "key."))]
        if any(k.startswith("'key.") for k in keep):
            continue
        direction = "sink" if re.search(rf"INSERT INTO {table}\b", c["sql"]) else "source"
        rows.append("\t".join([c["name"], direction, " ".join(cols.split()), ", ".join(keep)]))
        expected[c["name"]] = (c["name"], c["expect"], "differs" in c, case_keys(c))
    tsv = work / "cases.tsv"
    tsv.write_text("\n".join(rows) + "\n")
    out = subprocess.run(["java", "-cp", f"{cp}:{classes}", "probe.FormatCheck", str(tsv)],
                         check=True, capture_output=True, text=True).stdout
    bad = compare(out, expected, "Flink 1.18.1", differs_must_disagree=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
