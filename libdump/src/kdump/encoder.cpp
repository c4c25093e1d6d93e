#include "kdump/encoder.hpp"

#include <algorithm>
#include <cstring>

#include "xendump/error.hpp"

namespace xendump::kdump {

bool is_zero_page(const std::byte* p, size_t size) {
    uint64_t head;
    std::memcpy(&head, p, sizeof head);
    return head == 0 && std::memcmp(p, p + 8, size - 8) == 0;
}

PageEncoder::PageEncoder(Compression c, unsigned threads, size_t page_size)
    : compression_(c), page_size_(page_size), bound_(compress_bound(c, page_size)) {
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    // Each worker owns its compressor (contexts are not shared).
    for (unsigned i = 0; i < threads; ++i)
        threads_.emplace_back([this] {
            try {
                PageCompressor compressor(compression_);
                run(compressor);
            } catch (...) {
                std::lock_guard lock(m_);
                if (!error_) error_ = std::current_exception();
                stop_ = true;
                done_cv_.notify_all();
            }
        });
}

PageEncoder::~PageEncoder() {
    {
        std::lock_guard lock(m_);
        stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : threads_) t.join();
}

void PageEncoder::submit(std::span<const std::byte* const> pages) {
    std::lock_guard lock(m_);
    if (error_) std::rethrow_exception(error_);
    pages_.assign(pages.begin(), pages.end());
    out_.assign(pages.size(), EncodedPage{});
    units_ = (pages.size() + kUnitPages - 1) / kUnitPages;
    if (unit_buffers_.size() < units_) unit_buffers_.resize(units_);
    next_unit_ = 0;
    units_done_ = 0;
    ++generation_;
    work_cv_.notify_all();
}

std::span<const EncodedPage> PageEncoder::collect() {
    std::unique_lock lock(m_);
    done_cv_.wait(lock, [this] { return units_done_ == units_ || error_; });
    if (error_) std::rethrow_exception(error_);
    return out_;
}

void PageEncoder::run(PageCompressor& compressor) {
    std::unique_lock lock(m_);
    for (;;) {
        work_cv_.wait(lock, [this] { return stop_ || next_unit_ < units_; });
        if (stop_) return;
        const size_t unit = next_unit_++;
        lock.unlock();
        std::exception_ptr error;
        try {
            encode_unit(compressor, unit);
        } catch (...) {
            error = std::current_exception();
        }
        lock.lock();
        if (error && !error_) error_ = error;
        if (++units_done_ == units_ || error_) done_cv_.notify_all();
    }
}

void PageEncoder::encode_unit(PageCompressor& compressor, size_t unit) {
    const size_t first = unit * kUnitPages;
    const size_t last = std::min(pages_.size(), first + kUnitPages);
    auto& buf = unit_buffers_[unit];
    if (compression_ != Compression::none && buf.size() < kUnitPages * bound_) buf.resize(kUnitPages * bound_);
    std::byte* at = buf.data();
    for (size_t i = first; i < last; ++i) {
        const std::byte* page = pages_[i];
        EncodedPage& o = out_[i];
        if (is_zero_page(page, page_size_)) {
            o.zero = true;
            continue;
        }
        const size_t n = compressor.compress(std::span(page, page_size_), std::span(at, bound_));
        if (n == 0) {
            o = {page, static_cast<uint32_t>(page_size_), 0, false};
        } else {
            o = {at, static_cast<uint32_t>(n), flag_of(compression_), false};
            at += n;
        }
    }
}

}  // namespace xendump::kdump
