// Recovering the pfn of every page of a page-list dump, and the check that
// makes a recovery acceptable (doc/legacy-formats.md 1.1): every index MFN
// maps to exactly one pfn and no pfn twice. MfnSlots is the in-memory table
// for small sets (the shape search's candidates); MfnIndex holds the whole
// index out of core (issue 19: nothing here is kept per page in memory).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "legacy/spill.hpp"
#include "legacy/xc_core.hpp"

namespace xendump::legacy {

// MFN -> slot (entries of ~0 are not in it), in memory: 32 to 64 bytes an
// entry, so only for sets that do not grow with the guest's pages (the
// shape search's candidates). An open-addressing table (linear probing,
// kept at most half full): each lookup in one or two cache lines, where a
// node-based map costs an allocation per entry and a pointer chase per lookup.
class MfnSlots {
public:
    // Room for `n` MFNs without growing.
    void reserve(size_t n);
    void clear();
    // Adds mfn -> slot, unless mfn is there already: then returns its slot
    // and changes nothing. ~0 (no frame) is never added.
    std::optional<uint64_t> insert(uint64_t mfn, uint64_t slot);
    std::optional<uint64_t> slot_of(uint64_t mfn) const;
    bool contains(uint64_t mfn) const { return slot_of(mfn).has_value(); }
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }

private:
    struct Cell {
        uint64_t mfn, slot;
    };
    size_t home(uint64_t mfn) const { return static_cast<size_t>((mfn * 0x9E3779B97F4A7C15ULL) >> shift_); }
    void rehash(size_t capacity);

    std::vector<Cell> cells_;  // mfn ~0: empty
    size_t size_ = 0;
    // The range of MFNs held: most words of a page that is not a p2m page
    // fall outside it and are refused without touching the table.
    uint64_t lowest_ = UINT64_MAX, highest_ = 0;
    unsigned shift_ = 64;
};

// Builds the map; returns the first duplicate as {first slot, second slot}.
struct DuplicateMfn {
    uint64_t mfn, first_slot, second_slot;
};
std::optional<DuplicateMfn> build_mfn_slots(const std::vector<uint64_t>& index, MfnSlots& out);

// The dumped MFNs, for the page-list recovery of a guest of any size: the
// index sorted by MFN in a RecordFile (on disk past 1 MiB) and a
// SparseBitmap of the MFNs for the membership test that the shape search
// makes for every word of every page. Memory: the bitmap's pages that hold
// a dumped frame (at most one bit per machine frame of the host: 32 MiB
// for 1 TiB of host) plus 8 bytes per 4096 entries; no part per page.
class MfnIndex {
public:
    struct Entry {
        uint64_t mfn, slot;
    };
    // Sorts the index by MFN (entries of ~0 left out). Returns the first
    // duplicate (the one whose second slot comes first) instead of an index.
    // Throws Error naming the entry's offset for an MFN past 2^40 (x86
    // machine addresses have at most 52 bits).
    static std::optional<DuplicateMfn> build(const IndexTable& index, MfnIndex& out);

    bool contains(uint64_t mfn) const { return present_.test(mfn); }
    // Binary search in the sorted file (a block cached): one thread at a time.
    std::optional<uint64_t> slot_of(uint64_t mfn) const;
    uint64_t size() const { return sorted_.size(); }
    bool empty() const { return sorted_.size() == 0; }
    // The entries in ascending MFN, from the start, a window at a time.
    RecordCursor<Entry> cursor() const { return RecordCursor<Entry>(sorted_, 0, sorted_.size(), 4096); }
    // A clear bitmap over the dumped MFNs' range (for PfnCheck).
    SparseBitmap frame_bitmap() const {
        return empty() ? SparseBitmap() : SparseBitmap(lowest_, highest_ - lowest_ + 1);
    }

private:
    static constexpr uint64_t kBlock = 4096;  // entries per fence
    SparseBitmap present_;
    RecordFile<Entry> sorted_;
    std::vector<uint64_t> fences_;  // first mfn of every kBlock entries
    uint64_t lowest_ = 0, highest_ = 0;
    mutable std::vector<Entry> block_;
    mutable uint64_t block_no_ = UINT64_MAX;
};

// How the pfns of a page-list dump were recovered, kept as the way to walk
// them again rather than as a table: walk(f) calls f(pfn, mfn) for every
// dumped MFN in ascending pfn order, once each (the recovery was checked).
struct PfnRecovery {
    std::function<void(const std::function<void(uint64_t pfn, uint64_t mfn)>&)> walk;
    std::string how;  // e.g. "p2m-tree:root-mfn=0x1234"
};

// Judges pfn->mfn pairs seen in ascending pfn order: `add` returns false
// when an MFN is seen for a second pfn; `complete` says whether every index
// MFN got a pfn. A bit per dumped MFN (`seen`, cleared first), and an
// XXH3-128 of the pairs that compares two recoveries.
class PfnCheck {
public:
    PfnCheck(const MfnIndex& slots, SparseBitmap& seen);
    // Records p2m[pfn] = mfn; mfns outside the index are ignored (not dumped).
    bool add(uint64_t pfn, uint64_t mfn);
    bool complete() const { return found_ == expected_; }
    uint64_t found() const { return found_; }
    uint64_t expected() const { return expected_; }
    // The MFN seen twice, and the second pfn (after add returned false).
    uint64_t twice_mfn() const { return twice_mfn_; }
    uint64_t twice_pfn() const { return twice_pfn_; }
    // The XXH3-128 of every pair added so far (ends the hash).
    std::pair<uint64_t, uint64_t> digest();

private:
    const MfnIndex& slots_;
    SparseBitmap& seen_;
    uint64_t found_ = 0, expected_ = 0;
    uint64_t twice_mfn_ = 0, twice_pfn_ = 0;
    std::vector<uint64_t> pending_;  // pairs not hashed yet
    std::shared_ptr<void> hash_;
};

// "mfn M is mapped by pfn A and pfn B", A found by walking again.
std::string conflict_text(const std::function<void(const std::function<void(uint64_t, uint64_t)>&)>& walk,
                          uint64_t mfn, uint64_t second_pfn);

}  // namespace xendump::legacy
