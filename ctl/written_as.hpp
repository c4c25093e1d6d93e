// How a dump file was written, as list and info show it: the format ("v1",
// "kdump", "xen_elf"), a compact file's compression and dump level, and its
// zero pages (the pages of its second bitmap stored as its one shared zero
// page; v1 files have none such). `list` takes them from the sidecar when it
// records them, else from the file; `info` from the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "xendump/reader.hpp"

namespace xendump::ctl {

struct WrittenAs {
    std::string format;                      // "v1", "kdump" or "xen_elf"
    std::optional<std::string> compression;  // compact files
    std::optional<unsigned> dump_level;      // compact files
};

// What the file's own headers say.
WrittenAs written_as(const DumpReader& r);

// The FORMAT column of list and the Format: line of info: "v1", or
// "kdump/zstd/d31" (format/compression/dump level, each part left out when
// unknown), escaped for a terminal.
std::string format_column(const WrittenAs& w);

}  // namespace xendump::ctl
