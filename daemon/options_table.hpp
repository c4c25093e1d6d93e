// The command line of xen-dumpd (cli/cli_options.hpp): one row per option; the
// --help text, man/xen-dumpd.8 and completions/xen-dumpd hold the same rows
// (tests/cli/options_test.cpp).
#pragma once

#include "cli_options.hpp"
#include "xendump/writer.hpp"
#include "xendump_config.h"

namespace xendump::daemon {

inline constexpr cli::Option kDaemonOptions[] = {
    {"config", 0, cli::Arg::required, "FILE",
     "configuration file (default " XENDUMP_SYSCONFDIR "/xen-dumpd.conf,\ndrop-ins FILE.d/*.conf)"},
    {"host", 0, cli::Arg::required, "HOST", "xen or sim:DIR (default $XEN_DUMP_HOST, else xen)"},
    {"dump-dir", 0, cli::Arg::required, "DIR", "where dumps go (default " XENDUMP_DEFAULT_DUMP_DIR ")"},
    {"socket", 0, cli::Arg::required, "PATH", "control socket (default " XENDUMP_DEFAULT_CONTROL_SOCKET ")"},
    {"domain", 0, cli::Arg::required, "ID|NAME", "dump this domain and exit"},
    {"output", 'o', cli::Arg::required, "PATH", "write the dump to PATH ('-': standard output;\ns3://BUCKET/KEY: an S3 object)"},
    {"live", 0, cli::Arg::optional, "consistent|inconsistent|no",
     "dump the running guest: consistent (the default) copies\nit while it runs through log-dirty pre-copy and pauses\nit only for the last pages; inconsistent never pauses\nit (pages of different instants; records LIVE=); no:\npaused, whatever the service's Live= says"},
    {"max-pause", 0, cli::Arg::required, "MS",
     "--live: pause once what is left copies in MS\nmilliseconds (1-60000, default 100)"},
    {"live-rounds", 0, cli::Arg::required, "N",
     "--live: rounds of re-copying at most before the pause\n(0-100, default 5)"},
    {"leave-paused", 0, cli::Arg::none, "", "--live: the guest stays paused after the final round"},
    {"no-digests", 0, cli::Arg::none, "", "no page digests"},
    {"format", 0, cli::Arg::required, "FORMAT",
     "v1 or kdump: a compact file, makedumpfile's compressed\nkdump format (to standard output: its flattened\nstream); default Format=, else v1"},
    {"flattened", 'F', cli::Arg::none, "",
     "--format kdump -o FILE: makedumpfile's flattened format,\nas makedumpfile -F writes it (-o - always is)"},
    {"compress", 0, cli::Arg::required, "ALG", "kdump page compression: zstd (default), lz4, lzo,\nzlib, none"},
    {"dump-level", 0, cli::Arg::required, "N",
     "kdump: leave out what makedumpfile's dump level N does\n(0-31; 31: cache, user and free pages, and zero\npages take no room); with --estimate: that level's row too"},
    {"recipient", 'r', cli::Arg::required, "RECIPIENT",
     "encrypt the dump to RECIPIENT (age1… or ssh-ed25519 …;\nrepeatable): an age file, NAME.core.age (default\nRecipient= of the configuration)"},
    {"recipients-file", 'R', cli::Arg::required, "FILE",
     "encrypt the dump to the recipients in FILE, one a line\nas age -R reads it (repeatable)"},
    {"estimate", 0, cli::Arg::none, "", "print what each dump level would keep; write nothing"},
    {"json", 0, cli::Arg::optional, "short|pretty", "with --estimate: JSON instead of text (short: on one line)"},
    {"threads", 0, cli::Arg::required, "N",
     "threads of each dump, 1 to 64 (default Threads=, else\nthe number of cores, at most 64)"},
    {"quiet", 'q', cli::Arg::none, "", "no progress or warnings"},
    {"version", 0, cli::Arg::none, "", "the version"},
};
static_assert(kMaxWriteThreads == 64, "--threads' help says 1 to 64");

}  // namespace xendump::daemon
