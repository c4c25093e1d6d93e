#include "pipeline/batch_places.hpp"

#include "xendump/error.hpp"

namespace xendump::pipeline {

void BatchPlaces::start(uint64_t offset) {
    std::lock_guard lock(m_);
    next_first_ = 0;
    next_at_ = offset;
    failed_ = false;
}

std::optional<uint64_t> BatchPlaces::place(uint64_t first, uint64_t count, uint64_t size) {
    std::unique_lock lock(m_);
    placed_.wait(lock, [&] { return failed_ || next_first_ >= first; });
    if (failed_) return std::nullopt;
    if (next_first_ != first)
        throw Error("internal error: the batch of entry " + std::to_string(first) + " placed twice", name_);
    const uint64_t at = next_at_;
    next_first_ = first + count;
    next_at_ += size;
    placed_.notify_all();
    return at;
}

void BatchPlaces::fail() {
    {
        std::lock_guard lock(m_);
        failed_ = true;
    }
    placed_.notify_all();
}

}  // namespace xendump::pipeline
