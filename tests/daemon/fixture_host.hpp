// A simulated host with the real fixture RAM as a Linux guest: "linux",
// domid kFixtureLinux, HVM, one vcpu, its memory crashed_guest_ram()
// (tests/kernel/guest_ram.hpp; 128 MiB), and a 64-bit PV guest without a
// kernel: "pattern", domid kFixturePattern, 256 pages of pattern memory.
// Both running. FixtureHost puts it in a fresh directory with a dump
// directory, for the one-shot commands and a service. Shared by the
// end-to-end tests of the guest's log and of dump levels.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "service_harness.hpp"
#include "test_support.hpp"

namespace xendump::test {

inline constexpr uint64_t kFixturePages = (128ULL << 20) / 4096;
inline constexpr uint32_t kFixtureLinux = 7, kFixturePattern = 8;

// Writes the RAM image to `image` and the host (xen-dump-sim create) to
// `host`, its spec beside it. Throws std::runtime_error when the simulator fails.
// `linux_ram` and `linux_name` replace the Linux guest's memory and name (a
// hostile guest: guest_ram.hpp hostile_guest_ram).
void create_fixture_host(const std::filesystem::path& host, const std::filesystem::path& image,
                         const std::string& linux_ram = {}, const std::string& linux_name = "linux");

struct FixtureHost {
    TempDir tmp;
    std::filesystem::path host = tmp / "host", dumps = tmp / "dumps", image = tmp / "linux.raw";
    // The one-shot commands' configuration: [Dump] KeepFree=0.
    std::filesystem::path config = tmp / "xen-dumpd.conf";
    std::unique_ptr<ServiceProcess> service;

    FixtureHost();  // creates the host and the dump directory
    FixtureHost(const std::string& linux_ram, const std::string& linux_name);  // create_fixture_host's

    // A service on the host writing to `dumps`, with `config_text` as its
    // configuration; made, not started (drop-ins may go in first).
    ServiceProcess& add_service(const std::string& config_text);

    // xen-dumpd --domain DOMAIN EXTRA... by itself (no service listens on its socket).
    RunResult dumpd(const std::string& domain, const std::vector<std::string>& extra) const;
    // xen-dumpctl ARGS... --config FILE --dump-dir `dumps`: FILE is `config_file`
    // when given, else the service's configuration, else `config`.
    RunResult ctl(std::vector<std::string> args, const std::filesystem::path& config_file = {}) const;
    // Crashes `domid` and waits (up to `timeout`) for the sidecar of a dump
    // whose name starts with "`name`-": the dump's path, or empty (and a
    // test failure, with the service's log) when none came.
    std::filesystem::path crash_and_wait(uint32_t domid, const std::string& name,
                                         std::chrono::seconds timeout = std::chrono::seconds(240)) const;
};

}  // namespace xendump::test
