// Where every part of a kdump file goes, from the list of pages alone
// (known before the first page is read): header, sub header, the two
// bitmaps, the descriptor table, the shared zero page, then the page data
// and, once the pages are written, the note area.
//
// Memory (issue 19): the lists are read a window at a time
// (PageSource::nr_entries(), read_entries()), the bitmaps written a chunk
// at a time; a PV guest whose machine frames do not rise with its pfns has
// its stored frames' bitmap made in a temporary file (KeyRanks), to put
// each descriptor in its slot, and keeps in memory only a count of set bits
// per 32768 frames (2 MiB at most).
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "io/sink.hpp"
#include "kdump/bitmap_on_disk.hpp"
#include "kdump/format.hpp"
#include "xendump/page_source.hpp"

namespace xendump::kdump {

// The frame a page is filed under in the bitmaps and the descriptor table:
// its pfn, or for a PV guest its machine frame (gmfn), so that crash reads
// the file as it reads a Xen dom0's kdump file, translating the guest's
// pseudo-physical addresses through the guest's own p2m (xen-dump-core(5)).
enum class Index { pfn, machine };
inline uint64_t key_of(const PageEntry& e, Index by) { return by == Index::machine ? e.gmfn : e.pfn; }

struct KdumpLayout {
    Index index = Index::pfn;
    uint64_t max_mapnr = 0;         // last key + 1
    uint64_t sub_header_offset = kBlockSize;
    uint64_t bitmap_offset = 0;     // the 1st bitmap; the 2nd follows it
    uint64_t bitmap_size = 0;       // of each bitmap, whole blocks
    uint64_t desc_offset = 0;       // PageDesc table, one per page
    uint64_t zero_page_offset = 0;  // the one stored zero page (raw), block-aligned
    uint64_t data_offset = 0;       // the other pages' data, in pfn order
    // The keys rise with the pfns (always for Index::pfn): the stored pages'
    // descriptors are in pfn order, and each bitmap is written in one pass.
    bool stored_ascending = true, present_ascending = true;

    uint32_t bitmap_blocks() const { return static_cast<uint32_t>(2 * bitmap_size / kBlockSize); }
};

// `present`: the pages that exist when `stored` (those stored) are a
// selection of them (a dump level); null: the same. Both are read in
// windows; their pfns must already be checked ascending.
KdumpLayout plan_kdump(const PageSource& stored, Index index, const PageSource* present = nullptr);

// The bitmap of `entries`' keys (layout.bitmap_size bytes) made a chunk at
// a time: put(lo, chunk) for every chunk (bytes [lo, lo + chunk.size()) of
// the bitmap) with a bit set, in order; one pass over the entries when
// their keys rise (`ascending`), else one per 1 MiB chunk. `twice`, when
// given, is called with an entry whose key an earlier entry set already.
void for_each_bitmap_chunk(const KdumpLayout& layout, const PageSource& entries, bool ascending,
                           const std::function<void(uint64_t lo, std::span<const std::byte> chunk)>& put,
                           const std::function<void(const PageEntry&)>& twice = {});

// Writes that bitmap at `at` in `out`. All-zero chunks are left as they
// are (zeros already). Returns the XXH3-128 of the whole bitmap
// (NT_XEN_KDUMP_HEAD, kdump/heads.hpp).
XXH128_canonical_t write_key_bitmap(io::Sink& out, uint64_t at, const KdumpLayout& layout, const PageSource& entries,
                      bool ascending);

// A PV guest's stored machine frames when they do not rise with the pfns:
// their bitmap, made a chunk at a time into an unnamed temporary file,
// sealed (io::SealedTempFile: no plaintext on disk) and read there through a small block cache with
// the count of set bits before every block of 32768 frames in memory
// (BitmapOnDisk): a page's descriptor slot (the rank of its frame) is known
// as it is written, and memory does not grow with the frames but for that
// count (8 bytes a block: 2 MiB at most, for the 2^33 frames a kdump bitmap
// can hold). Throws Error when two pfns share a frame.
class KeyRanks {
public:
    KeyRanks(const PageSource& stored, const KdumpLayout& layout);
    // Stored frames below `gmfn`, a stored frame. A frame next to the one
    // asked before (a run of frames, rising or falling) costs no look-up.
    uint64_t rank(uint64_t gmfn);
    // Writes the bitmap (layout.bitmap_size bytes) at `at` in `out`; as
    // write_key_bitmap, the chunks without a frame are left as they are,
    // and the bitmap's digest is returned.
    XXH128_canonical_t write_to(io::Sink& out, uint64_t at) const;

private:
    BitmapOnDisk bitmap_;
    uint64_t last_ = ~uint64_t{0}, last_rank_ = 0;  // the frame asked before, and its rank
};

// Entries of `source` read a window at a time as they are asked for, in
// any order (cheap when ascending).
class EntryCursor {
public:
    explicit EntryCursor(const PageSource& source) : source_(source), n_(source.nr_entries()) {}
    uint64_t size() const { return n_; }
    const PageEntry& at(uint64_t i);  // i < size()

private:
    const PageSource& source_;
    uint64_t n_, first_ = 0;
    std::vector<PageEntry> window_;
};

}  // namespace xendump::kdump
