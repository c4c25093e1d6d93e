#include "legacy/pfn_map.hpp"

#include <algorithm>
#include <bit>

#include "legacy/hex.hpp"
#include "legacy/xc_core.hpp"

namespace xendump::legacy {

void MfnSlots::rehash(size_t capacity) {
    std::vector<Cell> old = std::move(cells_);
    cells_.assign(capacity, Cell{kInvalidEntry, 0});
    shift_ = 64 - static_cast<unsigned>(std::countr_zero(capacity));
    size_ = 0;
    for (const Cell& c : old)
        if (c.mfn != kInvalidEntry) insert(c.mfn, c.slot);
}

void MfnSlots::reserve(size_t n) {
    const size_t want = std::bit_ceil(std::max<size_t>(16, 2 * n));
    if (want > cells_.size()) rehash(want);
}

void MfnSlots::clear() {
    cells_.clear();
    size_ = 0;
    shift_ = 64;
    lowest_ = UINT64_MAX;
    highest_ = 0;
}

std::optional<uint64_t> MfnSlots::insert(uint64_t mfn, uint64_t slot) {
    if (mfn == kInvalidEntry) return std::nullopt;  // marks empty cells; never a dumped frame
    if (2 * (size_ + 1) > cells_.size()) reserve(2 * (size_ + 1));
    const size_t mask = cells_.size() - 1;
    for (size_t i = home(mfn);; i = (i + 1) & mask) {
        Cell& c = cells_[i];
        if (c.mfn == mfn) return c.slot;
        if (c.mfn == kInvalidEntry) {
            c = {mfn, slot};
            ++size_;
            lowest_ = std::min(lowest_, mfn);
            highest_ = std::max(highest_, mfn);
            return std::nullopt;
        }
    }
}

std::optional<uint64_t> MfnSlots::slot_of(uint64_t mfn) const {
    if (mfn < lowest_ || mfn > highest_) return std::nullopt;  // also: empty, ~0
    const size_t mask = cells_.size() - 1;
    for (size_t i = home(mfn);; i = (i + 1) & mask) {
        const Cell& c = cells_[i];
        if (c.mfn == mfn) return c.slot;
        if (c.mfn == kInvalidEntry) return std::nullopt;
    }
}

std::optional<DuplicateMfn> build_mfn_slots(const std::vector<uint64_t>& index, MfnSlots& out) {
    out.clear();
    out.reserve(index.size());
    for (uint64_t slot = 0; slot < index.size(); ++slot) {
        if (index[slot] == kInvalidEntry) continue;
        if (auto first = out.insert(index[slot], slot)) return DuplicateMfn{index[slot], *first, slot};
    }
    return std::nullopt;
}

PfnCollector::PfnCollector(const std::vector<uint64_t>& index, const MfnSlots& slots)
    : slots_(slots), pfn_of_slot_(index.size(), kInvalidEntry), expected_(slots.size()) {}

bool PfnCollector::add(uint64_t pfn, uint64_t mfn) {
    const auto slot = slots_.slot_of(mfn);
    if (!slot) return true;
    uint64_t& have = pfn_of_slot_[*slot];
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
