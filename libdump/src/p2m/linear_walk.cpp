// The linear p2m list of a PV guest: p2m pages mapped contiguously at
// shared_info.arch.p2m_vaddr in the address space whose top-level page table
// is p2m_cr3 (xen/include/public/arch-x86/xen.h; walk as in xg_core_x86.c
// xc_core_arch_map_p2m_list_rw). 64-bit guests: 4 levels, 32-bit guests: PAE,
// 3 levels with 8-byte entries and the folded cr3 format.
#include <algorithm>

#include "p2m/p2m_walk.hpp"
#include "xendump/error.hpp"

namespace xendump::p2m_detail {

namespace {

constexpr uint64_t kPtePresent = 1u << 0;
constexpr uint64_t kPteLarge = 1u << 7;               // PSE in an L2/L3 entry
constexpr uint64_t kPteAddrMask = 0x000ffffffffff000;  // bits 12..51

// Xen's own virtual ranges, which a guest cannot map (xg_core_x86.c).
constexpr uint64_t kXenVirtStart64 = 0xffff800000000000;
constexpr uint64_t kXenVirtEnd64 = 0xffff87ffffffffff;
constexpr uint64_t kXenVirtStart32 = 0xf5800000;
constexpr uint64_t kXenVirtEnd32 = 0xffffffff;

constexpr std::string_view kLevelRole[] = {"", "L1 page table", "L2 page table", "L3 page table",
                                           "L4 page table"};

bool canonical(uint64_t va) { return (static_cast<int64_t>(va) >> 47) == (static_cast<int64_t>(va) >> 63); }

// A page table and the (masked) virtual address its first entry maps.
struct Table {
    uint64_t va;
    uint64_t mfn;
};

}  // namespace

std::vector<uint64_t> linear_p2m_frames(Walk& walk, uint64_t p2m_cr3, uint64_t p2m_vaddr) {
    const uint64_t nr_pages = walk.p2m_pages();
    std::vector<uint64_t> frames(nr_pages, kNoFrame);
    if (nr_pages == 0) return frames;

    const bool is64 = walk.width == 8;
    const unsigned levels = is64 ? 4 : 3;
    const uint64_t va_mask = is64 ? 0x0000ffffffffffff : 0xffffffff;
    const uint64_t bytes = nr_pages * format::kPageSize;  // nr_pages is bounded: no overflow
    const std::string range = hex(p2m_vaddr) + "+" + hex(bytes);

    if (p2m_vaddr % format::kPageSize != 0)
        throw Error("p2m_vaddr " + hex(p2m_vaddr) + " is not page aligned", walk.object);
    if (p2m_vaddr > ~uint64_t{0} - (bytes - 1))
        throw Error("the linear p2m " + range + " wraps around the address space", walk.object);
    const uint64_t last = p2m_vaddr + (bytes - 1);

    uint64_t root;
    if (is64) {
        if (!canonical(p2m_vaddr) || !canonical(last) || (p2m_vaddr >> 63) != (last >> 63) ||
            (p2m_vaddr <= kXenVirtEnd64 && last >= kXenVirtStart64))
            throw Error("the linear p2m " + range + " is not in the guest's address space", walk.object);
        root = p2m_cr3 >> 12;
    } else {
        if (last > va_mask || (p2m_vaddr <= kXenVirtEnd32 && last >= kXenVirtStart32))
            throw Error("the linear p2m " + range + " is not in the guest's address space", walk.object);
        if (p2m_cr3 > 0xffffffff)
            throw Error("p2m_cr3 " + hex(p2m_cr3) + " is not a 32-bit cr3 value", walk.object);
        // 32-bit PV cr3 folds the mfn's high bits into the low 12
        // (xen_cr3_to_pfn in xen/include/public/arch-x86/xen-x86_32.h).
        root = static_cast<uint32_t>((p2m_cr3 >> 12) | (p2m_cr3 << 20));
    }
    if (!walk.plausible_mfn(root))
        throw Error("p2m_cr3 " + hex(p2m_cr3) + " does not name a machine frame", walk.object);

    const uint64_t first = p2m_vaddr & va_mask;
    const uint64_t end = first + (bytes - 1);  // inclusive, masked

    // Records the frame backing the p2m page at (masked) virtual address va.
    auto set_frame = [&](uint64_t va, uint64_t mfn) {
        if (va < first || va > end) return;
        if (!walk.plausible_mfn(mfn)) {
            walk.bad_structure_entry.add([&] { return "p2m page at " + hex(va) + " maps frame " + hex(mfn); });
            return;
        }
        frames[(va - first) / format::kPageSize] = mfn;
    };

    std::vector<Table> tables{{0, root}};
    for (unsigned level = levels; level >= 1 && !tables.empty(); --level) {
        const unsigned shift = 12 + 9 * (level - 1);
        const uint64_t span = uint64_t{1} << shift;  // bytes one entry maps
        std::vector<uint64_t> mfns;
        mfns.reserve(tables.size());
        for (const Table& t : tables) mfns.push_back(t.mfn);
        auto pages = read_structure_pages(walk, mfns, kLevelRole[level]);

        std::vector<Table> next;
        for (const Table& t : tables) {
            auto page = pages.find(t.mfn);
            if (page == pages.end()) continue;  // unmappable: counted, a hole
            // The entries of this table that overlap [first, end].
            const uint64_t table_bytes = span * 512;
            const uint64_t lo = std::max(first, t.va);
            const uint64_t hi = std::min(end, t.va + (table_bytes - 1));
            if (lo > hi) continue;
            for (uint64_t idx = (lo - t.va) >> shift; idx <= (hi - t.va) >> shift; ++idx) {
                const uint64_t entry = read_word(page->second.data(), idx, 8);
                const uint64_t va = t.va + (idx << shift);
                if ((entry & kPtePresent) == 0) continue;  // not mapped: a hole
                if (level == 1) {
                    set_frame(va, (entry & kPteAddrMask) >> 12);
                } else if ((entry & kPteLarge) != 0 && (level == 2 || (is64 && level == 3))) {
                    // A 2 MiB or 1 GiB page: contiguous frames (bit 12 is PAT).
                    const uint64_t base = (entry & kPteAddrMask & ~(span - 1)) >> 12;
                    const uint64_t from = std::max(va, first), to = std::min(va + (span - 1), end);
                    for (uint64_t p = from; p <= to; p += format::kPageSize)
                        set_frame(p, base + ((p - va) >> 12));
                } else {
                    const uint64_t child = (entry & kPteAddrMask) >> 12;
                    if (!walk.plausible_mfn(child)) {
                        walk.bad_structure_entry.add([&] {
                            return std::string(kLevelRole[level]) + " mfn " + hex(t.mfn) + " entry " +
                                   std::to_string(idx) + " holds " + hex(entry);
                        });
                        continue;
                    }
                    next.push_back({va, child});
                }
            }
        }
        tables = std::move(next);
    }
    return frames;
}

}  // namespace xendump::p2m_detail
