#!/usr/bin/env python3
"""Counts test cases from one `bazel test` run.

Usage: count_tests.py SUMMARY_FILE TESTLOGS_DIR

SUMMARY_FILE is Bazel's console output with --test_summary=short, one line per
test target ("//pkg:target   PASSED in 0.3s", "FAILED", "FAILED TO BUILD",
"TIMEOUT", "NO STATUS", ...). For each target the cases are read from its
test.xml under TESTLOGS_DIR (gtest writes one; Bazel synthesizes one for
other tests). A target that did not pass and left no readable XML counts as
one failed case, so a build failure or crash is never silently dropped.

Prints "<passed> <failed>" on stdout and one line per failing target on stderr.
"""
import os
import re
import sys
import xml.etree.ElementTree as ET

STATUS = re.compile(
    r"^(//\S+)\s+(?:\(cached\)\s+)?"
    r"(PASSED|FAILED TO BUILD|FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE|SKIPPED)\b")


def xml_counts(path):
    """(cases, failed) from a JUnit XML file, or None if unreadable."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    cases = failed = 0
    for case in root.iter("testcase"):
        if case.get("status") == "notrun" or case.find("skipped") is not None:
            continue
        cases += 1
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
    return cases, failed


def main():
    summary, testlogs = sys.argv[1], sys.argv[2]
    passed = failed = 0
    with open(summary, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = STATUS.match(line.strip())
            if not m:
                continue
            label, status = m.groups()
            if status == "SKIPPED":
                continue
            pkg, _, name = label[2:].partition(":")
            counts = xml_counts(os.path.join(testlogs, pkg, name, "test.xml"))
            ok = status in ("PASSED", "FLAKY")
            if counts is None or counts[0] == 0:
                counts = (1, 0 if ok else 1)
            cases, bad = counts
            if not ok and bad == 0:
                bad = 1  # the target failed even if every case it ran passed
                cases = max(cases, 1)
            passed += cases - bad
            failed += bad
            if not ok:
                print(f"  failing: {label} ({status})", file=sys.stderr)
    print(passed, failed)


if __name__ == "__main__":
    main()
