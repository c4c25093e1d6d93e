// xen-dumpd: the service (no --domain) or a one-shot dump (--domain).
#include <chrono>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "dump_format.hpp"
#include "json_style.hpp"
#include "one_shot.hpp"
#include "options_table.hpp"
#include "recipients.hpp"
#include "dump_job.hpp"
#include "service.hpp"
#include "xendump/writer.hpp"
#include "xendump_config.h"

namespace {

const char* kUsage =
    "Usage: xen-dumpd [--config FILE] [--host HOST] [--dump-dir DIR] [--socket PATH] [--threads N]\n"
    "       xen-dumpd --domain ID|NAME [-o PATH|-] [--live[=inconsistent|no]] [--max-pause MS]\n"
    "                 [--live-rounds N] [--leave-paused] [--host HOST] [--dump-dir DIR]\n"
    "                 [--no-digests] [--format v1|kdump] [--compress ALG] [--dump-level N] [-F]\n"
    "                 [-r RECIPIENT]... [-R FILE]... [--threads N] [-q|--quiet]\n"
    "       xen-dumpd --domain ID|NAME --estimate [--dump-level N] [--json[=short|pretty]] [--live]\n"
    "                 [--host HOST]\n"
    "\n"
    "Without --domain, runs the dump service in the foreground (for systemd): dumps\n"
    "crashed domains, answers requests on the control socket, applies storage limits.\n"
    "With --domain, dumps one domain (through the service when it runs) and prints\n"
    "the path of the dump; with --estimate, prints the pages and bytes each dump\n"
    "level would keep of it (like makedumpfile --mem-usage) and writes nothing.\n"
    "\n";

int usage_error(const std::string& msg) { return xendump::cli::usage_error("xen-dumpd", msg); }

}  // namespace

int main(int argc, char** argv) {
    using namespace xendump::daemon;
    ServiceOptions service;
    service.config_file = default_config_file();
    OneShotOptions one;
    xendump::cli::Parsed p;
    try {
        p = xendump::cli::parse(kDaemonOptions, argc, argv);
    } catch (const xendump::cli::UsageError& e) {
        return usage_error(e.message);
    }
    if (p.help) {
        std::cout << kUsage << xendump::cli::options_help(kDaemonOptions);
        return 0;
    }
    if (p.has("--version")) {
        std::cout << "xen-dumpd " XENDUMP_VERSION "\n";
        return 0;
    }
    if (!p.operands.empty()) return usage_error("unexpected argument \"" + p.operands.front() + "\"");
    if (auto v = p.value("--config")) service.config_file = *v;
    if (auto v = p.value("--host")) service.overrides.host = *v;
    if (auto v = p.value("--dump-dir")) service.overrides.dump_dir = std::filesystem::absolute(*v);
    if (auto v = p.value("--socket")) service.overrides.control_socket = std::filesystem::absolute(*v);
    try {
        service.overrides.threads = p.number("--threads", 1, xendump::kMaxWriteThreads);
    } catch (const xendump::cli::UsageError& e) {
        return usage_error(e.message);
    }
    const bool have_domain = p.has("--domain");
    if (auto v = p.value("--domain")) one.domain = *v;
    if (auto v = p.value("--output")) one.output = *v;
    if (p.has("--live")) {
        const std::string how = p.value("--live").value_or("consistent");
        if (how == "inconsistent") one.live = true;
        else if (how == "consistent") one.precopy.on = true;
        else if (how == "no") one.paused = true;
        else return usage_error("--live takes consistent, inconsistent or no, not '" + how + "'");
    }
    try {
        if (auto ms = p.number("--max-pause", 1, 60000)) one.precopy.max_pause = std::chrono::milliseconds(*ms);
        if (auto n = p.number("--live-rounds", 0, kMaxLiveRounds)) one.precopy.max_rounds = *n;
    } catch (const xendump::cli::UsageError& e) {
        return usage_error(e.message);
    }
    one.precopy.leave_paused = p.has("--leave-paused");
    if ((p.has("--max-pause") || p.has("--live-rounds") || p.has("--leave-paused")) && !one.precopy.on)
        return usage_error("--max-pause, --live-rounds and --leave-paused need --live (consistent)");
    one.digests = !p.has("--no-digests");
    one.quiet = p.has("--quiet");
    // Options that make no sense for the service.
    const bool one_shot_only = p.has("--output") || p.has("--live") || p.has("--max-pause") ||
                               p.has("--live-rounds") || p.has("--leave-paused") || p.has("--no-digests") ||
                               p.has("--quiet") ||
                               p.has("--format") || p.has("--compress") || p.has("--dump-level") || p.has("--flattened") ||
                               p.has("--estimate") || p.has("--recipient") || p.has("--recipients-file");
    if (one_shot_only && !have_domain)
        return usage_error(
            "-o, --live, --max-pause, --live-rounds, --leave-paused, --no-digests, --format, --compress, "
            "--dump-level, -F, -r, -R, --estimate and --quiet need --domain");
    one.estimate = p.has("--estimate");
    if (p.has("--json") && !one.estimate) return usage_error("--json needs --estimate");
    if (one.estimate && (p.has("--output") || p.has("--no-digests") || p.has("--format") || p.has("--compress") ||
                         p.has("--flattened") || p.has("--threads") || p.has("--recipient") ||
                         p.has("--recipients-file")))
        return usage_error("--estimate writes no dump: it takes no -o, --no-digests, --format, --compress, -F, "
                           "-r, -R or --threads");
    try {
        one.json = xendump::cli::json_style(p);
        // With --estimate, --dump-level N adds level N's row (a compact dump's level, no --format).
        if (one.estimate) one.estimate_level = xendump::cli::dump_level_choice(p);
        const xendump::cli::DumpFormatChoice format =
            one.estimate ? xendump::cli::DumpFormatChoice{} : xendump::cli::dump_format_choice(p);
        if (p.has("--format")) one.format = DumpFormat{format.kdump, format.compression, format.dump_level};
        if (p.has("--recipient") || p.has("--recipients-file")) one.recipients = xendump::cli::recipients_choice(p);
    } catch (const xendump::cli::UsageError& e) {
        return usage_error(e.message);
    }
    // A compact dump to standard output is the flattened stream; -F asks for it in a file too.
    one.flattened = p.has("--flattened");
    if (one.flattened && !(one.format && one.format->kdump && one.output && !one.output->starts_with("s3://")))
        return usage_error("--flattened needs --format kdump and -o FILE (or -o -, which is flattened anyway)");
    if (!have_domain) return run_service(service);
    one.config_file = service.config_file;
    one.overrides = service.overrides;
    return run_one_shot(one);
}
