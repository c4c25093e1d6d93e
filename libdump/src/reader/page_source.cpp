// DumpReader::page_source: the file's pages as a PageSource. Slot i of
// .xen_pages is entry i (xen-dump-core(5) "Page data"), so any run of entries is one contiguous
// range of the file: one pread, and file_range() for copy_file_range (not
// for an encrypted file: its pages are decrypted, dump_file.hpp).
// The pages the file lists in NT_XEN_UNREADABLE are read as unreadable (and
// zeros), as the pass that wrote the file saw them: a file written from this
// source (xen-dump-convert --format kdump) lists them again.
#include <algorithm>

#include "pipeline/zero_copy_source.hpp"
#include "reader/checked.hpp"
#include "xendump/error.hpp"
#include "reader/reader_impl.hpp"
#include "kdump/kdump_file.hpp"

namespace xendump {

namespace {

// Both sources read the table where it lies, a window at a time (issue 19:
// nothing per page in memory); the reader outlives them.
class TableEntries {
public:
    explicit TableEntries(const DumpReader::Impl& d) : d_(d) {}
    uint64_t size() const { return d_.nr_entries(); }
    void read(uint64_t first, std::span<PageEntry> out) const { d_.table.read(first, out); }
    std::optional<uint64_t> index_of_pfn(uint64_t pfn) const { return d_.index_of_pfn(pfn); }

private:
    const DumpReader::Impl& d_;
};

// The file's NT_XEN_UNREADABLE pfns (xen-dump-core(5) "Trailer notes"),
// sorted: the note is the file's, in whatever order it holds them.
class UnreadablePfns {
public:
    explicit UnreadablePfns(const DumpReader::Impl& d) : pfns_(d.unreadable) {
        std::sort(pfns_.begin(), pfns_.end());
        pfns_.erase(std::unique(pfns_.begin(), pfns_.end()), pfns_.end());
    }
    bool empty() const { return pfns_.empty(); }
    // Whether a listed pfn lies in [low, high].
    bool any_in(uint64_t low, uint64_t high) const {
        auto it = std::lower_bound(pfns_.begin(), pfns_.end(), low);
        return it != pfns_.end() && *it <= high;
    }
    // Flags the listed pages of `entries` in `unreadable` (the rest 0) and
    // zeros their bytes in `out` (what the writer stored for them; a file
    // that stores something else does not pass it off as guest memory).
    void mark(std::span<const PageEntry> entries, std::span<std::byte> out, std::span<uint8_t> unreadable) const {
        std::fill_n(unreadable.begin(), entries.size(), uint8_t{0});
        if (pfns_.empty() || entries.empty() || !any_in(entries.front().pfn, entries.back().pfn)) return;
        for (size_t i = 0; i < entries.size(); ++i)
            if (std::binary_search(pfns_.begin(), pfns_.end(), entries[i].pfn)) {
                unreadable[i] = 1;
                std::fill_n(out.begin() + static_cast<std::ptrdiff_t>(i * format::kPageSize), format::kPageSize,
                            std::byte{0});
            }
    }

private:
    std::vector<uint64_t> pfns_;
};

class FilePageSource : public ZeroCopySource {
public:
    FilePageSource(const DumpReader::Impl& d)
        : file_(d.file), table_(d), unreadable_(d), pages_offset_(d.pages_offset), pages_size_(d.pages_size) {}

    uint64_t nr_entries() const override { return table_.size(); }
    void read_entries(uint64_t first, std::span<PageEntry> out) const override { table_.read(first, out); }
    std::optional<uint64_t> index_of_pfn(uint64_t pfn) const override { return table_.index_of_pfn(pfn); }

    void read_pages(size_t first, size_t count, std::span<std::byte> out, std::span<uint8_t> unreadable) override {
        const uint64_t off = checked_offset(first, count);
        if (out.size() < count * format::kPageSize || unreadable.size() < count)
            throw Error("read_pages: buffers too small for " + std::to_string(count) + " pages", file_->path());
        file_->read_exact(off, out.first(count * format::kPageSize), ".xen_pages");
        if (unreadable_.empty()) {
            std::fill_n(unreadable.begin(), count, uint8_t{0});
            return;
        }
        window_.resize(count);
        table_.read(first, window_);
        unreadable_.mark(window_, out, unreadable);
    }

