#!/usr/bin/env python3
"""Writes host/link/symbol-order.txt: the functions pulsar-connect runs, for lld's --symbol-ordering-file.

Why: the kernel maps a file-backed page fault with its neighbours ("fault-around", ~64-128 KB here), so
the ~3 MB of code a job runs, spread over the binary's ~100 MB of .text, made ~47 MB of it resident.
Linked next to each other those functions take a few MB (docs/benchmarks-history.md, "Memory").

Input: callgrind outputs of representative runs made with `--demangle=no --compress-strings=no`
(xtask/bench/symbol-order.sh makes them). Output: the mangled names of every function that ran, in the
order callgrind first saw them (roughly start-up first), keeping only names the binary defines.

Usage: symbol_order.py <binary> <out.txt> <callgrind.out>...
"""

import subprocess
import sys


def defined_functions(binary):
    out = subprocess.run(
        ["nm", "--defined-only", binary], check=True, capture_output=True, text=True
    ).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            names.add(parts[2])
    return names


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    binary, out, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
    known = defined_functions(binary)
    seen = {}
    for run in runs:
        with open(run, encoding="utf-8", errors="replace") as f:
            for line in f:
                # `fn=` names a function that ran; `cfn=` a callee (it ran too).
                for prefix in ("fn=", "cfn="):
                    if line.startswith(prefix):
                        name = line[len(prefix):].strip()
                        if name in known and name not in seen:
                            seen[name] = len(seen)
    with open(out, "w", encoding="utf-8") as f:
        f.write("".join(name + "\n" for name in seen))
    print(f"{out}: {len(seen)} functions from {len(runs)} runs")


if __name__ == "__main__":
    main()
