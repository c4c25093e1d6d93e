#include "legacy/legacy_page_source.hpp"

#include <cstring>

#include "util/util.hpp"
#include "xendump/error.hpp"

namespace xendump::legacy {
namespace {
using util::kPage;
}

void LegacyPageSource::read_entries(uint64_t first, std::span<PageEntry> out) const {
    if (!layout_.table) {
        if (first == 0 && out.empty()) return;
        throw Error("page entries past the 0 pages", src_.name());
    }
    layout_.table->read(first, out);
}

std::optional<uint64_t> LegacyPageSource::index_of_pfn(uint64_t pfn) const {
    return layout_.table ? layout_.table->index_of_pfn(pfn) : std::nullopt;
}

void LegacyPageSource::read_pages(size_t first, size_t count, std::span<std::byte> out,
                                  std::span<uint8_t> unreadable) {
    if (first > nr_entries() || nr_entries() - first < count || out.size() < count * kPage)
        throw Error("page request out of range", src_.name());
    if (count == 0) return;
    // One pread per run of consecutive slots, the file's holes zeroed here
    // rather than read (a sparse source: most of it). `data` is the
    // file's stretch of data after `known`, where offsets before data.start
    // are a hole.
    ByteSource::Extent data{0, 0};
    uint64_t known = UINT64_MAX;
    layout_.table->for_each_run(first, count, [&](uint64_t at, uint64_t, uint64_t, uint64_t slot, uint64_t n) {
        uint64_t off = file_.page_offset(slot);
        std::span<std::byte> dst = out.subspan(static_cast<size_t>(at - first) * kPage, static_cast<size_t>(n) * kPage);
        while (!dst.empty()) {
            if (off < known || off >= data.end) {
                data = src_.data_from(off);
                known = off;
            }
            const bool hole = off < data.start;
            if (!hole && off >= data.end) {  // past the end of the file: read() says so
                src_.read(off, dst, "pages");
                break;
            }
            const size_t k = static_cast<size_t>(std::min<uint64_t>(dst.size(), (hole ? data.start : data.end) - off));
            if (hole)
                std::memset(dst.data(), 0, k);
            else
                src_.read(off, dst.first(k), "pages");
            off += k;
            dst = dst.subspan(k);
        }
    });
    for (size_t k = 0; k < count && k < unreadable.size(); ++k) unreadable[k] = 0;
}

std::optional<FileRange> LegacyPageSource::file_range(size_t first, size_t count) const {
    if (count == 0 || first > nr_entries() || nr_entries() - first < count) return std::nullopt;
    // Contiguous in the file: one run of slots, whatever the pfns and gmfns do.
    uint64_t slot0 = 0, next = 0;
    bool contiguous = true;
    layout_.table->for_each_run(first, count, [&](uint64_t at, uint64_t, uint64_t, uint64_t slot, uint64_t n) {
        if (at == first) slot0 = next = slot;
        contiguous = contiguous && slot == next;
        next = slot + n;
    });
    if (!contiguous) return std::nullopt;
    return src_.file_range(file_.page_offset(slot0));
}

}  // namespace xendump::legacy
