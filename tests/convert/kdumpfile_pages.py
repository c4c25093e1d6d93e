"""Reads pages of a converted dump with libkdumpfile (run by convert_test).

usage: kdumpfile_pages.py DUMP LIST OUT
LIST holds "PFN GMFN" lines; for each, the page at physical address PFN*4096
is appended to OUT, then (when GMFN differs from PFN: a PV guest) the page at
machine address GMFN*4096 too. The C++ test compares OUT with the guest.
"""
import sys

import kdumpfile

PAGE = 4096


def main():
    dump, list_path, out_path = sys.argv[1:4]
    k = kdumpfile.kdumpfile(dump)
    with open(out_path, 'wb') as out:
        for line in open(list_path):
            pfn, gmfn = (int(w) for w in line.split())
            out.write(k.read(kdumpfile.KDUMP_KPHYSADDR, pfn * PAGE, PAGE))
            if gmfn != pfn:
                out.write(k.read(kdumpfile.KDUMP_MACHPHYSADDR, gmfn * PAGE, PAGE))
    print(k.attr['file.format'])
    return 0


if __name__ == '__main__':
    sys.exit(main())
