// The kdump encoder's core: batches of pages in, each page's stored form out
// (compressed, raw, or the shared zero page), in the order the pages came.
// It knows nothing of where pages come from or where the bytes go: the
// writer (write_kdump.cpp) reads a PageSource into it and lays the output
// into the file; a pipeline can feed it the same way.
//
// Threads: a batch is cut into units of kUnitPages pages and the workers
// take units in any order, but every unit's output has its own buffer and
// the batch is handed back in page order, so the bytes never depend on the
// number of threads or on timing.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "kdump/codec.hpp"

namespace xendump::kdump {

// One page as it is stored.
struct EncodedPage {
    const std::byte* data = nullptr;  // size bytes (null for a zero page)
    uint32_t size = 0;
    uint32_t flags = 0;  // compression flag, 0 for raw
    bool zero = false;   // all zeros: stored once, shared by every zero page
};

class PageEncoder {
public:
    static constexpr size_t kUnitPages = 64;

    PageEncoder(Compression c, unsigned threads, size_t page_size);
    ~PageEncoder();
    PageEncoder(const PageEncoder&) = delete;
    PageEncoder& operator=(const PageEncoder&) = delete;

    // Starts encoding `pages` (page_size bytes each, valid until collect()
    // returns). One batch at a time.
    void submit(std::span<const std::byte* const> pages);
    // Waits for the submitted batch and returns its pages in order, valid
    // until the next submit(). Rethrows what a worker threw.
    std::span<const EncodedPage> collect();

private:
    void run(PageCompressor& compressor);
    void encode_unit(PageCompressor& compressor, size_t unit);

    Compression compression_;
    size_t page_size_, bound_;
    std::vector<const std::byte*> pages_;
    std::vector<EncodedPage> out_;
    std::vector<std::vector<std::byte>> unit_buffers_;  // one per unit of the batch

    std::mutex m_;
    std::condition_variable work_cv_, done_cv_;
    size_t next_unit_ = 0, units_ = 0, units_done_ = 0;
    uint64_t generation_ = 0;
    bool stop_ = false;
    std::exception_ptr error_;
    std::vector<std::thread> threads_;
};

bool is_zero_page(const std::byte* page, size_t size);

}  // namespace xendump::kdump
