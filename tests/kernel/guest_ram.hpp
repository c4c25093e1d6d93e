// The real guest RAM fixture (Debian 6.1 x86_64 under QEMU, no KASLR, page p
// at byte p*4096, 128 MiB), decompressed once per test binary, and page
// sources/readers over it and over edited copies of some of its pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xendump/kernel/guest_memory.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"
#include "xendump/page_source.hpp"

namespace xendump::test {

// The whole RAM image, mapped read-only (lives until the process ends).
std::span<const std::byte> guest_ram();

// The fixture's guest did not crash: a copy of its RAM with its last log
// record ("clocksource: Switched to clocksource tsc") made a panic of the
// same length, in two lines, with bytes beyond ASCII (kCrashedPanicText); as
// dmesg prints it: kCrashedPanicLine, then an indented "\xc3\x01\tz".
std::string crashed_guest_ram();
inline constexpr std::string_view kCrashedPanicLine = "[    1.978455] Kernel panic - not syncing: testing";

// The VMCOREINFO found in guest_ram() (computed once).
const kernel::Vmcoreinfo& fixture_vmcoreinfo();

// A page reader over `ram` where `overlay` pages replace the fixture's.
kernel::PageReader ram_reader(std::span<const std::byte> ram,
                              const std::map<uint64_t, std::vector<std::byte>>* overlay = nullptr);

// A PageSource over every page of `ram` (gmfn == pfn).
class RamPageSource : public PageSource {
public:
    explicit RamPageSource(std::span<const std::byte> ram);
    std::span<const PageEntry> entries() const override { return entries_; }
    void read_pages(size_t first, size_t count, std::span<std::byte> out,
                    std::span<uint8_t> unreadable) override;

private:
    std::span<const std::byte> ram_;
    std::vector<PageEntry> entries_;
};

}  // namespace xendump::test
