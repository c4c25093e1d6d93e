// The source stage's zero-copy paths, for the library's own page sources:
// a source that already holds the pages (a foreign mapping) lends them, and
// one whose pages sit contiguously in a file says where, so that the sink
// can move them with copy_file_range. Not part of the public PageSource: an
// outside source only reads pages; the pass asks for these by dynamic_cast.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "xendump/page_source.hpp"

namespace xendump {

// Pages that already sit contiguously in a file (an fd the source owns).
struct FileRange {
    int fd;
    uint64_t offset;
};

// Pages a source lends without copying them (a foreign mapping): valid
// until the object is destroyed. page(i) is null for an unreadable page.
class LentPages {
public:
    virtual ~LentPages() = default;
    virtual const std::byte* page(size_t i) const = 0;
};

class ZeroCopySource : public PageSource {
public:
    // Entries [first, first+count) as pages the source already holds
    // (count <= preferred_batch()), or null: then the pass calls read_pages.
    virtual std::unique_ptr<LentPages> lend_pages(size_t /*first*/, size_t /*count*/) { return nullptr; }

    // The pages of `entries` (some of the source's entries, in order, at
    // most preferred_batch() of them) as one loan, or null: then the pass
    // calls read_pages for each run of them. For a pass that reads only the
    // pages a selector keeps (PageSelector::by_pfn).
    virtual std::unique_ptr<LentPages> lend_entries(std::span<const PageEntry> /*entries*/) { return nullptr; }

    // Whether a loan's pages may change while lent (a running guest's,
    // when nothing after the pass settles the file): the pass then copies
    // each page once into the batch and returns the loan, so that every
    // stage reading a page (the zero check, the digest, compression,
    // sealing, the write) reads the same bytes. The default: they do not.
    virtual bool loans_change() const { return false; }

    // When entries [first, first+count) are stored contiguously in a file,
    // where. The default: never.
    virtual std::optional<FileRange> file_range(size_t /*first*/, size_t /*count*/) const { return std::nullopt; }
};

}  // namespace xendump
