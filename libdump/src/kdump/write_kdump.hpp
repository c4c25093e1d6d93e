// Writing a compact file of the pages a dump level keeps (xendump/kernel/
// dump_level.hpp): what xen-dump-convert --dump-level does. The public
// write_kdump_file (xendump/kdump.hpp) writes every page of its source.
#pragma once

#include <filesystem>
#include <span>
#include <string>

#include "xendump/dump_spec.hpp"
#include "xendump/kdump.hpp"
#include "xendump/kernel/dump_level.hpp"
#include "xendump/page_source.hpp"

namespace xendump::kdump {

// Writes `path` (atomically, as write_kdump_file) from the pages of `source`
// that `selection` keeps: the pfns it keeps, less (level bit 1) the pages
// that are all zeros, found in a first pass over `source`
// (pipeline::selected_pfns, a kernel::PfnBitmap) since the file's layout is
// planned from its list of pages (KeptEntries reads it from `source`). The 1st bitmap names every page of `source`, the sub
// header `selection.level`; `options.dump_level` and `options.present` are
// not used.
WriteResult write_kdump_selection(const std::filesystem::path& path, const DumpSpec& spec, PageSource& source,
                                  const kernel::PageSelection& selection, const KdumpOptions& options);

// A selection of the pages of `pages` at `level` made without the guest kernel (an
// input the classifier cannot read): every page kept, bit 1 (zero pages)
// at most, and a limit saying so.
kernel::PageSelection zero_pages_only(const PageSource& pages, unsigned level, const std::string& why);

}  // namespace xendump::kdump
