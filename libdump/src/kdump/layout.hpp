// Where every part of a kdump file goes, from the list of pages alone
// (known before the first page is read): header, sub header, the two
// bitmaps, the descriptor table, the shared zero page, then the page data
// and, once the pages are written, the note area.
//
// Memory (issue 19): the lists are read a window at a time
// (PageSource::nr_entries(), read_entries()), the bitmaps written a chunk
// at a time; only a PV guest whose machine frames do not rise with its pfns
// holds its stored frames' bitmap (KeyRanks: 1.125 bits a machine frame up
// to the highest) to put each descriptor in its slot.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "io/sink.hpp"
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

// Writes the bitmap of `entries`' keys (layout.bitmap_size bytes) at `at`
// in `out`, a chunk at a time: one pass over the entries when their keys
// rise (`ascending`), else one per 1 MiB chunk. All-zero chunks are left
// as they are (zeros already).
void write_key_bitmap(io::Sink& out, uint64_t at, const KdumpLayout& layout, const PageSource& entries,
                      bool ascending);

// A PV guest's stored machine frames when they do not rise with the pfns:
// their bitmap in memory with the count of set bits before every 512, so
// that a page's descriptor slot (the rank of its frame) is known as it is
// written. Throws Error when two pfns share a frame.
class KeyRanks {
public:
    KeyRanks(const PageSource& stored, uint64_t max_mapnr);
    uint64_t rank(uint64_t gmfn) const;  // stored frames below gmfn
    std::span<const std::byte> bitmap() const { return std::as_bytes(std::span(words_)); }

private:
    std::vector<uint64_t> words_;   // bit k of word w: frame 64w + k
    std::vector<uint64_t> before_;  // set bits before word 8b
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
