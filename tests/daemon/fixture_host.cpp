#include "fixture_host.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "guest_ram.hpp"
#include "test_support.hpp"

namespace xendump::test {

void create_fixture_host(const std::filesystem::path& host, const std::filesystem::path& image) {
    using nlohmann::json;
    {
        const std::string ram = crashed_guest_ram();
        std::ofstream(image, std::ios::binary).write(ram.data(), static_cast<std::streamsize>(ram.size()));
    }
    // As tests/dump/dump_support.cpp's hvm_domain and pv_domain write them;
    // one vcpu: the crash report names no CPU, so the only vcpu made it.
    json linux_guest = {{"domid", kFixtureLinux}, {"name", "linux"}, {"uuid", "0d5e9a3c-1f2b-4c6d-8e9f-000000000007"},
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

}  // namespace xendump::test
