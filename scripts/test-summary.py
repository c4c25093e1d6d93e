#!/usr/bin/python3
"""Counts GoogleTest cases from meson's JUnit log and prints 'N passed, N failed'."""
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


def main(path):
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
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)

if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build/meson-logs/testlog.junit.xml")
