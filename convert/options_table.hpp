// The command line of xen-dump-convert (cli/cli_options.hpp): one row per
// option; --help, man/xen-dump-convert.1 and completions/xen-dump-convert
// hold the same rows (tests/cli/options_test.cpp).
#pragma once

#include "cli_options.hpp"
#include "identity.hpp"
#include "xendump/writer.hpp"

namespace xendump::convert {

inline constexpr cli::Option kConvertOptions[] = {
    {"output", 'o', cli::Arg::required, "FILE",
     "output file (one input only), or the object\ns3://BUCKET/KEY"},
    {"output-dir", 0, cli::Arg::required, "DIR",
     "write outputs under DIR, keeping the input names; DIR\ns3://BUCKET/PREFIX: objects PREFIX/NAME\n(default: NAME.v1.core beside each input)"},
    {"remove-source", 0, cli::Arg::none, "", "delete each source once its output has verified and\nrecords it"},
    {"no-digests", 0, cli::Arg::none, "", "do not write the digest trailer"},
    {"format", 0, cli::Arg::required, "FORMAT",
     "v1 (default) or kdump: compact files, makedumpfile's\ncompressed kdump format (default name NAME.kdump);\nv1 files are then converted too"},
    {"compress", 0, cli::Arg::required, "ALG", "kdump page compression: zstd (default), lz4, lzo,\nzlib, none"},
    {"dump-level", 0, cli::Arg::required, "N",
     "kdump: keep the pages of dump level N, as makedumpfile\ndoes (0-31: 1 zero, 2 cache, 4 private cache, 8 user\ndata, 16 free pages)"},
    {"recipient", 'r', cli::Arg::required, "RECIPIENT",
     "encrypt the outputs to RECIPIENT (age1… or ssh-ed25519\n…; repeatable): age files, NAME.v1.core.age"},
    {"recipients-file", 'R', cli::Arg::required, "FILE",
     "encrypt the outputs to the recipients in FILE, one a\nline as age -R reads it (repeatable)"},
    {"identity", 'i', cli::Arg::required, "FILE", cli::kIdentityOptions[0].help},
    {"allow-insecure-identity", 0, cli::Arg::none, "", cli::kIdentityOptions[1].help},
    {"decrypt", 0, cli::Arg::none, "",
     "write the output of an encrypted input in clear (without\n-r/-R such an input is refused: no plaintext on a disk\nunless asked for)"},
    {"system-map", 0, cli::Arg::required, "FILE",
     "legacy page-list dumps: the guest kernel's System.map, to\nfind the p2m through phys_to_machine_mapping and a\npage-table walk"},
    {"allow-inferred-layout", 0, cli::Arg::none, "",
     "legacy page-list dumps: when the pfns cannot be\nestablished, write the best inference and record it in\nthe output (LAYOUT=)"},
    {"jobs", 'j', cli::Arg::required, "N", "convert N files at a time (default 1)"},
    {"threads", 0, cli::Arg::required, "N",
     "threads of each conversion, 1 to 64 (default: the number\nof cores shared among the jobs, at most 64)"},
    {"dry-run", 'n', cli::Arg::none, "", "decide everything, write nothing"},
    {"json", 0, cli::Arg::none, "", "print the report as JSON instead of a table"},
    {"quiet", 'q', cli::Arg::none, "", "no table; failures are still reported on stderr"},
    {"version", 0, cli::Arg::none, "", "the version"},
};
static_assert(kMaxWriteThreads == 64, "--threads' help says 1 to 64");

}  // namespace xendump::convert
