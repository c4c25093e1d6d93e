#include "options.hpp"

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "xendump/error.hpp"
#include "xendump/kdump.hpp"
#include "xendump_config.h"

namespace xendump::convert {
namespace {

constexpr const char* kHelp =
    "usage: xen-dump-convert [OPTIONS] FILE|DIR...\n"
    "\n"
    "Convert old Xen guest dumps (legacy xc_core files of Xen <= 3.0.4 and the\n"
    "section-only ELF files of 'xl dump-core') into xen-dump-core v1 files.\n"
    "Formats are recognised from the bytes; v1 files are left alone. Directories\n"
    "are searched recursively. Sources are never modified.\n"
    "\n"
    "Output:\n"
    "  -o, --output FILE        output file (one input only)\n"
    "      --output-dir DIR     write outputs under DIR, keeping the input names\n"
    "                           (default: NAME.v1.core beside each input)\n"
    "      --remove-source      delete each source once its output has verified and\n"
    "                           records it\n"
    "      --no-digests         do not write the digest trailer\n"
    "      --format FORMAT      v1 (default) or kdump: compact files, makedumpfile's\n"
    "                           compressed kdump format (default name NAME.kdump);\n"
    "                           v1 files are then converted too\n"
    "      --compress ALG       kdump page compression: zstd (default), lz4, lzo,\n"
    "                           zlib, none\n"
    "\n"
    "Page layout of legacy page-list dumps:\n"
    "      --system-map FILE    the guest kernel's System.map: find the p2m through\n"
    "                           phys_to_machine_mapping and a page-table walk\n"
    "      --allow-inferred-layout\n"
    "                           when the pfns cannot be established, write the best\n"
    "                           inference and record it in the output (LAYOUT=)\n"
    "\n"
    "Batch:\n"
    "  -j, --jobs N             convert N files at a time (default 1)\n"
    "  -n, --dry-run            decide everything, write nothing\n"
    "      --json               print the report as JSON instead of a table\n"
    "  -q, --quiet              no table; failures are still reported on stderr\n"
    "  -h, --help               this text\n"
    "      --version            the version\n"
    "\n"
    "Files of no known format (sidecars, text) are skipped, not failed. An output\n"
    "that exists is taken as done only when it records this very source\n"
    "(SOURCE_ID=: size, mtime, digest), and only then is a source removed.\n"
    "\n"
    "Exit status: 0 nothing failed (every file converted or skipped), 1 at least\n"
    "one file failed, 2 usage error or the batch could not start.\n";

void usage_error(const std::string& msg) {
    std::fprintf(stderr, "xen-dump-convert: %s (see --help)\n", msg.c_str());
}

}  // namespace

ParseStatus parse_options(int argc, char** argv, Options& o) {
    bool only_inputs = false;
    bool compress_given = false;
    std::string format = "v1";  // checked once every argument is known
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        auto value = [&](const char* name) -> std::optional<std::string> {
            std::string prefix = std::string(name) + "=";
            if (a.starts_with(prefix)) return std::string(a.substr(prefix.size()));
            if (i + 1 >= argc) {
                usage_error(std::string(name) + " needs a value");
                return std::nullopt;
            }
            return std::string(argv[++i]);
        };
        auto is = [&](const char* long_name, const char* short_name = nullptr) {
            return a == long_name || (short_name && a == short_name) ||
                   a.starts_with(std::string(long_name) + "=");
        };
        if (only_inputs || a.empty() || a[0] != '-' || a == "-") {
            o.inputs.emplace_back(a);
        } else if (a == "--") {
            only_inputs = true;
        } else if (a == "-h" || a == "--help") {
            std::fputs(kHelp, stdout);
            return ParseStatus::exit_ok;
        } else if (a == "--version") {
            std::printf("xen-dump-convert %s\n", XENDUMP_VERSION);
            return ParseStatus::exit_ok;
        } else if (is("--output", "-o")) {
            auto v = value("--output");
            if (!v) return ParseStatus::usage_error;
            o.output = *v;
        } else if (is("--output-dir")) {
            auto v = value("--output-dir");
            if (!v) return ParseStatus::usage_error;
            o.output_dir = *v;
        } else if (is("--system-map")) {
            auto v = value("--system-map");
            if (!v) return ParseStatus::usage_error;
            o.system_map = *v;
        } else if (is("--jobs", "-j")) {
            auto v = value("--jobs");
            if (!v) return ParseStatus::usage_error;
            char* end = nullptr;
            unsigned long n = std::strtoul(v->c_str(), &end, 10);
            if (v->empty() || *end != '\0' || n == 0 || n > 256) {
                usage_error("--jobs wants a number from 1 to 256, not '" + *v + "'");
                return ParseStatus::usage_error;
            }
            o.jobs = static_cast<unsigned>(n);
        } else if (a.starts_with("-j") && a.size() > 2) {
            char* end = nullptr;
            unsigned long n = std::strtoul(argv[i] + 2, &end, 10);
            if (*end != '\0' || n == 0 || n > 256) {
                usage_error("--jobs wants a number from 1 to 256, not '" + std::string(a.substr(2)) + "'");
                return ParseStatus::usage_error;
            }
            o.jobs = static_cast<unsigned>(n);
        } else if (is("--format")) {
            auto v = value("--format");
            if (!v) return ParseStatus::usage_error;
            format = *v;
        } else if (is("--compress")) {
            auto v = value("--compress");
            if (!v) return ParseStatus::usage_error;
            o.compression = *v;
            compress_given = true;
        } else if (a == "--allow-inferred-layout") {
            o.allow_inferred = true;
        } else if (a == "--remove-source") {
            o.remove_source = true;
        } else if (a == "--dry-run" || a == "-n") {
            o.dry_run = true;
        } else if (a == "--json") {
            o.json = true;
        } else if (a == "--no-digests") {
            o.digests = false;
        } else if (a == "--quiet" || a == "-q") {
            o.quiet = true;
        } else {
            usage_error("unknown option '" + std::string(a) + "'");
            return ParseStatus::usage_error;
        }
    }
    if (o.inputs.empty()) {
        usage_error("no input given");
        return ParseStatus::usage_error;
    }
    if (o.output && o.output_dir) {
        usage_error("-o and --output-dir exclude each other");
        return ParseStatus::usage_error;
    }
    if (format != "v1" && format != "kdump") {
        usage_error("--format wants v1 or kdump, not '" + format + "'");
        return ParseStatus::usage_error;
    }
    o.kdump = format == "kdump";
    try {
        (void)compression_from_string(o.compression);
    } catch (const Error& e) {
        usage_error(e.message());
        return ParseStatus::usage_error;
    }
    if (compress_given && !o.kdump) {
        usage_error("--compress needs --format kdump");
        return ParseStatus::usage_error;
    }
    if (o.remove_source && o.dry_run) {
        usage_error("--remove-source and --dry-run exclude each other");
        return ParseStatus::usage_error;
    }
    return ParseStatus::run;
}

}  // namespace xendump::convert
