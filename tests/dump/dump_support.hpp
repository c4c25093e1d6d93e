// Helpers of the dump suite: dump a simulated guest and check the file
// against the simulator, page by page.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim_test_util.hpp"
#include "xendump/reader.hpp"

namespace xendump::test::dump {

using nlohmann::json;

// A domain spec with defaults filled in; tests override what they need.
json pv_domain(uint32_t domid, unsigned width, const std::string& p2m_format, uint64_t p2m_size,
               json extents);
json hvm_domain(uint32_t domid, const std::string& type, uint64_t p2m_size, json extents);
json host_spec(std::vector<json> domains);

// The real RAM fixture of ../shared/fixtures (Debian's 6.1.0-57-amd64, 128
// MiB, kFixtureRamPages) decompressed to `image`, as the one HVM guest
// `domid` of a fresh simulated host, which reads its memory from `image`.
inline constexpr uint64_t kFixtureRamPages = (128ULL << 20) / 4096;
std::unique_ptr<sim::Host> fixture_ram_host(const std::filesystem::path& image, uint32_t domid);

// Present pfn -> frame to map (mfn for PV, pfn for HVM/PVH), from the spec's
// extents minus `removed` pfns.
std::map<uint64_t, uint64_t> expected_pages(const json& domain, const std::set<uint64_t>& removed = {});

// Checks a dump file against the simulated host: the table equals `expected`,
// every page equals what the hypervisor maps for that frame (and the pattern
// where the simulator did not replace it), holes are not found, vcpu contexts
// equal, verify() passes. Adds gtest failures; returns the reader's findings count.
void check_dump_against_host(const std::filesystem::path& file, sim::Host& host, uint32_t domid,
                             const std::map<uint64_t, uint64_t>& expected, bool pv);

// Runs libkdumpfile (Debian's python3-libkdumpfile) over the file in a child
// process: every page by physical address (and machine address for PV), holes
// not found.
void check_with_libkdumpfile(const std::filesystem::path& file, sim::Host& host, uint32_t domid,
                             const std::map<uint64_t, uint64_t>& expected, const std::string& type,
                             const std::vector<uint64_t>& holes);

}  // namespace xendump::test::dump
