// A recovered pfn for every page of a page-list dump, and the check that makes
// a recovery acceptable (spec legacy-formats.md §A.1): every index MFN maps to
// exactly one pfn and no pfn twice.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace xendump::legacy {

// MFN -> slot of the index (entries of ~0 are not in it).
using MfnSlots = std::unordered_map<uint64_t, uint64_t>;

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
