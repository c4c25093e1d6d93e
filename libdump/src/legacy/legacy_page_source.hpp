// A PageSource over a legacy xc_core file once its layout is decided: entries
// in pfn order, each read from its slot in the file. Runs of consecutive slots
// are offered to the writer as file ranges for copy_file_range.
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

    std::span<const PageEntry> entries() const override { return layout_.entries; }
    void read_pages(size_t first, size_t count, std::span<std::byte> out, std::span<uint8_t> unreadable) override;
    std::optional<FileRange> file_range(size_t first, size_t count) const override;

private:
    const ByteSource& src_;
    const XcCoreFile& file_;
    const LegacyLayout& layout_;
};

}  // namespace xendump::legacy
