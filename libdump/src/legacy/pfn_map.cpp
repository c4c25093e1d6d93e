#include "legacy/pfn_map.hpp"

#include <algorithm>
#include <bit>

#include "legacy/hex.hpp"
#include "legacy/xc_core.hpp"
#include "xendump/error.hpp"

#include <xxhash.h>

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

std::optional<DuplicateMfn> MfnIndex::build(const IndexTable& index, MfnIndex& out) {
    out = MfnIndex();
    // Machine addresses of x86 have at most 52 bits: 2^40 frames.
    constexpr uint64_t kMaxMfn = uint64_t{1} << 40;
    auto by_mfn = [](const Entry& a, const Entry& b) { return a.mfn != b.mfn ? a.mfn < b.mfn : a.slot < b.slot; };
    ExternalSorter<Entry, decltype(by_mfn)> sorter(by_mfn);
    uint64_t lowest = UINT64_MAX, highest = 0;
    index.for_each([&](uint64_t slot, uint64_t mfn) {
        if (mfn == kInvalidEntry) return;
        if (mfn >= kMaxMfn)
            throw Error("index entry " + std::to_string(slot) + ": machine frame " + hex(mfn) +
                            " is past x86's 52-bit physical address space",
                        index.name(), index.offset_of(slot));
        lowest = std::min(lowest, mfn);
        highest = std::max(highest, mfn);
        sorter.push({mfn, slot});
    });
    if (lowest <= highest) out.present_ = SparseBitmap(lowest, highest - lowest + 1);
    out.lowest_ = lowest;
    out.highest_ = highest;
    std::optional<DuplicateMfn> dup;
    Entry last{kInvalidEntry, 0};
    sorter.drain([&](const Entry& e) {
        if (e.mfn == last.mfn) {
            // Slots ascend within an MFN: this is a later entry repeating the MFN of `last`.
            if (!dup || e.slot < dup->second_slot) dup = DuplicateMfn{e.mfn, last.slot, e.slot};
            return;
        }
        last = e;
        out.present_.test_and_set(e.mfn);
        if (out.sorted_.size() % kBlock == 0) out.fences_.push_back(e.mfn);
        out.sorted_.push(e);
    });
    return dup;
}

std::optional<uint64_t> MfnIndex::slot_of(uint64_t mfn) const {
    if (!contains(mfn)) return std::nullopt;
    const auto f = std::upper_bound(fences_.begin(), fences_.end(), mfn);
    const uint64_t b = static_cast<uint64_t>(f - fences_.begin()) - 1;  // contains(): fences_[0] <= mfn
    if (b != block_no_) {
        const uint64_t first = b * kBlock;
        block_.resize(static_cast<size_t>(std::min<uint64_t>(kBlock, sorted_.size() - first)));
        sorted_.read(first, block_);
        block_no_ = b;
    }
    const auto e = std::lower_bound(block_.begin(), block_.end(), mfn,
                                    [](const Entry& x, uint64_t m) { return x.mfn < m; });
    if (e == block_.end() || e->mfn != mfn) return std::nullopt;
    return e->slot;
}

PfnCheck::PfnCheck(const MfnIndex& slots, SparseBitmap& seen)
    : slots_(slots), seen_(seen), expected_(slots.size()),
      hash_(XXH3_createState(), [](void* s) { XXH3_freeState(static_cast<XXH3_state_t*>(s)); }) {
    seen_.clear();
    XXH3_128bits_reset(static_cast<XXH3_state_t*>(hash_.get()));
}

bool PfnCheck::add(uint64_t pfn, uint64_t mfn) {
    if (!slots_.contains(mfn)) return true;
    if (seen_.test_and_set(mfn)) {
        twice_mfn_ = mfn;
        twice_pfn_ = pfn;
        return false;
    }
    ++found_;
    pending_.push_back(pfn);
    pending_.push_back(mfn);
    if (pending_.size() >= 8192) {
        XXH3_128bits_update(static_cast<XXH3_state_t*>(hash_.get()), pending_.data(), pending_.size() * 8);
        pending_.clear();
    }
    return true;
}

std::pair<uint64_t, uint64_t> PfnCheck::digest() {
    auto* state = static_cast<XXH3_state_t*>(hash_.get());
    XXH3_128bits_update(state, pending_.data(), pending_.size() * 8);
    pending_.clear();
    const XXH128_hash_t h = XXH3_128bits_digest(state);
    return {h.high64, h.low64};
}

std::string conflict_text(const std::function<void(const std::function<void(uint64_t, uint64_t)>&)>& walk,
                          uint64_t mfn, uint64_t second_pfn) {
    uint64_t first = kInvalidEntry;
    walk([&](uint64_t pfn, uint64_t m) {
        if (m == mfn && first == kInvalidEntry) first = pfn;
    });
    return "mfn " + hex(mfn) + " is mapped by pfn " + hex(first) + " and pfn " + hex(second_pfn);
}

}  // namespace xendump::legacy
