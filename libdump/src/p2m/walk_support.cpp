// Small pieces every p2m walker uses: guest-width words, the shared_info
// arch fields, batched foreign mapping, the loop detector.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "p2m/p2m_walk.hpp"
#include "xendump/error.hpp"

namespace xendump::p2m_detail {

uint64_t read_word(const std::byte* page, size_t i, unsigned width) {
    if (width == 4) {
        uint32_t v;
        std::memcpy(&v, page + i * 4, 4);
        return v;
    }
    uint64_t v;
    std::memcpy(&v, page + i * 8, 8);
    return v;
}

ArchSharedInfo parse_arch_shared_info(std::span<const std::byte> page, unsigned width) {
    // offsetof(shared_info, arch): 3088 in the x86_64 layout, 2316 in the
    // x86_32 one (xen/include/public/foreign/x86_{32,64}.h).
    const size_t arch_offset = width == 8 ? 3088 : 2316;
    if (page.size() < arch_offset + 6 * size_t{width})
        throw Error("shared_info page too short (" + std::to_string(page.size()) + " bytes)");
    const std::byte* arch = page.data() + arch_offset;
    ArchSharedInfo out;
    out.max_pfn = read_word(arch, 0, width);
    out.frame_list_list = read_word(arch, 1, width);
    out.nmi_reason = read_word(arch, 2, width);
    out.p2m_cr3 = read_word(arch, 3, width);
    out.p2m_vaddr = read_word(arch, 4, width);
    out.p2m_generation = read_word(arch, 5, width);
    return out;
}

void Walk::claim(uint64_t mfn, std::string_view role) {
    auto [it, inserted] = roles.emplace(mfn, role);
    if (!inserted && it->second != role)
        throw Error("the guest's p2m structure loops: mfn " + hex(mfn) + " is used both as " +
                        std::string(it->second) + " and as " + std::string(role),
                    object);
}

void map_batches(Hypervisor& hv, uint32_t domid, std::span<const uint64_t> frames, size_t batch,
                 const std::function<void(size_t, const ForeignMapping&)>& visit) {
    for (size_t first = 0; first < frames.size(); first += batch) {
        size_t n = std::min(batch, frames.size() - first);
        auto mapping = hv.map_foreign(domid, frames.subspan(first, n));
        visit(first, *mapping);
    }
}

std::unordered_map<uint64_t, std::vector<std::byte>> read_structure_pages(Walk& walk,
                                                                         std::span<const uint64_t> mfns,
                                                                         std::string_view role) {
    std::vector<uint64_t> distinct;
    std::unordered_set<uint64_t> seen;
    for (uint64_t mfn : mfns) {
        if (mfn == kNoFrame || !seen.insert(mfn).second) continue;
        walk.claim(mfn, role);
        distinct.push_back(mfn);
    }
    std::unordered_map<uint64_t, std::vector<std::byte>> pages;
    map_batches(walk.hv, walk.domid, distinct, kMapBatch, [&](size_t first, const ForeignMapping& m) {
        for (size_t i = 0; i < m.count(); ++i) {
            uint64_t mfn = distinct[first + i];
            if (m.error(i) != 0) {
                walk.unmappable_structure.add([&] { return std::string(role) + " mfn " + hex(mfn); });
                continue;
            }
            const std::byte* p = m.page(i);
            pages.emplace(mfn, std::vector<std::byte>(p, p + format::kPageSize));
        }
    });
    return pages;
}

}  // namespace xendump::p2m_detail
