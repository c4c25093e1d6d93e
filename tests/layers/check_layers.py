#!/usr/bin/env python3
"""Checks the library's module layering from its #include lines.

Each rule names a module of libdump/src and the modules it may not import.
Prints every offending include as FILE:LINE and exits 1 if there is one.
usage: check_layers.py LIBDUMP_SRC_DIR
"""
import pathlib
import re
import sys

# module -> modules it must not include ("writer/" and "kdump/" are the two
# encoders; "elfcore/" holds what both use and sits below both).
FORBIDDEN = {
    "elfcore": {"writer", "kdump", "reader", "pipeline", "dump", "legacy", "daemon"},
    "writer": {"kdump"},
    "kdump": {"writer"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)/')


def offences(src: pathlib.Path):
    for module, banned in sorted(FORBIDDEN.items()):
        folder = src / module
        if not folder.is_dir():
            yield f"{folder}: the module is missing"
            continue
        for path in sorted(folder.rglob("*.[ch]pp")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                m = INCLUDE.match(line)
                if m and m.group(1) in banned:
                    yield f"{path}:{number}: {module}/ includes {m.group(1)}/ ({line.strip()})"


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    found = list(offences(pathlib.Path(sys.argv[1])))
    for f in found:
        print(f)
    print(f"{len(found)} include(s) against the layering")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
