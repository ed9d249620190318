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

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def names_reason(chain, keys):
    """Whether the causes after the first (which lists the table's options) name one of `keys`, also
    without its format prefix or with '-' read as ' '."""
    reason = " | ".join(chain.split(" | ")[2:]).lower()
    for k in keys:
        k = k.lower()
        bare = k.split(".", 1)[1] if k.startswith(("json.", "csv.", "raw.")) else k
        if any(c in reason for c in (k, bare, bare.replace("-", " "))):
            return True
    return False


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
        keys = [n for n in c.get("names", []) if not n.startswith("table '")]
        expected[c["name"]] = (c["expect"], "differs" in c, keys)
    tsv = work / "cases.tsv"
    tsv.write_text("\n".join(rows) + "\n")
    out = subprocess.run(["java", "-cp", f"{cp}:{classes}", "probe.FormatCheck", str(tsv)],
                         check=True, capture_output=True, text=True).stdout
    bad = 0
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) < 2 or parts[0] not in expected:
            continue
        name, flink = parts[0], parts[1]
        want, differs, keys = expected[name]
        agree = (flink == "ok") == (want == "ok")
        # A refusal counts only when Flink's reason names what the case names (not another problem).
        if agree and want == "refused" and keys:
            agree = names_reason(parts[2], keys)
        if agree == differs:
            bad += 1
        mark = "differs" if differs else ("same" if agree else "MISMATCH")
        detail = parts[2][:160] if len(parts) > 2 else ""
        print(f"{mark:8} {name}: Flink {flink}, case expects {want} {detail}")
    print(f"{len(expected)} cases planned by Flink 1.18.1, {bad} not as the case file says")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
