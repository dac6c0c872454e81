#!/usr/bin/env python3
"""Counts test cases in `go test -json` output: prints "PASSED FAILED".

Only leaf tests count (a test with subtests is the sum of its subtests, so
counting it too would count twice). A package that fails without a failing
test (a build error, a panic) counts as one failure. Skipped tests count as
neither. Every failing test's output is printed to stderr, so a CI log shows
why.
"""
import json
import sys


def main(path):
    results = {}   # (package, test) -> action
    output = {}    # (package, test) -> [lines]
    package_failed = set()
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            key = (event.get("Package", ""), event.get("Test"))
            action = event.get("Action")
            if action == "output":
                output.setdefault(key, []).append(event.get("Output", ""))
            elif action in ("pass", "fail", "skip"):
                if key[1] is None:
                    if action == "fail":
                        package_failed.add(key[0])
                else:
                    results[key] = action
    names = {key for key in results}
    leaves = [k for k in names
              if not any(o[0] == k[0] and o[1].startswith(k[1] + "/") for o in names)]
    passed = sum(1 for k in leaves if results[k] == "pass")
    failed = sum(1 for k in leaves if results[k] == "fail")
    for k in sorted(k for k in names if results[k] == "fail"):
        sys.stderr.write("   --- FAIL %s\n" % k[1])
        for text in output.get(k, []):
            if not text.startswith(("=== ", "--- ")):
                sys.stderr.write("   | " + text)
    for package in package_failed:
        if not any(k[0] == package and results[k] == "fail" for k in leaves):
            failed += 1
            sys.stderr.write("   --- FAIL package %s:\n" % package)
            for text in output.get((package, None), [])[-20:]:
                sys.stderr.write("   | " + text)
    print(passed, failed)


if __name__ == "__main__":
    main(sys.argv[1])
