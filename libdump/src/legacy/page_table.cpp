#include "legacy/page_table.hpp"

#include <algorithm>

#include "xendump/error.hpp"

namespace xendump::legacy {

void PageTable::Builder::add(uint64_t pfn, uint64_t gmfn, uint64_t slot) {
    if (len_ && pfn == open_.pfn + len_ && gmfn == open_.gmfn + len_ && slot == open_.slot + len_) {
        ++len_;
        ++t_->entries_;
        return;
    }
    if (len_) {
        if (t_->runs_.size() % kBlock == 0) t_->fences_.push_back(open_);
        t_->runs_.push(open_);
    }
    open_ = {t_->entries_, pfn, gmfn, slot};
    len_ = 1;
    ++t_->entries_;
}

std::shared_ptr<const PageTable> PageTable::Builder::finish() {
    if (len_) {
        if (t_->runs_.size() % kBlock == 0) t_->fences_.push_back(open_);
        t_->runs_.push(open_);
        len_ = 0;
    }
    return std::move(t_);
}

const std::vector<PageTable::Run>& PageTable::block(uint64_t b) const {
    if (b != block_no_) {
        const uint64_t first = b * kBlock;
        block_.resize(static_cast<size_t>(std::min<uint64_t>(kBlock, runs_.size() - first)));
        runs_.read(first, block_);
        block_no_ = b;
    }
    return block_;
}

uint64_t PageTable::block_of_entry(uint64_t i) const {
    const auto f =
        std::upper_bound(fences_.begin(), fences_.end(), i, [](uint64_t e, const Run& r) { return e < r.entry; });
    return static_cast<uint64_t>(f - fences_.begin()) - 1;
}

uint64_t PageTable::run_end(const std::vector<Run>& blk, size_t k, uint64_t b) const {
    if (k + 1 < blk.size()) return blk[k + 1].entry;
    return b + 1 < fences_.size() ? fences_[b + 1].entry : entries_;
}

void PageTable::read(uint64_t first, std::span<PageEntry> out, std::span<uint64_t> slots) const {
    if (first > entries_ || out.size() > entries_ - first)
        throw Error("page entries " + std::to_string(first) + "+" + std::to_string(out.size()) + " are past the " +
                    std::to_string(entries_) + " pages");
    for_each_run(first, out.size(), [&](uint64_t at, uint64_t pfn, uint64_t gmfn, uint64_t slot, uint64_t n) {
        const size_t o = static_cast<size_t>(at - first);
        for (uint64_t k = 0; k < n; ++k) {
            out[o + k] = {pfn + k, gmfn + k};
            if (!slots.empty()) slots[o + k] = slot + k;
        }
    });
}

PageEntry PageTable::entry(uint64_t i) const {
    PageEntry e{};
    read(i, std::span(&e, 1));
    return e;
}

uint64_t PageTable::slot(uint64_t i) const {
    PageEntry e{};
    uint64_t s = 0;
    read(i, std::span(&e, 1), std::span(&s, 1));
    return s;
}

std::optional<uint64_t> PageTable::index_of_pfn(uint64_t pfn) const {
    std::lock_guard lock(mutex_);
    const auto f =
        std::upper_bound(fences_.begin(), fences_.end(), pfn, [](uint64_t p, const Run& r) { return p < r.pfn; });
    if (f == fences_.begin()) return std::nullopt;
    const uint64_t b = static_cast<uint64_t>(f - fences_.begin()) - 1;
    const std::vector<Run>& blk = block(b);
    auto r = std::upper_bound(blk.begin(), blk.end(), pfn, [](uint64_t p, const Run& x) { return p < x.pfn; });
    const size_t k = static_cast<size_t>(r - blk.begin()) - 1;
    const uint64_t len = run_end(blk, k, b) - blk[k].entry;
    if (pfn - blk[k].pfn >= len) return std::nullopt;
    return blk[k].entry + (pfn - blk[k].pfn);
}

}  // namespace xendump::legacy
