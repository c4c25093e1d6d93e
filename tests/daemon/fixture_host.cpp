#include "fixture_host.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "dump_job.hpp"
#include "guest_ram.hpp"
#include "sidecar.hpp"
#include "test_support.hpp"
#include "xendump/text.hpp"

namespace xendump::test {

void create_fixture_host(const std::filesystem::path& host, const std::filesystem::path& image,
                         const std::string& linux_ram, const std::string& linux_name) {
    using nlohmann::json;
    {
        const std::string ram = linux_ram.empty() ? crashed_guest_ram() : linux_ram;
        std::ofstream(image, std::ios::binary).write(ram.data(), static_cast<std::streamsize>(ram.size()));
    }
    // As tests/dump/dump_support.cpp's hvm_domain and pv_domain write them;
    // one vcpu: the crash report names no CPU, so the only vcpu made it.
    json linux_guest = {{"domid", kFixtureLinux}, {"name", linux_name}, {"uuid", "0d5e9a3c-1f2b-4c6d-8e9f-000000000007"},
                        {"type", "hvm"}, {"vcpus", 1}, {"p2m_size", kFixturePages},
                        {"extents", json::array({json::array({0, 0x800000, kFixturePages})})},
                        {"memory", {{"image", image.string()}}}, {"state", "running"}};
    json pattern = {{"domid", kFixturePattern}, {"name", "pattern"}, {"uuid", "0d5e9a3c-1f2b-4c6d-8e9f-000000000008"},
                    {"type", "pv"}, {"guest_width", 8}, {"vcpus", 1}, {"p2m_size", 256}, {"p2m_format", "tree"},
                    {"extents", json::array({json::array({0, 0x900000, 256})})},
                    {"memory", {{"fill", "pattern"}}}, {"state", "running"}};
    const std::filesystem::path spec = host.string() + ".spec.json";
    std::ofstream(spec) << json{{"xen_version", "4.17.0"}, {"domains", {linux_guest, pattern}}}.dump(2);
    RunResult c = run({"xen-dump-sim", "create", host.string(), spec.string()});
    if (c.exit_code != 0) throw std::runtime_error("xen-dump-sim create: " + c.err);
}

FixtureHost::FixtureHost() : FixtureHost({}, "linux") {}

FixtureHost::FixtureHost(const std::string& linux_ram, const std::string& linux_name) {
    create_fixture_host(host, image, linux_ram, linux_name);
    std::filesystem::create_directory(dumps);
    std::ofstream(config) << "[Dump]\nKeepFree=0\n";
}

ServiceProcess& FixtureHost::add_service(const std::string& config_text) {
    // Its own work directory: its configuration file is not `config`.
    const std::filesystem::path work = tmp / "svc";
    std::filesystem::create_directories(work);
    service = std::make_unique<ServiceProcess>(work, host, dumps, config_text);
    return *service;
}

RunResult FixtureHost::dumpd(const std::string& domain, const std::vector<std::string>& extra) const {
    std::vector<std::string> argv{"xen-dumpd", "--domain", domain, "--host", "sim:" + host.string(),
                                  "--socket", (tmp / "no.sock").string(), "--config", config.string(),
                                  "--dump-dir", dumps.string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run(argv);
}

RunResult FixtureHost::ctl(std::vector<std::string> args, const std::filesystem::path& config_file) const {
    const std::filesystem::path file = !config_file.empty() ? config_file : service ? service->config_file() : config;
    args.insert(args.begin(), "xen-dumpctl");
    args.insert(args.end(), {"--config", file.string(), "--dump-dir", dumps.string()});
    return run(args);
}

std::filesystem::path FixtureHost::crash_and_wait(uint32_t domid, const std::string& name,
                                                  std::chrono::seconds timeout) const {
    sim({"crash", host.string(), std::to_string(domid)});
    std::filesystem::path found;
    const bool done = wait_until(
        [&] {
            for (const auto& s : sidecars_in(dumps))
                if (s.filename().string().starts_with(name + "-")) {
                    found = std::filesystem::path(s.string().substr(0, s.string().size() - 5));
                    return true;
                }
            return false;
        },
        timeout);
    if (!done) {
        ADD_FAILURE() << "no dump of " << name << ":\n" << (service ? service->log() : std::string());
        return found;
    }
    // The service records a dump (its sidecar) before it logs the dump's
    // end: wait for that line too, so that callers read a finished log.
    if (service) {
        const std::string end = escape_text(
            daemon::dump_journal_message(daemon::read_sidecar(daemon::sidecar_path(found)), found));
        if (!service->logged(end, timeout))
            ADD_FAILURE() << "the service did not log the end of " << found << ":\n" << service->log();
    }
    return found;
}

}  // namespace xendump::test
