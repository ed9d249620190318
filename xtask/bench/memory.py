#!/usr/bin/env python3
"""Where a reading job's resident memory goes: runs `pulsar(json) -> blackhole` on a topic until every row
is read, then prints VmHWM and RSS by mapping (the binary's text / read-only / relocated data, heap and
anonymous memory, the plugins' code) from /proc/<pid>/smaps. docs/benchmarks-history.md, "Memory".

Usage: memory.py <pulsar-connect> <plugin-dir> <service-url> <admin-url> <topic> <rows> [<extra SET lines>]
Environment: PC_WRAP, a command to run the job under (`heaptrack -o FILE`, `valgrind --tool=callgrind ...`);
PC_HOLD, a command run with the job's pid once every row is read, before the job is stopped.
"""

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request


def mappings(pid):
    """(name, perms, rss kB, private dirty kB, size kB) per mapping."""
    out, cur = [], None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$", line)
            if m:
                size = (int(m.group(2), 16) - int(m.group(1), 16)) >> 10
                cur = [m.group(4) or "[anon]", m.group(3), 0, 0, size]
                out.append(cur)
            elif line.startswith("Rss:"):
                cur[2] = int(line.split()[1])
            elif line.startswith("Private_Dirty:"):
                cur[3] = int(line.split()[1])
    return out


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def main():
    if len(sys.argv) < 7:
        sys.exit(__doc__)
    binary, plugins, service, admin, topic, rows = sys.argv[1:7]
    extra = "\n".join(sys.argv[7:])
    port = 20000 + os.getpid() % 20000
    sql = f"""SET 'execution.checkpointing.interval' = '10s';
SET 'pipeline.name' = 'mem-{os.getpid()}-{int(time.time())}';
{extra}
CREATE TABLE src (order_id BIGINT, order_product_id BIGINT, order_customer_id BIGINT, order_status STRING) WITH ('connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{service}', 'admin-url' = '{admin}', 'format' = 'json', 'scan.startup.mode' = 'earliest');
CREATE TABLE sink (order_id BIGINT, order_product_id BIGINT, order_customer_id BIGINT, order_status STRING) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT * FROM src;
"""
    work = tempfile.mkdtemp(prefix="pc-mem-")
    job = os.path.join(work, "job.sql")
    with open(job, "w") as f:
        f.write(sql)
    env = dict(os.environ)
    wrap = os.environ.get("PC_WRAP", "").split()
    child = subprocess.Popen(
        wrap + [binary, "--plugin-dir", plugins, "run", job, "--state-dir", os.path.join(work, "state"),
         "--fresh", "--metrics-addr", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "job.log"), "w"), env=env,
        # Its own process group: the stop below reaches the job through a wrapper script (heaptrack).
        start_new_session=True)
    started, first = time.time(), None
    hwm_started, cpu_started = 0, 0.0
    try:
        while True:
            if child.poll() is not None:
                sys.exit(f"job exited early; log: {work}/job.log")
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
            except OSError:
                time.sleep(0.05)
                continue
            n = 0.0
            for line in body.splitlines():
                if line.startswith("pulsar_connect_rows_in_total") and 'table="src"' in line:
                    n = float(line.split()[-1])
            if n == 0:
                hwm_started = status(child.pid, "VmHWM")
                cpu_started = cpu_seconds(child.pid)
            elif first is None:
                first = time.time()
            if n >= int(rows):
                break
            time.sleep(0.02)
        took = time.time() - (first or started)
        pid = child.pid
        cpu = cpu_seconds(pid) - cpu_started
        maps = mappings(pid)
        groups = {}
        for name, perms, rss, dirty, _ in maps:
            if name == binary or name.endswith("/" + os.path.basename(binary)):
                key = f"binary {perms}"
            elif name.startswith("/") and ".so" in name:
                key = "shared libraries"
            elif name.startswith("/"):
                key = f"other files ({os.path.basename(name)[:30]})" if rss > 1024 else "other files"
            else:
                key = name
            g = groups.setdefault(key, [0, 0])
            g[0] += rss
            g[1] += dirty
        print(f"rows {rows} read in {took:.2f} s, {cpu:.2f} CPU-s; VmHWM before the first row {hwm_started / 1024:.1f} MB, "
              f"at the end {status(pid, 'VmHWM') / 1024:.1f} MB, VmRSS {status(pid, 'VmRSS') / 1024:.1f} MB "
              f"(anon {status(pid, 'RssAnon') / 1024:.1f}, file {status(pid, 'RssFile') / 1024:.1f}), "
              f"threads {status(pid, 'Threads')}")
        for key, (rss, dirty) in sorted(groups.items(), key=lambda kv: -kv[1][0]):
            if rss >= 256:
                print(f"  {rss / 1024:7.1f} MB  (private dirty {dirty / 1024:6.1f})  {key}")
        anon = sorted((m for m in maps if m[0] == "[anon]" and m[2] >= 512), key=lambda m: -m[2])
        print("  largest anonymous mappings (MB, perms): " + ", ".join(
            f"{m[2] / 1024:.1f} of {m[4] / 1024:.0f} {m[1]}" for m in anon[:12]))
    finally:
        if os.environ.get("PC_HOLD"):
            subprocess.run(os.environ["PC_HOLD"].split() + [str(child.pid)])
        os.killpg(child.pid, signal.SIGTERM)
        child.wait()


if __name__ == "__main__":
    main()
