#include "pipeline/batch_source.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "pipeline/zero_pages.hpp"
#include "xendump/error.hpp"
#include "xendump/format.hpp"
#include "util/util.hpp"

namespace xendump::pipeline {

namespace {

using util::kPage;

void pread_all(int fd, uint64_t off, std::byte* out, size_t len) {
    const long r = util::pread_full(fd, out, len, off);
    if (r < 0) throw_errno("cannot read source pages", {}, off);
    if (static_cast<size_t>(r) < len) throw Error("source file ends early", {}, off + static_cast<uint64_t>(r));
}

// [off, off + len) of `fd` is a hole (SEEK_DATA finds no data in it): its
// pages are zeros without reading them (a sparse dump's zero pages; 256 GiB
// of them would otherwise be read and scanned). Any doubt: not a hole.
bool is_hole(int fd, uint64_t off, size_t len) {
    const off_t data = ::lseek(fd, static_cast<off_t>(off), SEEK_DATA);
    if (data < 0) return errno == ENXIO;  // no data from off to the end
    return static_cast<uint64_t>(data) >= off + len;
}

}  // namespace

void fill_batch(PageBatch& b, PageSource& source, bool positional) {
    const size_t bytes = b.count * kPage;
    if (b.entry_window.size() < b.count) b.entry_window.resize(b.count);
    source.read_entries(b.first, std::span(b.entry_window).first(b.count));
    b.entries = std::span<const PageEntry>(b.entry_window).first(b.count);
    b.range.reset();
    b.lent.reset();
    std::fill_n(b.unreadable.begin(), b.count, 0);
    std::fill_n(b.keep.begin(), b.count, 1);
    auto* zero_copy = dynamic_cast<ZeroCopySource*>(&source);
    if (zero_copy && positional) b.range = zero_copy->file_range(b.first, b.count);
    if (zero_copy && !b.range) b.lent = zero_copy->lend_pages(b.first, b.count);
    if (b.lent) {
        for (size_t i = 0; i < b.count; ++i) {
            b.page[i] = b.lent->page(i);
            if (!b.page[i]) b.unreadable[i] = 1;
        }
    } else {
        if (b.data.size() < bytes) b.data.resize(bytes);  // only sources that do not lend need it
        const bool hole = b.range && is_hole(b.range->fd, b.range->offset, bytes);
        if (b.range && !hole)
            pread_all(b.range->fd, b.range->offset, b.data.data(), bytes);
        else if (!b.range)
            source.read_pages(b.first, b.count, std::span(b.data.data(), bytes),
                              std::span(b.unreadable.data(), b.count));
        for (size_t i = 0; i < b.count; ++i) b.page[i] = hole ? zero_page() : b.data.data() + i * kPage;
    }
    for (size_t i = 0; i < b.count; ++i)
        if (b.unreadable[i]) b.page[i] = zero_page();
}

}  // namespace xendump::pipeline
