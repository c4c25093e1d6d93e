// xen-dump-sim: the simulated Xen host's own tool (simulated-host.md,
// "xen-dump-sim: the host's own tool"): xendump::SimulatedHost of the public
// API (xendump/simulated_host.hpp), the host the "sim:DIR" hypervisor backend
// dumps from, and a command line.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "options_table.hpp"
#include "xendump/error.hpp"
#include "xendump/simulated_host.hpp"
#include "xendump_config.h"

namespace {

using namespace xendump;
namespace cli = xendump::cli;

constexpr const char* kUsage =
    "Usage: xen-dump-sim COMMAND ARGS...\n"
    "A simulated Xen host kept in a directory, for testing xen-dumpd and its tools\n"
    "(select it elsewhere with --host sim:DIR or XEN_DUMP_HOST=sim:DIR).\n"
    "\n"
    "Commands:\n"
    "  create DIR SPEC.json            build a host in DIR (new or empty) from a JSON spec\n"
    "  add DIR SPEC.json               add the domains of a spec to the host in DIR (new ids and names)\n"
    "  list DIR [--json]               the domains, their state and pages\n"
    "  info DIR DOMID [--json]         one domain: its spec plus p2m_pfns, nr_pages, shared_info_mfn\n"
    "  crash DIR DOMID                 the domain crashes (shutdown reason crash); watchers are told\n"
    "  destroy DIR DOMID               the domain disappears; watchers are told\n"
    "  pause DIR DOMID                 as xl pause\n"
    "  unpause DIR DOMID               as xl unpause\n"
    "  balloon DIR DOMID PFN COUNT     the guest gives pfns PFN..PFN+COUNT-1 back (p2m entries become ~0)\n"
    "  unballoon DIR DOMID PFN COUNT   the guest takes ballooned pfns back (p2m entries name their frames)\n"
    "\n"
    "DOMID is a domain id or a domain name.\n"
    "Exit status: 0 success, 1 failure, 2 bad command line.\n"
    "\n"
    "Options:\n";

struct UsageError {
    std::string message;
};

bool parse_u64(const std::string& s, uint64_t& out) {
    if (s.empty()) return false;
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(s.c_str(), &end, 0);
    if (errno != 0 || *end != '\0' || s[0] == '-') return false;
    out = v;
    return true;
}

uint64_t number_arg(const std::string& s, const char* what) {
    uint64_t v = 0;
    if (!parse_u64(s, v)) throw UsageError{std::string(what) + " \"" + s + "\" is not a number"};
    return v;
}

uint32_t resolve(const SimulatedHost& host, const std::string& id) {
    uint64_t v = 0;
    if (parse_u64(id, v)) {
        if (v > UINT32_MAX) throw UsageError{"domain id \"" + id + "\" is out of range"};
        return static_cast<uint32_t>(v);
    }
    if (auto domid = host.find_domain(id)) return *domid;
    throw Error("no such domain", id);
}

void print_list(const nlohmann::json& list) {
    std::printf("%-6s %-24s %-4s %-10s %12s\n", "DOMID", "NAME", "TYPE", "STATE", "PAGES");
    for (const auto& d : list)
        std::printf("%-6u %-24s %-4s %-10s %12llu\n", d["domid"].get<unsigned>(), d["name"].get<std::string>().c_str(),
                    d["type"].get<std::string>().c_str(), d["state"].get<std::string>().c_str(),
                    static_cast<unsigned long long>(d["nr_pages"].get<uint64_t>()));
}

void print_info(const nlohmann::json& j) {
    for (const char* key : {"domid", "name", "uuid", "type", "guest_width", "vcpus", "state", "p2m_size", "p2m_format",
                            "nr_pages", "max_pages", "shared_info_mfn"}) {
        if (!j.contains(key)) continue;
        const auto& v = j[key];
        std::printf("%-16s %s\n", key, v.is_string() ? v.get<std::string>().c_str() : v.dump().c_str());
    }
    std::printf("%-16s %zu pages\n", "p2m_pfns", j["p2m_pfns"].size());
}

int run(int argc, char** argv) {
    cli::Parsed p;
    try {
        p = cli::parse(sim::kSimOptions, argc, argv);
    } catch (cli::UsageError& e) {
        throw UsageError{e.message};
    }
    if (p.help) {
        std::fputs(kUsage, stdout);
        std::fputs(cli::options_help(sim::kSimOptions).c_str(), stdout);
        return cli::kExitOk;
    }
    if (p.has("--version")) {
        std::printf("xen-dump-sim %s\n", XENDUMP_VERSION);
        return cli::kExitOk;
    }
    const bool json = p.has("--json");
    const std::vector<std::string>& pos = p.operands;
    if (pos.empty()) throw UsageError{"no command given"};
    const std::string cmd = pos[0];
    auto want = [&](size_t n, const char* shape) {
        if (pos.size() != n) throw UsageError{"usage: xen-dump-sim " + std::string(shape)};
    };
    if (json && cmd != "list" && cmd != "info") throw UsageError{"--json applies to list and info only"};
    if (cmd == "create") {
        want(3, "create DIR SPEC.json");
        SimulatedHost::create(pos[1], pos[2]);
        return cli::kExitOk;
    }
    if (cmd == "add") {
        want(3, "add DIR SPEC.json");
        SimulatedHost::add(pos[1], pos[2]);
        return cli::kExitOk;
    }
    if (cmd == "list") {
        want(2, "list DIR [--json]");
        SimulatedHost host(pos[1]);
        if (json) std::cout << host.list_json(2) << "\n";
        else print_list(nlohmann::json::parse(host.list_json()));
        return cli::kExitOk;
    }
    static const std::vector<std::string> domain_cmds = {"info",    "crash",   "destroy",
                                                        "pause",   "unpause", "balloon",
                                                        "unballoon"};
    if (std::find(domain_cmds.begin(), domain_cmds.end(), cmd) == domain_cmds.end())
        throw UsageError{"unknown command \"" + cmd + "\""};
    const bool ballooning = cmd == "balloon" || cmd == "unballoon";
    if (ballooning) want(5, (cmd + " DIR DOMID PFN COUNT").c_str());
    else want(3, (cmd + " DIR DOMID").c_str());
    uint64_t pfn = 0, count = 0;
    if (ballooning) {
        pfn = number_arg(pos[3], "PFN");
        count = number_arg(pos[4], "COUNT");
    }
    SimulatedHost host(pos[1]);
    const uint32_t domid = resolve(host, pos[2]);
    if (cmd == "info") {
        if (json) std::cout << host.info_json(domid, 2) << "\n";
        else print_info(nlohmann::json::parse(host.info_json(domid)));
    } else if (cmd == "crash") {
        host.crash(domid);
    } else if (cmd == "destroy") {
        host.destroy(domid);
    } else if (cmd == "pause") {
        host.pause(domid);
    } else if (cmd == "unpause") {
        host.unpause(domid);
    } else if (cmd == "balloon") {
        host.balloon(domid, pfn, count);
    } else {
        host.unballoon(domid, pfn, count);
    }
    return cli::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const UsageError& e) {
        return cli::usage_error("xen-dump-sim", e.message);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "xen-dump-sim: %s\n", e.what());
        return cli::kExitFailure;
    }
}
