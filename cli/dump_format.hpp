// --format and --compress of the programs that write dumps (xen-dumpd,
// xen-dump-convert): the same values, the same checks, once every argument
// is read (an option's order does not matter).
#pragma once

#include "cli_options.hpp"
#include "xendump/kdump.hpp"

namespace xendump::cli {

struct DumpFormatChoice {
    bool kdump = false;  // --format kdump: a compact file
    Compression compression = Compression::zstd;
};

// --format v1|kdump and --compress ALG from `p`. Throws UsageError for
// another format, an unknown algorithm, or --compress without --format kdump.
DumpFormatChoice dump_format_choice(const Parsed& p);

}  // namespace xendump::cli
