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

int cmd_vacuum(Invocation& c) {
    const ServiceArgs& sa = c.service;
    if (!c.p.operands.empty()) return c.usage("no operands expected");
    // A configuration that does not load was refused before (run_command):
    // nothing is removed by limits that are not the configured ones.
    const bool dry_run = c.p.has("--dry-run");
    daemon::log_set_enabled(false);  // we print what goes
    auto removed = dry_run ? daemon::plan_vacuum(sa.config) : daemon::vacuum_dump_dir(sa.config);
    for (const auto& r : removed) std::printf("%s %s\n", dry_run ? "would remove" : "removed", escape_text(r).c_str());
    if (removed.empty()) std::printf("Nothing to remove in %s.\n", escape_text(sa.config.dump_dir.string()).c_str());
    return cli::kExitOk;
}

}  // namespace xendump::ctl
