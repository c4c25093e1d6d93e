#include "kdump/selected_source.hpp"

#include <string>

#include "xendump/error.hpp"
#include "xendump/format.hpp"

namespace xendump::kdump {

namespace {
constexpr size_t kPage = format::kPageSize;
}

SelectedSource::SelectedSource(PageSource& base, const kernel::PageSelection& selection) : base_(base) {
    const auto all = base.entries();
    for (size_t i = 0; i < all.size(); ++i) {
        if (!selection.keep_pfn(all[i].pfn)) continue;
        entries_.push_back(all[i]);
        index_.push_back(i);
    }
}

void SelectedSource::read_pages(size_t first, size_t count, std::span<std::byte> out, std::span<uint8_t> unreadable) {
    if (first > entries_.size() || entries_.size() - first < count || out.size() < count * kPage ||
        unreadable.size() < count)
        throw Error("read_pages: pages " + std::to_string(first) + "+" + std::to_string(count) +
                    " are past the selection (" + std::to_string(entries_.size()) + " pages) or the buffers");
    // Runs of pages that follow each other in the base are one read.
    for (size_t k = 0; k < count;) {
        size_t run = 1;
        while (k + run < count && index_[first + k + run] == index_[first + k] + run) ++run;
        base_.read_pages(index_[first + k], run, out.subspan(k * kPage, run * kPage), unreadable.subspan(k, run));
        k += run;
    }
}

WriteResult write_selected_kdump_file(const std::filesystem::path& path, const DumpSpec& spec, PageSource& pages,
                                      const kernel::PageSelection& selection, Compression compression,
                                      const WriteOptions& write) {
    SelectedSource kept(pages, selection);
    KdumpOptions ko{compression, write};
    ko.dump_level = selection.level;
    ko.present = kept.present();
    return write_kdump_file(path, spec, kept, ko);
}

kernel::PageSelection zero_pages_only(std::span<const PageEntry> entries, unsigned level, const std::string& why) {
    kernel::PageSelection s;
    s.requested_level = level;
    s.level = level & kernel::kExcludeZero;
    if (s.level != level) s.limits.push_back(why + ": level " + std::to_string(s.level) + " at most (zero pages)");
    s.keep = kernel::PfnBitmap(entries.empty() ? 0 : entries.back().pfn + 1);
    for (const auto& e : entries) s.keep.set(e.pfn);
    return s;
}

}  // namespace xendump::kdump
