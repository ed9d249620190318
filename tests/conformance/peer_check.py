"""Shared by flink/check.py and streamnative/check.py: compares what a peer answered for each case with
the case's `expect`."""


def case_keys(case):
    """The names a refusal must be about: the case's `names` except the table."""
    return [n for n in case.get("names", []) if not n.startswith("table '")]


def names_reason(chain, keys):
    """Whether the causes after the first (which lists the table's options) name one of `keys`, also
    without a format prefix or with '-' read as ' '."""
    reason = " | ".join(chain.split(" | ")[2:]).lower()
    for k in keys:
        k = k.lower()
        bare = k.split(".", 1)[1] if k.startswith(("json.", "csv.", "raw.")) else k
        if any(c in reason for c in (k, bare, bare.replace("-", " "))):
            return True
    return False


def compare(output, expected, peer, differs_must_disagree):
    """`output`: lines `id TAB ok|refused [TAB cause | cause ...]`; `expected`: id -> (case name,
    expect, differs, keys). Prints one line per case; returns how many disagree with their case file.
    A refusal counts only when its reason names what the case names (not another problem)."""
    bad = 0
    for line in output.splitlines():
        parts = line.split("\t")
        if len(parts) < 2 or parts[0] not in expected:
            continue
        name, want, differs, keys = expected[parts[0]]
        chain = parts[2] if len(parts) > 2 else ""
        agree = (parts[1] == "ok") == (want == "ok")
        if agree and want == "refused" and keys and not differs:
            agree = names_reason(chain, keys)
        if (agree == differs) if differs_must_disagree else (not agree and not differs):
            bad += 1
        mark = "differs" if differs else ("same" if agree else "MISMATCH")
        print(f"{mark:8} {name}: {peer} {parts[1]}, case expects {want} {chain.split(' | ')[-1][:240]}")
    print(f"{len(expected)} cases checked with {peer}, {bad} not as the case file says")
    return bad
