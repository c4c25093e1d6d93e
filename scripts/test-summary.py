#!/usr/bin/python3
"""Counts GoogleTest cases from meson's JUnit log and prints 'N passed, N failed'.

usage: test-summary.py JUNIT_XML [EXTRA_PASSED EXTRA_FAILED]  (the extras count
checks run outside meson: the fuzz targets, the Xen lab's guests and service,
the Debian packages of scripts/build-deb)."""
import sys
import xml.etree.ElementTree as ET

def meson_failures(junit_path):
    """Meson tests that failed as a whole (a crash, a failing SetUpTestSuite,
    a timeout) may leave no failed <testcase> behind: count them from
    testlog.json so that a failure is never hidden."""
    import json, os
    log = os.path.join(os.path.dirname(junit_path), "testlog.json")
    failed = 0
    try:
        with open(log) as f:
            for line in f:
                if json.loads(line).get("result") in ("FAIL", "TIMEOUT", "ERROR", "UNEXPECTEDPASS"):
                    failed += 1
    except OSError:
        pass
    return failed


def main(path, extra_passed=0, extra_failed=0):
    root = ET.parse(path).getroot()
    passed = failed = skipped = 0
    # meson writes one <testsuite> per gtest executable (its <testcase>s are the
    # gtest cases) and one <testsuite> for plain tests.
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
    failed = max(failed, meson_failures(path))
    passed += extra_passed
    failed += extra_failed
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)

if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0] if args else "build/meson-logs/testlog.junit.xml",
         int(args[1]) if len(args) > 1 else 0, int(args[2]) if len(args) > 2 else 0)
