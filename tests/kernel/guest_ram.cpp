#include "guest_ram.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <stdexcept>

#include "test_support.hpp"

namespace xendump::test {

std::span<const std::byte> guest_ram() {
    static const std::span<const std::byte> ram = [] {
        static TempDir dir;  // removed at exit
        const auto raw = dir / "linux-6.1-x86_64-128m.raw";
        const auto zst = shared_dir() / "fixtures" / "linux-6.1-x86_64-128m.raw.zst";
        auto r = run({"zstd", "-d", "-q", "-o", raw.string(), zst.string()});
        if (r.exit_code != 0) throw std::runtime_error("zstd -d failed: " + r.err);
        const int fd = ::open(raw.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) throw std::runtime_error("cannot open " + raw.string());
        struct stat st {};
        ::fstat(fd, &st);
        void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
        ::close(fd);
        if (p == MAP_FAILED) throw std::runtime_error("cannot map " + raw.string());
        return std::span<const std::byte>(static_cast<const std::byte*>(p),
                                          static_cast<size_t>(st.st_size));
    }();
    return ram;
}

namespace {

// The fixture's RAM with every copy of `was` replaced by `now` (as long);
// a copy followed by `keep_before` (when not NUL) stays as it is.
std::string replaced_ram(std::string ram, std::string_view was, std::string_view now, char keep_before = '\0') {
    size_t replaced = 0;
    for (size_t at = ram.find(was); at != std::string::npos; at = ram.find(was, at + 1))
        if (keep_before == '\0' || ram[at + was.size()] != keep_before) {
            ram.replace(at, was.size(), now);
            ++replaced;
        }
    if (replaced == 0 || was.size() != now.size()) throw std::runtime_error("the fixture changed");
    return ram;
}

std::string guest_ram_with_panic(std::string_view panic) {
    // Not the earlier "... tsc-early".
    return replaced_ram(std::string(reinterpret_cast<const char*>(guest_ram().data()), guest_ram().size()),
                        "clocksource: Switched to clocksource tsc", panic, '-');
}

}  // namespace

std::string crashed_guest_ram() {
    return guest_ram_with_panic(std::string_view("Kernel panic - not syncing: testing\n\xc3\x01\tz", 40));
}

std::string hostile_guest_ram(std::string_view release) {
    return replaced_ram(guest_ram_with_panic(kHostilePanicText), kFixtureRelease, release);
}

const kernel::Vmcoreinfo& fixture_vmcoreinfo() {
    static const kernel::Vmcoreinfo info = [] {
        RamPageSource source(guest_ram());
        auto r = kernel::find_vmcoreinfo(source);
        if (!r) throw std::runtime_error("no vmcoreinfo in the fixture");
        return r->info;
    }();
    return info;
}

kernel::PageReader ram_reader(std::span<const std::byte> ram,
                              const std::map<uint64_t, std::vector<std::byte>>* overlay) {
    return [ram, overlay](uint64_t pfn, kernel::PageSpan out) {
        if (overlay != nullptr)
            if (auto it = overlay->find(pfn); it != overlay->end()) {
                std::memcpy(out.data(), it->second.data(), out.size());
                return true;
            }
        if (pfn >= ram.size() / kernel::kPageSize) return false;
        std::memcpy(out.data(), ram.data() + pfn * kernel::kPageSize, out.size());
        return true;
    };
}

RamPageSource::RamPageSource(std::span<const std::byte> ram) : ram_(ram) {
    for (uint64_t pfn = 0; pfn < ram.size() / kernel::kPageSize; ++pfn) entries_.push_back({pfn, pfn});
}

void RamPageSource::read_pages(size_t first, size_t count, std::span<std::byte> out,
                               std::span<uint8_t> unreadable) {
    std::memcpy(out.data(), ram_.data() + entries_[first].pfn * kernel::kPageSize,
                count * kernel::kPageSize);
    std::fill(unreadable.begin(), unreadable.begin() + static_cast<long>(count), 0);
}

}  // namespace xendump::test
