// xen-dumpctl vacuum: apply MaxUse=, KeepFree=, KeepPerDomain= and MaxAge=
// to the dump directory now, oldest dumps first. Dumps being written are
// invisible temporaries, so they are never touched.
#include <cstdio>

#include "cli.hpp"
#include "commands.hpp"
#include "dump_dir.hpp"
#include "journal_log.hpp"
#include "options.hpp"
#include "service_options.hpp"

namespace xendump::ctl {

namespace {
constexpr std::string_view kUsage = "xen-dumpctl vacuum [--config FILE] [--dump-dir DIR]";
}

int cmd_vacuum(Args args) {
    auto sa = parse_service_args(args);
    if (!sa.error.empty()) return usage_error("vacuum", sa.error, kUsage);
    auto p = parse_args(sa.args(), {});
    if (p.help) {
        std::printf("usage: %.*s\n\nRemove the oldest dumps until the storage limits of the configuration hold.\n",
                    static_cast<int>(kUsage.size()), kUsage.data());
        return cli::kExitOk;
    }
    if (!p.error.empty()) return usage_error("vacuum", p.error, kUsage);
    if (!p.operands.empty()) return usage_error("vacuum", "no operands expected", kUsage);
    daemon::log_set_enabled(false);  // we print what goes
    auto removed = daemon::vacuum_dump_dir(sa.config);
    for (const auto& r : removed) std::printf("removed %s\n", r.c_str());
    if (removed.empty()) std::printf("Nothing to remove in %s.\n", sa.config.dump_dir.c_str());
    return cli::kExitOk;
}

}  // namespace xendump::ctl
