// The guest kernel's virtual addresses (x86_64), read from guest-physical
// memory: kernel-image addresses translate linearly (phys_base), every other
// kernel address (direct map, vmalloc, modules) by walking the kernel's own
// page tables from init_top_pgt, 4 or 5 levels as VMCOREINFO says
// (NUMBER(pgtable_l5_enabled)). Layout facts: Linux
// arch/x86/include/asm/pgtable_64_types.h and pgtable_types.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>

#include "xendump/kernel/guest_memory.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"

namespace xendump::kernel {

// The frame a page-table entry names, as a pfn of the dump: identity for
// HVM/PVH guests (their page tables hold guest-physical frames); a PV guest's
// tables hold machine frames, mapped back through the dump's pfn->gmfn table.
// nullopt: no such frame in the dump.
using FrameToPfn = std::function<std::optional<uint64_t>(uint64_t frame)>;

struct KernelPaging {
    uint64_t phys_base = 0;                 // NUMBER(phys_base)
    uint64_t image_size = 512ULL << 20;     // NUMBER(KERNEL_IMAGE_SIZE), else the non-KASLR 512 MiB
    std::optional<uint64_t> top_table;      // guest-physical address of init_top_pgt
    bool five_level = false;                // NUMBER(pgtable_l5_enabled)=1
    uint64_t sme_mask = 0;                  // NUMBER(sme_mask): AMD SME's C-bit in entries

    // From an x86_64 kernel's VMCOREINFO: SYMBOL(init_top_pgt) (or the older
    // init_level4_pgt) through the kernel-image mapping.
    static KernelPaging from_vmcoreinfo(const Vmcoreinfo& info);
};

class KernelVirtualMemory {
public:
    // `memory` must outlive this object; `frame_to_pfn` empty = identity.
    KernelVirtualMemory(PhysicalMemory& memory, KernelPaging paging, FrameToPfn frame_to_pfn = {});

    // The guest-physical address of kernel virtual address `vaddr`, or
    // nullopt when it is not mapped (or a table it needs is not in the dump).
    std::optional<uint64_t> translate(uint64_t vaddr);

    // Reads out.size() bytes at `vaddr` (pages may map anywhere); false if any
    // byte is unmapped or missing.
    bool read(uint64_t vaddr, std::span<std::byte> out);

    const KernelPaging& paging() const { return paging_; }

private:
    std::optional<uint64_t> walk(uint64_t vaddr);
    std::optional<uint64_t> frame_paddr(uint64_t frame);

    PhysicalMemory& memory_;
    KernelPaging paging_;
    FrameToPfn frame_to_pfn_;
    // The last translated page: text and descriptor reads stay on one page.
    uint64_t last_vpage_ = ~0ULL, last_ppage_ = 0;
};

}  // namespace xendump::kernel
