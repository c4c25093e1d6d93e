#include "pipeline/batch_places.hpp"

#include <utility>
#include <vector>

#include "xendump/error.hpp"

namespace xendump::pipeline {

void BatchPlaces::start(uint64_t offset) {
    std::lock_guard lock(m_);
    kept_.clear();
    next_first_ = 0;
    next_at_ = offset;
    failed_ = false;
}

bool BatchPlaces::place(uint64_t first, uint64_t count, uint64_t size, Then then) {
    // Placed here, in batch order: this batch, then those kept after it.
    std::vector<std::pair<Then, uint64_t>> placed;
    {
        std::lock_guard lock(m_);
        if (failed_) return false;
        if (first < next_first_ || kept_.contains(first))
            throw Error("internal error: the batch of entry " + std::to_string(first) + " placed twice", name_);
        kept_.emplace(first, Kept{count, size, std::move(then)});
        // Whoever leaves this loop leaves no batch kept at next_first_: the
        // call that brings it places it.
        for (auto it = kept_.find(next_first_); it != kept_.end(); it = kept_.find(next_first_)) {
            placed.emplace_back(std::move(it->second.then), next_at_);
            next_first_ += it->second.count;
            next_at_ += it->second.size;
            kept_.erase(it);
        }
    }
    try {
        for (auto& [f, at] : placed)
            if (f) f(at);
    } catch (...) {
        fail();
        throw;
    }
    return !placed.empty();
}

void BatchPlaces::fail() {
    std::lock_guard lock(m_);
    failed_ = true;
    kept_.clear();
}

}  // namespace xendump::pipeline
