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

int cmd_cancel(Invocation& c) {
    const ParsedArgs& p = c.p;
    if (p.operands.size() != 1 || p.operands[0].empty() ||
        p.operands[0].find_first_not_of("0123456789") != std::string::npos || p.operands[0].size() > 18)
        return c.usage("expected one job number");
    uint64_t id = std::stoull(p.operands[0]);
    auto reply = daemon::control_request(c.service.config.control_socket, {{"command", "cancel"}, {"id", id}});
    if (reply.value("event", "") != "cancelled") {
        std::fprintf(stderr, "xen-dumpctl cancel: %s\n", reply.value("message", "refused").c_str());
        return cli::kExitFailure;
    }
    std::printf("job %llu cancelled\n", static_cast<unsigned long long>(id));
    return cli::kExitOk;
}

}  // namespace xendump::ctl
