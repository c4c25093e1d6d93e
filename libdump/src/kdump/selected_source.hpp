// The pages of a source that a dump level keeps (xendump/kernel/dump_level.hpp):
// the pfns the selection keeps. What a compact file of a selection is written
// from: its entries are the 2nd bitmap, present() the 1st
// (KdumpOptions::present).
//
// Level bit 1 does not take zero pages out of the 2nd bitmap: as in
// makedumpfile's kdump files, a zero page stays dumped and its descriptor
// points at the file's one shared zero page (every compact file stores zero
// pages so, whatever the level). crash reads a page left out of the 2nd bitmap
// as "page excluded" and stops, and the kernel's own data (the root of the
// memory sections, for one) has zero pages it needs.
#pragma once

#include <cstdint>
#include <vector>

#include "xendump/kdump.hpp"
#include "xendump/kernel/dump_level.hpp"
#include "xendump/page_source.hpp"

namespace xendump::kdump {

class SelectedSource : public PageSource {
public:
    // `base` outlives this.
    SelectedSource(PageSource& base, const kernel::PageSelection& selection);

    std::span<const PageEntry> entries() const override { return entries_; }
    std::span<const PageEntry> present() const { return base_.entries(); }
    void read_pages(size_t first, size_t count, std::span<std::byte> out, std::span<uint8_t> unreadable) override;
    size_t preferred_batch() const override { return 256; }

private:
    PageSource& base_;
    std::vector<PageEntry> entries_;
    std::vector<uint64_t> index_;  // each kept page's index in `base`
};

// A selection of `entries` at `level` made without the guest kernel (an
// input the classifier cannot read): every page kept, bit 1 (zero pages)
// at most, and a limit saying so.
// The compact file of what `selection` keeps of `pages` (a SelectedSource):
// its sub header records selection.level, its 1st bitmap every page of
// `pages`. What the converter and the dumper write for a dump level.
WriteResult write_selected_kdump_file(const std::filesystem::path& path, const DumpSpec& spec, PageSource& pages,
                                      const kernel::PageSelection& selection, Compression compression,
                                      const WriteOptions& write);

kernel::PageSelection zero_pages_only(std::span<const PageEntry> entries, unsigned level, const std::string& why);

}  // namespace xendump::kdump
