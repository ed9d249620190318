"""Plans the validate cases of ../cases/streamnative-pulsar-flink.toml with StreamNative's connector itself
(io.streamnative.connectors:pulsar-flink-connector-origin 1.13.6.2 on Flink 1.13.6, from Maven Central)
and compares Flink's answer with each case's `expect`.

  python3 tests/conformance/streamnative/check.py

Needs Java 17 and Maven. `settings.xml` sends every repository to Maven Central (the connector's pom names
a retired one); `pulsar-client-all` 2.8.4 replaces 2.8.3, which is not on Central. Planning runs the
factories' validation only: what SN refuses later (at open, or in the Pulsar client) shows as accepted
here, and the case's `fact` says so. Cases with `differs` are listed, not judged (their difference may
only show when the job runs).
"""

import pathlib
import subprocess
import sys
import tempfile
import tomllib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from peer_check import case_keys, compare  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PLACEHOLDERS = {
    "{service_url}": "pulsar://localhost:6650",
    "{admin_url}": "http://localhost:8080",
    "{topic}": "persistent://public/default/conformance-check",
    "{short}": "conformance-check",
}
# Java 17 runs Flink 1.13 with its internals opened.
OPENS = [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in
         ("java.lang", "java.util", "java.lang.reflect", "java.io", "java.nio", "java.net", "java.text",
          "java.util.concurrent", "java.time", "sun.nio.ch")]


def main():
    work = pathlib.Path(tempfile.mkdtemp(prefix="conformance-sn-"))
    cp_file = work / "cp.txt"
    subprocess.run(["mvn", "-q", "-s", str(HERE / "settings.xml"), "dependency:build-classpath",
                    f"-Dmdep.outputFile={cp_file}", "-f", str(HERE / "pom.xml")], check=True)
    cp = cp_file.read_text().strip()
    classes = work / "classes"
    subprocess.run(["javac", "-d", str(classes), "-cp", cp, *map(str, (HERE / "src").rglob("*.java"))],
                   check=True)
    cases = tomllib.loads((ROOT / "tests/conformance/cases/streamnative-pulsar-flink.toml").read_text())["case"]
    jobs = work / "jobs"
    jobs.mkdir()
    expected = {}
    for c in cases:
        sql = c["sql"]
        for k, v in PLACEHOLDERS.items():
            sql = sql.replace(k, v)
        (jobs / f"{c['name']}.sql").write_text(sql)
        expected[f"{c['name']}.sql"] = (c["name"], c["expect"], "differs" in c, case_keys(c))
    out = subprocess.run(["java", *OPENS, "-cp", f"{cp}:{classes}", "sncheck.SnCheck", str(jobs)],
                         check=True, capture_output=True, text=True).stdout
    bad = compare(out, expected, "StreamNative 1.13.6.2", differs_must_disagree=False)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
