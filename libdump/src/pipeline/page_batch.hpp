// One batch of consecutive entries of a page source as it goes through the
// pipeline (pipeline.hpp): read by the source stage, classified, selected,
// prepared by the encoder (on any thread), then observed and encoded in pfn
// order. Batches are reused: the pass keeps a few in flight, never one per
// page of the guest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "pipeline/zero_copy_source.hpp"
#include "xendump/page_source.hpp"

namespace xendump::pipeline {

// What an encoder computes for a batch in Encoder::prepare (digests,
// compressed pages) and takes back in Encoder::write; kept with the batch
// so that it is reused with it.
class BatchWork {
public:
    virtual ~BatchWork() = default;
};

struct PageBatch {
    size_t first = 0;                       // entry index of page 0
    size_t count = 0;                       // pages in this batch
    std::span<const PageEntry> entries;     // entries [first, first + count), in entry_window
    std::vector<PageEntry> entry_window;    // the source's entries for this batch (read_entries)
    std::vector<const std::byte*> page;     // page[i]: 4096 bytes (zeros when unreadable)
    std::vector<uint8_t> unreadable;        // 1: the source could not read page i
    std::vector<uint8_t> zero;              // 1: page i is all zeros (when the pass classifies)
    std::vector<uint8_t> keep;              // 1: page i is written (the selector's verdict)
    std::optional<FileRange> range;         // the pages sit contiguously in this file
    std::unique_ptr<BatchWork> work;        // the encoder's, see Encoder::prepare

    // Where the pages live: a source's loan (a mapping) or bytes read here
    // (also a loan's pages copied, when they may change: loans_change).
    std::unique_ptr<LentPages> lent;
    std::vector<std::byte> data;
    std::vector<PageEntry> kept_entries;  // the kept pages' entries, when only they are read (fill_batch)

    uint64_t pfn(size_t i) const { return entries[i].pfn; }
    std::span<const std::byte> bytes(size_t i) const;
    bool all_kept() const;
    // Sizes the per-page vectors for batches of up to `pages` pages.
    void reserve(size_t pages);
};

}  // namespace xendump::pipeline
