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
    unsigned dump_level = 0;  // --dump-level N (0-31, kdump only)
};

// --format v1|kdump, --compress ALG and --dump-level N from `p` (the last two
// only when the table has them). Throws UsageError for another format, an
// unknown algorithm, a level that is not 0-31, or --compress or --dump-level
// without --format kdump.
DumpFormatChoice dump_format_choice(const Parsed& p);

// --dump-level N alone (0 when not given), for --estimate, which writes no
// file: UsageError for a level that is not 0-31.
unsigned dump_level_choice(const Parsed& p);

}  // namespace xendump::cli
