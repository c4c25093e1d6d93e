// Guest-physical memory as the guest-kernel code sees it: a function that
// reads one page by pfn, and byte-addressed reads on top of it. Dumps,
// conversions and live guests all fit behind the same reader.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "xendump/format.hpp"
#include "xendump/page_source.hpp"

namespace xendump::kernel {

inline constexpr size_t kPageSize = format::kPageSize;
using PageSpan = std::span<std::byte, kPageSize>;

// Reads guest page `pfn` into `out`. Returns false when the guest has no such
// page or it could not be read ("not there" is not "zero").
using PageReader = std::function<bool(uint64_t pfn, PageSpan out)>;

// A PageReader over a PageSource (binary search of its entries, one page per
// read). The source must outlive the reader.
PageReader page_reader(PageSource& source);

// x86_64: the kernel image is mapped at __START_KERNEL_map; its physical
// address is virtual - __START_KERNEL_map + phys_base (Linux
// arch/x86/include/asm/page_64.h __phys_addr_symbol). phys_base already
// includes any KASLR physical shift; it may "wrap" (kept modulo 2^64).
inline constexpr uint64_t kStartKernelMap = 0xffffffff80000000ULL;
inline uint64_t kernel_virt_to_phys(uint64_t virt, uint64_t phys_base) {
    return virt - kStartKernelMap + phys_base;
}
inline bool is_kernel_image_address(uint64_t virt) { return virt >= kStartKernelMap; }

// Byte-addressed, bounds-free reads of guest-physical memory over a
// PageReader, with a small direct-mapped page cache (scans read each page
// many times).
class PhysicalMemory {
public:
    explicit PhysicalMemory(PageReader reader);

    // Reads out.size() bytes at guest-physical `paddr`; false if any page is missing.
    bool read(uint64_t paddr, std::span<std::byte> out);

    template <class T>
    std::optional<T> get(uint64_t paddr) {
        std::array<std::byte, sizeof(T)> raw;
        if (!read(paddr, raw)) return std::nullopt;
        T value;
        std::memcpy(&value, raw.data(), sizeof(T));
        return value;
    }

    // The page holding `pfn`, or nullptr when absent. Valid until the next call.
    const std::byte* page(uint64_t pfn);

    // A NUL-terminated string at `paddr` of at most `max` bytes (without the NUL).
    std::optional<std::string> c_string(uint64_t paddr, size_t max);

private:
    static constexpr size_t kSlots = 64;
    struct Slot {
        uint64_t pfn = ~0ULL;
        bool present = false;
        std::array<std::byte, kPageSize> bytes;
    };
    PageReader reader_;
    std::vector<Slot> slots_;  // kSlots pages, on the heap
};

}  // namespace xendump::kernel
