// A list of entries held in memory as a page source without pages: for
// planning (writer::plan_dump) and for the compact writer's lists of pages
// stored and present (kdump/encoder.hpp) when a caller has them as spans.
#pragma once

#include <span>

#include "xendump/error.hpp"
#include "xendump/page_source.hpp"

namespace xendump::elfcore {

class EntriesOnly final : public PageSource {
public:
    explicit EntriesOnly(std::span<const PageEntry> entries) : entries_(entries) {}
    std::span<const PageEntry> entries() const override { return entries_; }
    void read_pages(size_t, size_t, std::span<std::byte>, std::span<uint8_t>) override {
        throw Error("internal error: a list of entries has no pages to read");
    }

private:
    std::span<const PageEntry> entries_;
};

}  // namespace xendump::elfcore
