#include "pipeline/batch_source.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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

// The kept pages of a batch a by-pfn selector has decided: one loan of their
// mapping when the source lends, else read_pages for each run of them; the
// pages left out point at zeros.
void fill_kept(PageBatch& b, PageSource& source) {
    b.kept_entries.clear();
    for (size_t i = 0; i < b.count; ++i)
        if (b.keep[i]) b.kept_entries.push_back(b.entries[i]);
    auto* zero_copy = dynamic_cast<ZeroCopySource*>(&source);
    if (zero_copy && !b.kept_entries.empty()) b.lent = zero_copy->lend_entries(b.kept_entries);
    if (b.lent) {
        for (size_t i = 0, j = 0; i < b.count; ++i) {
            b.page[i] = b.keep[i] ? b.lent->page(j++) : zero_page();
            if (!b.page[i]) b.unreadable[i] = 1;
        }
    } else {
        if (b.data.size() < b.count * kPage) b.data.resize(b.count * kPage);
        for (size_t i = 0; i < b.count;) {
            if (!b.keep[i]) {
                b.page[i++] = zero_page();
                continue;
            }
            size_t end = i;
            while (end < b.count && b.keep[end]) ++end;
            source.read_pages(b.first + i, end - i, std::span(b.data.data() + i * kPage, (end - i) * kPage),
                              std::span(b.unreadable.data() + i, end - i));
            for (; i < end; ++i) b.page[i] = b.data.data() + i * kPage;
        }
    }
}

// [off, off + len) of `fd` is a hole (SEEK_DATA finds no data in it): its
// pages are zeros without reading them (a sparse dump's zero pages; 256 GiB
// of them would otherwise be read and scanned). Any doubt: not a hole.
bool is_hole(int fd, uint64_t off, size_t len) {
    const off_t data = ::lseek(fd, static_cast<off_t>(off), SEEK_DATA);
    if (data < 0) return errno == ENXIO;  // no data from off to the end
    return static_cast<uint64_t>(data) >= off + len;
}

// Every page of the batch: the source file's range (positional output), else
// one loan of the source's mapping, else read_pages.
void fill_all(PageBatch& b, PageSource& source, bool positional) {
    const size_t bytes = b.count * kPage;
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
}

// A loan of pages that may change (ZeroCopySource::loans_change): each
// readable page the batch keeps copied once into its own buffer, and the
// loan returned at once.
void keep_own_copy(PageBatch& b) {
    if (b.data.size() < b.count * kPage) b.data.resize(b.count * kPage);
    for (size_t i = 0; i < b.count; ++i) {
        if (!b.keep[i] || b.unreadable[i]) continue;
        std::byte* copy = b.data.data() + i * kPage;
        std::memcpy(copy, b.page[i], kPage);
        b.page[i] = copy;
    }
    b.lent.reset();
}

}  // namespace

void fill_batch(PageBatch& b, PageSource& source, bool positional, const PageSelector* select) {
    if (b.entry_window.size() < b.count) b.entry_window.resize(b.count);
    source.read_entries(b.first, std::span(b.entry_window).first(b.count));
    b.entries = std::span<const PageEntry>(b.entry_window).first(b.count);
    b.range.reset();
    b.lent.reset();
    std::fill_n(b.unreadable.begin(), b.count, 0);
    std::fill_n(b.keep.begin(), b.count, 1);
    if (select) select->select(b);
    if (b.all_kept())
        fill_all(b, source, positional);
    else
        fill_kept(b, source);
    if (b.lent && dynamic_cast<ZeroCopySource&>(source).loans_change()) keep_own_copy(b);
    for (size_t i = 0; i < b.count; ++i)
        if (b.unreadable[i]) b.page[i] = zero_page();
}

void scan_pages(PageSource& source, const std::function<bool(uint64_t, std::span<const std::byte>)>& f) {
    const uint64_t n = source.nr_entries();
    const size_t per_batch = std::max<size_t>(1, source.preferred_batch());
    PageBatch b;
    b.reserve(per_batch);
    for (uint64_t first = 0; first < n; first += b.count) {
        b.first = static_cast<size_t>(first);
        b.count = static_cast<size_t>(std::min<uint64_t>(per_batch, n - first));
        fill_batch(b, source, false);
        for (size_t i = 0; i < b.count; ++i)
            if (!b.unreadable[i] && !f(b.pfn(i), b.bytes(i))) return;
        b.lent.reset();
    }
}

}  // namespace xendump::pipeline
