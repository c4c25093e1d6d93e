// xen-dumpctl status [--json]: what the running service dumps now and what waits.
#include <algorithm>
#include <cstdio>
#include <ctime>

#include "cli.hpp"
#include "table.hpp"
#include "commands.hpp"
#include "control_protocol.hpp"
#include "options.hpp"
#include "service_options.hpp"
#include "xendump/text.hpp"

namespace xendump::ctl {

int cmd_status(Invocation& c) {
    if (!c.p.operands.empty()) return c.usage("no operands expected");
    auto reply = daemon::control_request(c.service.config.control_socket, {{"command", "status"}});
    if (reply.value("event", "") == "error") {
        std::fprintf(stderr, "xen-dumpctl status: %s\n", reply.value("message", "refused").c_str());
        return cli::kExitFailure;
    }
    if (c.json) {
        print_json(reply, c.json);
        return cli::kExitOk;
    }
    // --no-legend: the job rows alone (and what waits, which is not a legend).
    const bool legend = !c.p.has("--no-legend");
    if (legend)
        std::printf("xen-dumpd on %s, dumps in %s, MaxParallel=%u\n", reply.value("host", "?").c_str(),
                    reply.value("dump_dir", "?").c_str(), reply.value("max_parallel", 1u));
    // Crashes a full dump filesystem stopped, dumped when there is room.
    for (const auto& c : reply.value("crashes_waiting_for_room", nlohmann::json::array()))
        std::printf("Crash of domain %u waits for room (%u attempts): %s\n", c.value("domid", 0u),
                    c.value("attempts", 0u), escape_text(c.value("error", "")).c_str());
    // Dumps waiting for (or in) their upload to object storage ([Upload]).
    const int64_t now = std::time(nullptr);
    for (const auto& u : reply.value("uploads", nlohmann::json::array())) {
        const uint64_t done = u.value("bytes_done", uint64_t{0}), total = u.value("bytes_total", uint64_t{0});
        std::string line = "Upload of " + u.value("dump", std::string()) + " to " + u.value("target", std::string("?"));
        if (total) line += ": " + std::to_string(done * 100 / total) + "% of " + cli::human_bytes(total);
        if (u.value("state", "") == "uploading") {
            line += ", uploading";
        } else {
            line += ", waiting";
            const unsigned attempts = u.value("attempts", 0u);
            if (attempts) line += " (" + std::to_string(attempts) + " attempt" + (attempts == 1 ? "" : "s") + " failed";
            if (u.contains("next_attempt")) {
                const int64_t in = std::max<int64_t>(0, u.value("next_attempt", int64_t{0}) - now);
                line += std::string(attempts ? ", " : " (") + "next in " + std::to_string(in) + " s";
            }
            if (attempts || u.contains("next_attempt")) line += ")";
            const std::string why = u.value("error", "");
            if (!why.empty()) line += ": " + why;
        }
        std::printf("%s\n", escape_text(line).c_str());
    }
    if (reply.contains("state_file_error"))
        std::printf("The crash state file cannot be written: %s\n", reply.value("state_file_error", "").c_str());
    const auto& jobs = reply["jobs"];
    if (jobs.empty()) {
        if (legend) std::printf("No dumps running or queued.\n");
        return cli::kExitOk;
    }
    cli::Table table({{"JOB", true}, {"STATE"}, {"DOMAIN"}, {"ID", true}, {"REASON"}, {"PROGRESS"}});
    for (const auto& j : jobs) {
        uint64_t done = j.value("bytes_done", uint64_t{0}), total = j.value("bytes_total", uint64_t{0});
        std::string progress = total ? std::to_string(done * 100 / total) + "% of " + cli::human_bytes(total) : "-";
        // Before the page pass: the guest's pages are being found (pfns examined).
        if (j.value("finding_pages", false)) {
            const uint64_t pfns = j.value("pfns_done", uint64_t{0}), of = j.value("pfns_total", uint64_t{0});
            progress = "finding pages " + (of ? std::to_string(pfns * 100 / of) + "%" : std::string("-"));
        }
        // A live dump after its pass: its pre-copy rounds.
        if (const unsigned round = j.value("live_round", 0u))
            progress = cli::live_round_text(round, j.value("dirty_pages", uint64_t{0}), j.value("live_final", false));
        // A guest's name may hold anything: escaped.
        table.add_row({std::to_string(j.value("id", uint64_t{0})), j.value("state", ""),
                       escape_text(j.value("domain", "")), std::to_string(j.value("domid", 0u)),
                       escape_text(j.value("reason", "")), progress});
    }
    table.print(legend);
    return cli::kExitOk;
}

}  // namespace xendump::ctl
