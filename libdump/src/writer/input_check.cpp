#include "writer/input_check.hpp"

#include <string>

#include "xendump/error.hpp"

namespace xendump::writer {

void check_input(const DumpSpec& spec, std::span<const PageEntry> entries) {
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
    for (size_t i = 0; i < entries.size(); ++i) {
        // pfn * page size must fit p_paddr.
        if (entries[i].pfn > (UINT64_MAX >> format::kPageShift))
            throw Error("page entry " + std::to_string(i) + ": pfn " + std::to_string(entries[i].pfn) +
                        " too large");
        if (i > 0 && entries[i].pfn <= entries[i - 1].pfn)
            throw Error("page entries not in strictly ascending pfn order at index " + std::to_string(i) +
                        " (pfn " + std::to_string(entries[i].pfn) + " after " +
                        std::to_string(entries[i - 1].pfn) + ")");
    }
    // NT_XEN_P2M's descsz is a u32 (ELF note layout): 16 bytes a page.
    if (entries.size() > (UINT32_MAX - 64) / sizeof(PageEntry))
        throw Error("too many pages for one NT_XEN_P2M note (" + std::to_string(entries.size()) + ")");
}

}  // namespace xendump::writer
