"""Reads a compact (kdump) dump with libkdumpfile (run by kdump_interop_test).

usage: kdumpfile_pages.py DUMP RAW HOLES
Every page of the guest's RAM image RAW (page p at byte p*4096) must read
back equal by physical address, except the pfns HOLES ("first-last,...")
names, which must not be found. Prints one line per failure, exits 1 on any.
"""
import sys

import kdumpfile

PAGE = 4096


def main():
    dump, raw_path, holes_arg = sys.argv[1:4]
    holes = set()
    for part in filter(None, holes_arg.split(',')):
        first, last = (int(x, 0) for x in part.split('-'))
        holes.update(range(first, last + 1))
    k = kdumpfile.kdumpfile(dump)
    # As for makedumpfile's own files: physical addresses are the kernel's.
    k.attr['addrxlat.ostype'] = 'linux'
    failures = []
    if k.attr['file.format'] != 'diskdump':
        failures.append('file.format is %r, not diskdump' % k.attr['file.format'])
    checked = 0
    with open(raw_path, 'rb') as raw:
        pfn = 0
        while True:
            want = raw.read(PAGE)
            if len(want) < PAGE:
                break
            try:
                got = k.read(kdumpfile.KDUMP_KPHYSADDR, pfn * PAGE, PAGE)
                if pfn in holes:
                    failures.append('pfn %#x is a hole but was read' % pfn)
                elif got != want:
                    failures.append('pfn %#x: contents differ' % pfn)
                checked += 1
            except Exception as e:  # pylint: disable=broad-except
                if pfn not in holes:
                    failures.append('pfn %#x: %s: %s' % (pfn, type(e).__name__, e))
            pfn += 1
    for f in failures[:20]:
        print(f)
    print('checked %d pages, %d failures' % (checked, len(failures)))
    return 1 if failures or checked == 0 else 0


if __name__ == '__main__':
    sys.exit(main())
