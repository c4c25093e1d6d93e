// The command line of xen-dump-convert.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "xendump/kdump.hpp"
#include "xendump/reader.hpp"

namespace xendump::convert {

struct Options {
    std::vector<std::string> inputs;          // files and directories (recursive)
    std::optional<std::string> output;        // -o FILE (one input file only)
    std::optional<std::string> output_dir;    // --output-dir DIR
    std::optional<std::string> system_map;    // --system-map FILE
    bool allow_inferred = false;              // --allow-inferred-layout
    bool remove_source = false;               // --remove-source
    bool dry_run = false;                     // --dry-run
    bool json = false;                        // --json
    bool digests = true;                      // --no-digests turns off
    bool quiet = false;                       // -q: no table, errors only
    unsigned jobs = 1;                        // -j N
    bool kdump = false;                       // --format kdump
    Compression compression = Compression::zstd;  // --compress ALG (kdump)
    unsigned dump_level = 0;                  // --dump-level N (kdump)
    unsigned threads = 1;                     // --threads N, default: the cores shared among the jobs
    std::vector<std::string> recipients;      // -r/-R (canonical): encrypted outputs, NAME.v1.core.age
    OpenOptions open;                         // -i/$XEN_DUMP_IDENTITY, --allow-insecure-identity: encrypted inputs
    bool decrypt = false;                     // --decrypt: an encrypted input's output in clear
};

enum class ParseStatus { run, exit_ok, usage_error };

// Parses argv; prints help/version/usage errors itself.
ParseStatus parse_options(int argc, char** argv, Options& out);

}  // namespace xendump::convert
