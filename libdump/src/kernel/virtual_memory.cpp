// Kernel virtual -> guest-physical translation for x86_64 guests.
#include "xendump/kernel/virtual_memory.hpp"

#include <algorithm>

namespace xendump::kernel {
namespace {

constexpr uint64_t kPresent = 1ULL << 0;
constexpr uint64_t kLargePage = 1ULL << 7;               // PSE: 1 GiB at level 3, 2 MiB at level 2
constexpr uint64_t kFrameMask = 0x000ffffffffff000ULL;   // physical address bits 12..51
constexpr unsigned kLevelShift[] = {48, 39, 30, 21, 12}; // pml5, pml4, pud, pmd, pte

}  // namespace

KernelPaging KernelPaging::from_vmcoreinfo(const Vmcoreinfo& info) {
    KernelPaging p;
    p.phys_base = info.phys_base();
    if (auto size = info.number("KERNEL_IMAGE_SIZE"); size && *size > 0) p.image_size = static_cast<uint64_t>(*size);
    p.five_level = info.number("pgtable_l5_enabled").value_or(0) == 1;
    p.sme_mask = static_cast<uint64_t>(info.number("sme_mask").value_or(0));
    auto top = info.symbol("init_top_pgt");
    if (!top) top = info.symbol("init_level4_pgt");  // before Linux 4.13
    if (top && is_kernel_image_address(*top)) p.top_table = kernel_virt_to_phys(*top, p.phys_base);
    return p;
}

KernelVirtualMemory::KernelVirtualMemory(PhysicalMemory& memory, KernelPaging paging, FrameToPfn frame_to_pfn)
    : memory_(memory), paging_(paging), frame_to_pfn_(std::move(frame_to_pfn)) {}

std::optional<uint64_t> KernelVirtualMemory::frame_paddr(uint64_t frame) {
    if (!frame_to_pfn_) return frame * kPageSize;
    auto pfn = frame_to_pfn_(frame);
    if (!pfn) return std::nullopt;
    return *pfn * kPageSize;
}

std::optional<uint64_t> KernelVirtualMemory::walk(uint64_t vaddr) {
    if (!paging_.top_table) return std::nullopt;
    const uint64_t mask = kFrameMask & ~paging_.sme_mask;
    uint64_t table = *paging_.top_table & ~(kPageSize - 1);
    for (unsigned level = paging_.five_level ? 0 : 1; level < 5; ++level) {
        const uint64_t index = (vaddr >> kLevelShift[level]) & 511;
        auto entry = memory_.get<uint64_t>(table + index * 8);
        if (!entry || !(*entry & kPresent)) return std::nullopt;
        const uint64_t base = *entry & mask;
        const bool leaf = level == 4 || ((level == 2 || level == 3) && (*entry & kLargePage));
        if (leaf) {
            // A large page: the 4 KiB frame within it, then the byte.
            const uint64_t span_mask = (1ULL << kLevelShift[level]) - 1;
            const uint64_t frame = (base & ~span_mask) / kPageSize + ((vaddr & span_mask) / kPageSize);
            auto page = frame_paddr(frame);
            if (!page) return std::nullopt;
            return *page + (vaddr & (kPageSize - 1));
        }
        auto next = frame_paddr(base / kPageSize);
        if (!next) return std::nullopt;
        table = *next;
    }
    return std::nullopt;
}

std::optional<uint64_t> KernelVirtualMemory::translate(uint64_t vaddr) {
    const uint64_t vpage = vaddr & ~(kPageSize - 1);
    if (vpage == last_vpage_) return last_ppage_ + (vaddr & (kPageSize - 1));
    std::optional<uint64_t> paddr;
    if (is_kernel_image_address(vaddr) && vaddr - kStartKernelMap < paging_.image_size)
        paddr = kernel_virt_to_phys(vaddr, paging_.phys_base);
    else
        paddr = walk(vaddr);
    if (paddr) {
        last_vpage_ = vpage;
        last_ppage_ = *paddr & ~(kPageSize - 1);
    }
    return paddr;
}

bool KernelVirtualMemory::read(uint64_t vaddr, std::span<std::byte> out) {
    size_t done = 0;
    while (done < out.size()) {
        const uint64_t at = vaddr + done;
        if (at < vaddr) return false;  // wrapped past 2^64
        auto paddr = translate(at);
        if (!paddr) return false;
        const size_t n = std::min<size_t>(out.size() - done, kPageSize - (at % kPageSize));
        if (!memory_.read(*paddr, out.subspan(done, n))) return false;
        done += n;
    }
    return true;
}

}  // namespace xendump::kernel
