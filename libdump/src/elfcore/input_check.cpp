#include "elfcore/input_check.hpp"

#include <string>

#include "xendump/error.hpp"

namespace xendump::elfcore {

void check_spec(const DumpSpec& spec) {
    if (spec.vcpus.empty()) throw Error("refusing to write a dump without any vcpu context");
    if (spec.guest_width != 4 && spec.guest_width != 8)
        throw Error("guest width must be 4 or 8, not " + std::to_string(spec.guest_width));
    const bool pv32 = spec.type == format::GuestType::pv && spec.guest_width == 4;
    const size_t max_ctx = pv32 ? format::kVcpuContextSize32 : format::kVcpuSlotSize;
    for (const auto& v : spec.vcpus) {
        if (v.bytes.empty() || v.bytes.size() > max_ctx)
            throw Error("vcpu " + std::to_string(v.id) + ": context of " + std::to_string(v.bytes.size()) +
                        " bytes (expected at most " + std::to_string(max_ctx) + ")");
    }
    if (spec.shared_info && spec.shared_info->size() != format::kSharedInfoSize)
        throw Error("shared_info must be " + std::to_string(format::kSharedInfoSize) + " bytes, not " +
                    std::to_string(spec.shared_info->size()));
}

void check_entries(uint64_t first, std::span<const PageEntry> window, uint64_t before) {
    for (size_t k = 0; k < window.size(); ++k) {
        const uint64_t i = first + k;
        const uint64_t pfn = window[k].pfn;
        // pfn * page size must fit p_paddr.
        if (pfn > (UINT64_MAX >> format::kPageShift))
            throw Error("page entry " + std::to_string(i) + ": pfn " + std::to_string(pfn) + " too large");
        const uint64_t prev = k > 0 ? window[k - 1].pfn : before;
        if (i > 0 && pfn <= prev)
            throw Error("page entries not in strictly ascending pfn order at index " + std::to_string(i) + " (pfn " +
                        std::to_string(pfn) + " after " + std::to_string(prev) + ")");
    }
}

void check_entry_count(uint64_t n) {
    // NT_XEN_P2M's descsz is a u32 (ELF note layout): 16 bytes a page.
    if (n > (UINT32_MAX - 64) / sizeof(PageEntry))
        throw Error("too many pages for one NT_XEN_P2M note (" + std::to_string(n) + ")");
}

void check_input(const DumpSpec& spec, const PageSource& source) {
    check_spec(spec);
    uint64_t before = 0;
    for_each_entry_window(source, [&](uint64_t first, std::span<const PageEntry> window) {
        check_entries(first, window, before);
        before = window.back().pfn;
    });
    check_entry_count(source.nr_entries());
}

void check_input(const DumpSpec& spec, std::span<const PageEntry> entries) {
    check_spec(spec);
    check_entries(0, entries, 0);
    check_entry_count(entries.size());
}

}  // namespace xendump::elfcore
