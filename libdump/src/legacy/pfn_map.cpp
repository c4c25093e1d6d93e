#include "legacy/pfn_map.hpp"

#include "legacy/hex.hpp"
#include "legacy/xc_core.hpp"

namespace xendump::legacy {

std::optional<DuplicateMfn> build_mfn_slots(const std::vector<uint64_t>& index, MfnSlots& out) {
    out.clear();
    out.reserve(index.size());
    for (uint64_t slot = 0; slot < index.size(); ++slot) {
        if (index[slot] == kInvalidEntry) continue;
        auto [it, inserted] = out.emplace(index[slot], slot);
        if (!inserted) return DuplicateMfn{index[slot], it->second, slot};
    }
    return std::nullopt;
}

PfnCollector::PfnCollector(const std::vector<uint64_t>& index, const MfnSlots& slots)
    : slots_(slots), pfn_of_slot_(index.size(), kInvalidEntry), expected_(slots.size()) {}

bool PfnCollector::add(uint64_t pfn, uint64_t mfn) {
    auto it = slots_.find(mfn);
    if (it == slots_.end()) return true;
    uint64_t& have = pfn_of_slot_[it->second];
    if (have != kInvalidEntry) {
        if (have == pfn) return true;
        conflict_ = "mfn " + hex(mfn) + " is mapped by pfn " + hex(have) + " and pfn " + hex(pfn);
        return false;
    }
    have = pfn;
    ++found_;
    return true;
}

}  // namespace xendump::legacy
