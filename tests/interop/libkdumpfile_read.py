"""Reads a v1 dump with libkdumpfile (run by interop_test in a child process).

usage: libkdumpfile_read.py DUMP EXPECT PAGES
EXPECT lines: "type pv|hvm|pvh", "page PFN GMFN" (in table order, matching
PAGES, the raw expected page contents) and "hole PFN" (must not be found).
Prints one line per failure and exits 1 when anything differs.
"""
import sys

import kdumpfile

PAGE = 4096
NOT_FOUND = ('NoDataException', 'AddressTranslationException')


def main():
    dump, expect_path, pages_path = sys.argv[1:4]
    k = kdumpfile.kdumpfile(dump)
    failures = []
    fmt = k.attr['file.format']
    if fmt != 'xc_core_elf':
        failures.append('file.format is %r, not xc_core_elf' % fmt)
    guest_type = None
    pages = open(pages_path, 'rb')
    checked = 0
    for line in open(expect_path):
        words = line.split()
        if words[0] == 'type':
            guest_type = words[1]
        elif words[0] == 'page':
            pfn, gmfn = int(words[1]), int(words[2])
            want = pages.read(PAGE)
            got = k.read(kdumpfile.KDUMP_KPHYSADDR, pfn * PAGE, PAGE)
            if got != want:
                failures.append('pfn %#x: contents differ (physical address)' % pfn)
            if guest_type == 'pv':
                got = k.read(kdumpfile.KDUMP_MACHPHYSADDR, gmfn * PAGE, PAGE)
                if got != want:
                    failures.append('gmfn %#x: contents differ (machine address)' % gmfn)
            checked += 1
        elif words[0] == 'hole':
            pfn = int(words[1])
            try:
                k.read(kdumpfile.KDUMP_KPHYSADDR, pfn * PAGE, PAGE)
                failures.append('pfn %#x is a hole but was read' % pfn)
            except Exception as e:  # pylint: disable=broad-except
                # "not in the dump": no data, or no translation for the address.
                if type(e).__name__ not in NOT_FOUND:
                    failures.append('pfn %#x: unexpected %s: %s' % (pfn, type(e).__name__, e))
    for f in failures[:20]:
        print(f)
    print('checked %d pages, %d failures' % (checked, len(failures)))
    return 1 if failures or checked == 0 else 0


if __name__ == '__main__':
    sys.exit(main())
