// A recovered pfn for every page of a page-list dump, and the check that makes
// a recovery acceptable (spec legacy-formats.md §A.1): every index MFN maps to
// exactly one pfn and no pfn twice.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace xendump::legacy {

// MFN -> slot of the index (entries of ~0 are not in it). An open-addressing
// table (linear probing, kept at most half full): recovering a page-list
// layout looks up millions of MFNs, each in one or two cache lines, where a
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

// pfn_of_slot[slot] for every index slot, ~0 for slots without a page.
struct PfnRecovery {
    std::vector<uint64_t> pfn_of_slot;
    std::string how;  // e.g. "p2m-tree:root-mfn=0x1234"
};

// Collects pfn->mfn pairs and judges them. `add` returns false when an MFN is
// seen for a second pfn; `complete` says whether every index MFN got a pfn.
class PfnCollector {
public:
    PfnCollector(const std::vector<uint64_t>& index, const MfnSlots& slots);
    // Records p2m[pfn] = mfn; mfns outside the index are ignored (not dumped).
    bool add(uint64_t pfn, uint64_t mfn);
    bool complete() const { return found_ == expected_; }
    uint64_t found() const { return found_; }
    uint64_t expected() const { return expected_; }
    std::string conflict() const { return conflict_; }
    std::vector<uint64_t> take() { return std::move(pfn_of_slot_); }

private:
    const MfnSlots& slots_;
    std::vector<uint64_t> pfn_of_slot_;
    uint64_t found_ = 0;
    uint64_t expected_ = 0;
    std::string conflict_;
};

}  // namespace xendump::legacy
