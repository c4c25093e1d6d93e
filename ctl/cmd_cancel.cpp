// xen-dumpctl cancel ID: stop a queued or running dump of the service. A
// running dump stops cleanly: no partial file, the domain is unpaused.
#include <cstdio>
#include <string>

#include "cli.hpp"
#include "commands.hpp"
#include "control_protocol.hpp"
#include "options.hpp"
#include "service_options.hpp"

namespace xendump::ctl {

namespace {
constexpr std::string_view kUsage = "xen-dumpctl cancel [--config FILE] [--socket PATH] JOB";
}

int cmd_cancel(Args args) {
    auto p = parse_args(args);
    if (!p.error.empty()) return usage_error("cancel", p.error);
    auto sa = service_options(p);
    load_service_config(sa);
    if (p.help) {
        std::printf("usage: %.*s\n\nCancel a dump of xen-dumpd (JOB as shown by xen-dumpctl status).\n%s",
                    static_cast<int>(kUsage.size()), kUsage.data(), options_help("cancel").c_str());
        return cli::kExitOk;
    }
    if (!p.error.empty()) return usage_error("cancel", p.error);
    if (p.operands.size() != 1 || p.operands[0].empty() ||
        p.operands[0].find_first_not_of("0123456789") != std::string::npos || p.operands[0].size() > 18)
        return usage_error("cancel", "expected one job number");
    uint64_t id = std::stoull(p.operands[0]);
    auto reply = daemon::control_request(sa.config.control_socket, {{"command", "cancel"}, {"id", id}});
    if (reply.value("event", "") != "cancelled") {
        std::fprintf(stderr, "xen-dumpctl cancel: %s\n", reply.value("message", "refused").c_str());
        return cli::kExitFailure;
    }
    std::printf("job %llu cancelled\n", static_cast<unsigned long long>(id));
    return cli::kExitOk;
}

}  // namespace xendump::ctl
