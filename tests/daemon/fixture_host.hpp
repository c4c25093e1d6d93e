// A simulated host with the real fixture RAM as a Linux guest: "linux",
// domid kFixtureLinux, HVM, one vcpu, its memory crashed_guest_ram()
// (tests/kernel/guest_ram.hpp; 128 MiB), and a 64-bit PV guest without a
// kernel: "pattern", domid kFixturePattern, 256 pages of pattern memory.
// Both running. Shared by the end-to-end tests of the guest's log and of
// dump levels.
#pragma once

#include <cstdint>
#include <filesystem>

namespace xendump::test {

inline constexpr uint64_t kFixturePages = (128ULL << 20) / 4096;
inline constexpr uint32_t kFixtureLinux = 7, kFixturePattern = 8;

// Writes the RAM image to `image` and the host (xen-dump-sim create) to
// `host`, its spec beside it. Throws std::runtime_error when the simulator fails.
void create_fixture_host(const std::filesystem::path& host, const std::filesystem::path& image);

}  // namespace xendump::test