    size_t preferred_batch() const override { return 2048; }  // 8 MiB per pread

    // Not for pages the file lists as unreadable: those go through
    // read_pages, which says so.
    // Nor for an encrypted or flattened file, whose bytes on disk are not the pages:
    // the pipeline reads them (read_pages) instead.
    std::optional<FileRange> file_range(size_t first, size_t count) const override {
        const uint64_t off = checked_offset(first, count);
        if (!file_->in_place()) return std::nullopt;
        if (!unreadable_.empty() && count > 0) {
            PageEntry ends[2]{};
            table_.read(first, std::span(ends, 1));
            table_.read(first + count - 1, std::span(ends + 1, 1));
            if (unreadable_.any_in(ends[0].pfn, ends[1].pfn)) return std::nullopt;
        }
        return FileRange{file_->fd(), off};
    }

private:
    uint64_t checked_offset(size_t first, size_t count) const {
        if (first > table_.size() || table_.size() - first < count)
            throw Error("pages " + std::to_string(first) + "+" + std::to_string(count) + " are past the table (" +
                            std::to_string(table_.size()) + " entries)",
                        file_->path());
        const uint64_t rel = uint64_t{first} * format::kPageSize;
        if (!reader::range_inside(rel, uint64_t{count} * format::kPageSize, pages_size_) ||
            !reader::range_inside(pages_offset_ + rel, uint64_t{count} * format::kPageSize, file_->size()))
            throw Error(".xen_pages: pages " + std::to_string(first) + "+" + std::to_string(count) +
                            " are past the end of the section or the file",
                        file_->path(), pages_offset_ + rel);
        return pages_offset_ + rel;
    }

    std::shared_ptr<const reader::DumpFile> file_;
    TableEntries table_;
    UnreadablePfns unreadable_;
    uint64_t pages_offset_, pages_size_;
    std::vector<PageEntry> window_;
};

// A compact file's pages, decompressed one by one.
class KdumpPageSource : public PageSource {
public:
    explicit KdumpPageSource(const DumpReader::Impl& d)
        : file_(d.kdump), table_(d), unreadable_(d), pv_(d.type == format::GuestType::pv) {}

    uint64_t nr_entries() const override { return table_.size(); }
    void read_entries(uint64_t first, std::span<PageEntry> out) const override { table_.read(first, out); }
    std::optional<uint64_t> index_of_pfn(uint64_t pfn) const override { return table_.index_of_pfn(pfn); }

    void read_pages(size_t first, size_t count, std::span<std::byte> out, std::span<uint8_t> unreadable) override {
        if (first > table_.size() || table_.size() - first < count || out.size() < count * format::kPageSize ||
            unreadable.size() < count)
            throw Error("read_pages: pages " + std::to_string(first) + "+" + std::to_string(count) +
                            " are past the table or the buffers",
                        file_->file().path());
        window_.resize(count);
        table_.read(first, window_);
        for (size_t i = 0; i < count; ++i)
            file_->read_page(pv_ ? file_->stored_bitmap().rank(window_[i].gmfn) : first + i,
                             out.subspan(i * format::kPageSize, format::kPageSize));
        unreadable_.mark(window_, out, unreadable);
    }

private:
    std::shared_ptr<const kdump::KdumpFile> file_;
    TableEntries table_;
    UnreadablePfns unreadable_;
    bool pv_;  // filed by machine frame: a page's descriptor is its gmfn's rank (Impl::kdump_desc)
    std::vector<PageEntry> window_;
};

}  // namespace

std::unique_ptr<PageSource> DumpReader::page_source() const {
    if (impl_->kdump) return std::make_unique<KdumpPageSource>(*impl_);
    return std::make_unique<FilePageSource>(*impl_);
}

}  // namespace xendump
