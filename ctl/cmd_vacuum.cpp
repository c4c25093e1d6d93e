// xen-dumpctl vacuum [--dry-run]: apply MaxUse=, KeepFree=, KeepPerDomain=
// and MaxAge= to the dump directory now, manual dumps before crash dumps,
// oldest first (see retention.hpp). Dumps being written are invisible
// temporaries, so they are never touched. The directory is never created.
#include <cstdio>

#include "cli.hpp"
#include "commands.hpp"
#include "dump_dir.hpp"
#include "journal_log.hpp"
#include "options.hpp"
#include "service_options.hpp"
#include "xendump/text.hpp"

namespace xendump::ctl {

namespace {
constexpr std::string_view kUsage = "xen-dumpctl vacuum [--dry-run] [--config FILE] [--dump-dir DIR]";
}

int cmd_vacuum(Args args) {
    auto p = parse_args(args);
    if (!p.error.empty()) return usage_error("vacuum", p.error);
    auto sa = service_options(p);
    load_service_config(sa, BadConfig::refuse);
    if (p.help) {
        std::printf("usage: %.*s\n\nRemove dumps until the storage limits of the configuration hold: manual dumps\n"
                    "before crash dumps, oldest first. The dump directory must exist.\n\n%s",
                    static_cast<int>(kUsage.size()), kUsage.data(), options_help("vacuum").c_str());
        return cli::kExitOk;
    }
    if (!p.error.empty()) return usage_error("vacuum", p.error);
    if (!p.operands.empty()) return usage_error("vacuum", "no operands expected");
    // Removing dumps by limits that are not the configured ones loses dumps.
    if (!sa.config_error.empty()) {
        std::fprintf(stderr, "xen-dumpctl vacuum: not removing anything: %s\n", sa.config_error.c_str());
        return cli::kExitFailure;
    }
    const bool dry_run = p.has("--dry-run");
    daemon::log_set_enabled(false);  // we print what goes
    auto removed = dry_run ? daemon::plan_vacuum(sa.config) : daemon::vacuum_dump_dir(sa.config);
    for (const auto& r : removed) std::printf("%s %s\n", dry_run ? "would remove" : "removed", escape_text(r).c_str());
    if (removed.empty()) std::printf("Nothing to remove in %s.\n", escape_text(sa.config.dump_dir.string()).c_str());
    return cli::kExitOk;
}

}  // namespace xendump::ctl
