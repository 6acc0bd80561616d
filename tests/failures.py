#!/usr/bin/env python3
"""Prints why each failing test failed, from a saved `cargo test` output.

cargo prints a failing test's panic in the middle of a workspace run
(after its own binary, before the other crates' tests), where a CI log cut
to its head and tail never shows it. `make test` calls this last, so the
reason for each failure is the last thing printed.

Usage: failures.py OUTPUT_FILE
"""

import re
import sys

LINES_PER_TEST = 14
SECTION = re.compile(r"^---- (\S+) stdout ----$")


def sections(lines):
    """(test name, its captured output) for each `---- name stdout ----`."""
    name, body = None, []
    for line in lines:
        m = SECTION.match(line)
        if m or (name and line in ("failures:", "successes:")):
            if name:
                yield name, body
            name, body = (m.group(1), []) if m else (None, [])
        elif name:
            body.append(line)
    if name:
        yield name, body


def reason(body):
    """The panic and its message (no backtrace); the start of the output
    without one."""
    start = next((i for i, l in enumerate(body) if "panicked at" in l), 0)
    end = next((i for i, l in enumerate(body) if i > start and l.startswith("stack backtrace:")), len(body))
    kept = [l[:400] for l in body[start:end] if l.strip() and not l.startswith("note: run with")]
    return kept[:LINES_PER_TEST]


def main():
    with open(sys.argv[1], errors="replace") as f:
        lines = f.read().splitlines()
    failed = sections(lines)
    print("\n==== why each test failed (from " + sys.argv[1] + ") ====")
    for name, body in failed:
        print(f"-- {name}")
        for line in reason(body):
            print("   " + line)


if __name__ == "__main__":
    main()
