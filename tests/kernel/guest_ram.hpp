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

// A hostile guest (issue 32): crashed_guest_ram() with every copy of its
// kernel release (kFixtureRelease: VMCOREINFO's OSRELEASE, init_uts_ns,
// linux_banner) replaced by `release` (as long, e.g. "/tmp/abcdefghi" or
// "../../../tmp/x"), and its panic text kHostilePanicText: ESC[2J, a
// carriage return, \v, \f, a right-to-left override and a C1 CSI.
std::string hostile_guest_ram(std::string_view release);
inline constexpr std::string_view kFixtureRelease = "6.1.0-57-amd64";
inline constexpr std::string_view kHostilePanicText = "Kernel panic - not syncing: \x1b[2J\r\v\f\xe2\x80\xae\xc2\x9b";
// As dmesg prints it (escape_text).
inline constexpr std::string_view kHostilePanicLine =
    "[    1.978455] Kernel panic - not syncing: \\x1b[2J\\r\\x0b\\x0c\\xe2\\x80\\xae\\xc2\\x9b";

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
