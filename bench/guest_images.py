"""Inputs of the benchmarks of issues 18 and 19 that are files, not hosts.

write_xl_core: an `xl dump-core` file (spec legacy-formats.md section B, as
tests/convert/xl_elf_gen.cpp builds it) of a mostly-zero HVM guest of any
size, written as it goes and sparse: only the first pages hold data, the rest
of .xen_pages is a hole, so a 1 TiB guest costs its 8-byte-a-page .xen_pfn
table on disk.

vmcore_to_image: the raw memory image of a guest (pfn p at offset p*4096,
holes left as holes) and its present pfn ranges, from the plain ELF vmcore
`xen-dumpctl dump` writes of a dump (the project's reader does the reading:
any dump it opens, v1 or compact, can be turned into a simulated guest).
"""
import array
import os
import random
import sys
import struct

PAGE = 4096
_NO_PFN = 0xFFFFFFFFFFFFFFFF


def _note(ntype, desc):
    return struct.pack("<III", 4, len(desc), ntype) + b"Xen\0" + desc


def write_xl_core(path, nr_pages, data_pages=256, nr_vcpus=2, seed=5):
    """An xl dump-core file of an HVM guest with pfns 0 .. nr_pages-1, the
    first data_pages of them filled with seeded random bytes, the others zero
    (a hole in the file). Written to path + ".part", then renamed."""
    if sys.byteorder != "little" or array.array("Q").itemsize != 8:
        raise SystemExit("write_xl_core: needs a little-endian host with 8-byte array 'Q' items")
    ctx = 5168
    version = bytearray(1280)
    struct.pack_into("<QQ", version, 0, 4, 17)
    struct.pack_into("<Q", version, 1272, PAGE)
    notes = (_note(0x2000000, b"") + _note(0x2000001, struct.pack("<QQQQ", 0xF00FEBEE, nr_vcpus, nr_pages, PAGE)) +
             _note(0x2000002, bytes(version)) + _note(0x2000003, struct.pack("<Q", 1)))
    prstatus = bytes((i * 13) & 0xFF for i in range(ctx * nr_vcpus))
    shstr = b"\0.shstrtab\0.note.Xen\0.xen_prstatus\0.xen_pages\0.xen_pfn\0"
    shnum = 6
    off = 64 + shnum * 64
    shstr_at = off
    off = (off + len(shstr) + 7) & ~7
    notes_at = off
    pr_at = (notes_at + len(notes) + 7) & ~7
    pages_at = (pr_at + len(prstatus) + PAGE - 1) & ~(PAGE - 1)
    table_at = pages_at + nr_pages * PAGE
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    ehdr = ident + struct.pack("<HHIQQQIHHHHHH", 4, 62, 1, 0, 0, 64, 0, 64, 56, 0, 64, shnum, 1)

    def shdr(name, stype, at, size, entsize, align):
        return struct.pack("<IIQQQQIIQQ", name, stype, 0, 0, at, size, 0, 0, align, entsize)

    shdrs = (bytes(64) + shdr(1, 3, shstr_at, len(shstr), 0, 1) + shdr(11, 7, notes_at, len(notes), 0, 4) +
             shdr(21, 1, pr_at, len(prstatus), ctx, 8) + shdr(35, 1, pages_at, nr_pages * PAGE, PAGE, PAGE) +
             shdr(46, 1, table_at, nr_pages * 8, 8, 8))
    part = path + ".part"
    with open(part, "wb") as f:
        f.write(ehdr + shdrs)
        f.seek(shstr_at)
        f.write(shstr)
        f.seek(notes_at)
        f.write(notes)
        f.seek(pr_at)
        f.write(prstatus)
        rng = random.Random(seed)
        f.seek(pages_at)
        for _ in range(min(data_pages, nr_pages)):
            f.write(rng.randbytes(PAGE))
        f.seek(table_at)
        chunk = 1 << 20
        for first in range(0, nr_pages, chunk):
            n = min(chunk, nr_pages - first)
            f.write(array.array("Q", range(first, first + n)).tobytes())
        f.flush()
        os.fsync(f.fileno())
    os.rename(part, path)


def _load_segments(vmcore):
    """(paddr, offset, size) of every PT_LOAD of an ELF64 vmcore."""
    with open(vmcore, "rb") as f:
        eh = f.read(64)
        if eh[:4] != b"\x7fELF" or eh[4] != 2:
            raise SystemExit("%s: not an ELF64 file" % vmcore)
        phoff, = struct.unpack_from("<Q", eh, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", eh, 0x36)
        if phnum == 0xFFFF:  # PN_XNUM: the count is in section header 0's sh_info
            shoff, = struct.unpack_from("<Q", eh, 0x28)
            f.seek(shoff + 44)
            phnum, = struct.unpack("<I", f.read(4))
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    segs = []
    for i in range(phnum):
        ptype, _, offset, _, paddr, filesz, _, _ = struct.unpack_from("<IIQQQQQQ", table, i * phentsize)
        if ptype == 1 and filesz:
            if paddr % PAGE or filesz % PAGE:
                raise SystemExit("%s: PT_LOAD %d at paddr %#x, size %#x: not whole pages" % (vmcore, i, paddr, filesz))
            segs.append((paddr, offset, filesz))
    return segs


def vmcore_to_image(vmcore, image):
    """Writes the raw image of vmcore's PT_LOADs to image (sparse: all-zero
    MiB are skipped); returns ([[pfn, count], ...] merged, max pfn + 1)."""
    segs = _load_segments(vmcore)
    ranges = []
    zero = bytes(1 << 20)
    with open(vmcore, "rb") as src, open(image, "wb") as dst:
        for paddr, offset, size in sorted(segs):
            pfn, count = paddr // PAGE, size // PAGE
            if ranges and pfn <= ranges[-1][0] + ranges[-1][1]:
                end = max(ranges[-1][0] + ranges[-1][1], pfn + count)
                ranges[-1][1] = end - ranges[-1][0]
            else:
                ranges.append([pfn, count])
            done = 0
            while done < size:
                n = min(1 << 20, size - done)
                block = os.pread(src.fileno(), n, offset + done)
                if len(block) != n:
                    raise SystemExit("%s: PT_LOAD at offset %#x runs past the end of the file" % (vmcore, offset))
                if block != zero[:n]:
                    os.pwrite(dst.fileno(), block, paddr + done)
                done += n
        end = max((p + c for p, c in ranges), default=0)
        dst.truncate(end * PAGE)
    return ranges, end
