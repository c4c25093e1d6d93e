// A PageSource over a legacy xc_core file once its layout is decided: entries
// in pfn order, each read from its slot in the file. Runs of consecutive slots
// are offered to the writer as file ranges for copy_file_range. Nothing
// here is per page: the list stays in the PageTable.
#pragma once

#include "legacy/byte_source.hpp"
#include "legacy/layout.hpp"
#include "legacy/xc_core.hpp"

namespace xendump::legacy {

class LegacyPageSource : public ZeroCopySource {
public:
    // Keeps references: `src`, `file` and `layout` must outlive the source.
    LegacyPageSource(const ByteSource& src, const XcCoreFile& file, const LegacyLayout& layout)
        : src_(src), file_(file), layout_(layout) {}

    // The list a window at a time, from the layout's PageTable (issue 19).
    uint64_t nr_entries() const override { return layout_.table ? layout_.table->size() : 0; }
    void read_entries(uint64_t first, std::span<PageEntry> out) const override;
    std::optional<uint64_t> index_of_pfn(uint64_t pfn) const override;
    void read_pages(size_t first, size_t count, std::span<std::byte> out, std::span<uint8_t> unreadable) override;
    std::optional<FileRange> file_range(size_t first, size_t count) const override;

private:
    const ByteSource& src_;
    const XcCoreFile& file_;
    const LegacyLayout& layout_;
};

}  // namespace xendump::legacy
