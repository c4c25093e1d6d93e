// xen-dumpctl status [--json]: what the running service dumps now and what waits.
#include <cstdio>
#include <iostream>

#include "cli.hpp"
#include "commands.hpp"
#include "control_protocol.hpp"
#include "options.hpp"
#include "service_options.hpp"
#include "xendump/text.hpp"

namespace xendump::ctl {

namespace {
constexpr std::string_view kUsage = "xen-dumpctl status [--json[=short|pretty]] [--config FILE] [--socket PATH]";
}

int cmd_status(Args args) {
    auto p = parse_args(args);
    if (!p.error.empty()) return usage_error("status", p.error);
    auto sa = service_options(p);
    load_service_config(sa);
    if (p.help) {
        std::printf("usage: %.*s\n\nShow the running and queued dumps of xen-dumpd.\n%s", static_cast<int>(kUsage.size()),
                    kUsage.data(), options_help("status").c_str());
        return cli::kExitOk;
    }
    const int indent = p.json_indent(2);
    if (!p.error.empty()) return usage_error("status", p.error);
    if (!p.operands.empty()) return usage_error("status", "no operands expected");
    auto reply = daemon::control_request(sa.config.control_socket, {{"command", "status"}});
    if (reply.value("event", "") == "error") {
        std::fprintf(stderr, "xen-dumpctl status: %s\n", reply.value("message", "refused").c_str());
        return cli::kExitFailure;
    }
    if (p.has("--json")) {
        std::cout << reply.dump(indent) << "\n";
        return cli::kExitOk;
    }
    std::printf("xen-dumpd on %s, dumps in %s, MaxParallel=%u\n", reply.value("host", "?").c_str(),
                reply.value("dump_dir", "?").c_str(), reply.value("max_parallel", 1u));
    // Crashes a full dump filesystem stopped, dumped when there is room.
    for (const auto& c : reply.value("crashes_waiting_for_room", nlohmann::json::array()))
        std::printf("Crash of domain %u waits for room (%u attempts): %s\n", c.value("domid", 0u),
                    c.value("attempts", 0u), c.value("error", "").c_str());
    if (reply.contains("state_file_error"))
        std::printf("The crash state file cannot be written: %s\n", reply.value("state_file_error", "").c_str());
    const auto& jobs = reply["jobs"];
    if (jobs.empty()) {
        std::printf("No dumps running or queued.\n");
        return cli::kExitOk;
    }
    std::printf("%5s  %-8s %-16s %5s  %-8s %s\n", "JOB", "STATE", "DOMAIN", "ID", "REASON", "PROGRESS");
    for (const auto& j : jobs) {
        uint64_t done = j.value("bytes_done", uint64_t{0}), total = j.value("bytes_total", uint64_t{0});
        std::string progress = total ? std::to_string(done * 100 / total) + "% of " + cli::human_bytes(total) : "-";
        std::printf("%5llu  %-8s %-16s %5u  %-8s %s\n", static_cast<unsigned long long>(j.value("id", uint64_t{0})),
                    j.value("state", "").c_str(), escape_text(j.value("domain", "")).c_str(), j.value("domid", 0u),
                    j.value("reason", "").c_str(), progress.c_str());  // a guest's name may hold anything
    }
    return cli::kExitOk;
}

}  // namespace xendump::ctl
