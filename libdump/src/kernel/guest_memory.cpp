// PageReader adapters and byte-addressed reads of guest-physical memory.
#include "xendump/kernel/guest_memory.hpp"

#include <algorithm>
#include <vector>

namespace xendump::kernel {

PageReader page_reader(PageSource& source) {
    return [&source](uint64_t pfn, PageSpan out) {
        const auto index = source.index_of_pfn(pfn);
        if (!index) return false;
        uint8_t unreadable = 0;
        source.read_pages(static_cast<size_t>(*index), 1, out, std::span<uint8_t>(&unreadable, 1));
        return unreadable == 0;
    };
}

PhysicalMemory::PhysicalMemory(PageReader reader) : reader_(std::move(reader)), slots_(kSlots) {}

const std::byte* PhysicalMemory::page(uint64_t pfn) {
    Slot& slot = slots_[pfn % kSlots];
    if (slot.pfn != pfn) {
        slot.pfn = pfn;
        slot.present = reader_ && reader_(pfn, PageSpan(slot.bytes));
    }
    return slot.present ? slot.bytes.data() : nullptr;
}

bool PhysicalMemory::read(uint64_t paddr, std::span<std::byte> out) {
    size_t done = 0;
    while (done < out.size()) {
        const uint64_t addr = paddr + done;
        if (addr < paddr) return false;  // wrapped past 2^64
        const std::byte* p = page(addr / kPageSize);
        if (p == nullptr) return false;
        const size_t in_page = static_cast<size_t>(addr % kPageSize);
        const size_t n = std::min(out.size() - done, kPageSize - in_page);
        std::memcpy(out.data() + done, p + in_page, n);
        done += n;
    }
    return true;
}

std::optional<std::string> PhysicalMemory::c_string(uint64_t paddr, size_t max) {
    std::string s;
    for (size_t i = 0; i <= max; ++i) {
        auto c = get<char>(paddr + i);
        if (!c) return std::nullopt;
        if (*c == '\0') return s;
        s.push_back(*c);
    }
    return std::nullopt;  // no NUL within max bytes
}

}  // namespace xendump::kernel
