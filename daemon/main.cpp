// xen-dumpd: the service (no --domain) or a one-shot dump (--domain).
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "one_shot.hpp"
#include "xendump/error.hpp"
#include "xendump/kdump.hpp"
#include "service.hpp"
#include "xendump_config.h"

namespace {

const char* kUsage =
    "Usage: xen-dumpd [--config FILE] [--host HOST] [--dump-dir DIR] [--socket PATH]\n"
    "       xen-dumpd --domain ID|NAME [-o PATH|-] [--live] [--host HOST] [--dump-dir DIR]\n"
    "                 [--no-digests] [--format v1|kdump] [--compress ALG] [-q|--quiet]\n"
    "\n"
    "Without --domain, runs the dump service in the foreground (for systemd): dumps\n"
    "crashed domains, answers requests on the control socket, applies storage limits.\n"
    "With --domain, dumps one domain (through the service when it runs) and prints\n"
    "the path of the dump.\n"
    "\n"
    "  --config FILE    configuration file (default " XENDUMP_SYSCONFDIR "/xen-dumpd.conf, drop-ins FILE.d/*.conf)\n"
    "  --host HOST      xen or sim:DIR (default $XEN_DUMP_HOST, else xen)\n"
    "  --dump-dir DIR   where dumps go (default " XENDUMP_DEFAULT_DUMP_DIR ")\n"
    "  --socket PATH    control socket (default " XENDUMP_DEFAULT_CONTROL_SOCKET ")\n"
    "  --domain ID|NAME dump this domain and exit\n"
    "  -o, --output PATH  write the dump to PATH ('-': standard output)\n"
    "  --live           do not pause the domain (records PAUSED=0)\n"
    "  --no-digests     no page digests\n"
    "  --format FORMAT  v1 (default) or kdump: a compact file, makedumpfile's\n"
    "                   compressed kdump format (not to standard output)\n"
    "  --compress ALG   kdump page compression: zstd (default), lz4, lzo, zlib, none\n"
    "  -q, --quiet      no progress or warnings\n"
    "  -h, --help       this help\n"
    "  --version        the version\n";

int usage_error(const std::string& msg) {
    std::cerr << "xen-dumpd: " << msg << "\n" << kUsage;
    return xendump::cli::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace xendump::daemon;
    std::vector<std::string> args(argv + 1, argv + argc);
    ServiceOptions service;
    service.config_file = default_config_file();
    OneShotOptions one;
    bool have_domain = false;
    bool one_shot_only = false;  // options that make no sense for the service
    std::string format = "v1";
    std::optional<std::string> compress;  // values checked once every argument is known
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&](std::string& out) {
            auto eq = a.find('=');
            if (a.starts_with("--") && eq != std::string::npos) {
                out = a.substr(eq + 1);
                return true;
            }
            if (i + 1 >= args.size()) return false;
            out = args[++i];
            return true;
        };
        auto is = [&](const char* name) { return a == name || a.starts_with(std::string(name) + "="); };
        std::string v;
        if (a == "--help" || a == "-h") {
            std::cout << kUsage;
            return 0;
        } else if (a == "--version") {
            std::cout << "xen-dumpd " XENDUMP_VERSION "\n";
            return 0;
        } else if (is("--config")) {
            if (!value(v)) return usage_error("--config needs a file");
            service.config_file = v;
        } else if (is("--host")) {
            if (!value(v)) return usage_error("--host needs a value");
            service.overrides.host = v;
        } else if (is("--dump-dir")) {
            if (!value(v)) return usage_error("--dump-dir needs a directory");
            service.overrides.dump_dir = std::filesystem::absolute(v);
        } else if (is("--socket")) {
            if (!value(v)) return usage_error("--socket needs a path");
            service.overrides.control_socket = std::filesystem::absolute(v);
        } else if (is("--domain")) {
            if (!value(v)) return usage_error("--domain needs an id or name");
            one.domain = v;
            have_domain = true;
        } else if (a == "-o" || is("--output")) {
            if (!value(v)) return usage_error("-o needs a path or -");
            one.output = v;
            one_shot_only = true;
        } else if (a == "--live") {
            one.live = true;
            one_shot_only = true;
        } else if (a == "--no-digests") {
            one.digests = false;
            one_shot_only = true;
        } else if (is("--format")) {
            if (!value(format)) return usage_error("--format needs v1 or kdump");
            one_shot_only = true;
        } else if (is("--compress")) {
            if (!value(v)) return usage_error("--compress needs an algorithm");
            compress = v;
            one_shot_only = true;
        } else if (a == "--quiet" || a == "-q") {
            one.quiet = true;
            one_shot_only = true;
        } else {
            return usage_error("unknown argument \"" + a + "\"");
        }
    }
    if (one_shot_only && !have_domain)
        return usage_error("-o, --live, --no-digests, --format, --compress and --quiet need --domain");
    if (format != "v1" && format != "kdump") return usage_error("--format must be v1 or kdump, not \"" + format + "\"");
    one.kdump = format == "kdump";
    if (compress) {
        if (!one.kdump) return usage_error("--compress needs --format kdump");
        try {
            one.compression = xendump::compression_from_string(*compress);
        } catch (const xendump::Error& e) {
            return usage_error(e.message());
        }
    }
    if (one.kdump && one.output == std::string("-"))
        return usage_error("--format kdump writes a file, not standard output (its headers are written last)");
    if (!have_domain) return run_service(service);
    one.config_file = service.config_file;
    one.overrides = service.overrides;
    return run_one_shot(one);
}
