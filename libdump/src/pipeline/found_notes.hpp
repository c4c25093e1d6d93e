// What observers found in the pages (the guest kernel: xen-dump-core(5)
// "Notes" note 7, "NT_XEN_DOMAIN keys", "Program headers" the kernel image
// program header), handed to the encoder
// before it finishes the file's head.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "xendump/keyvalues.hpp"

namespace xendump::pipeline {

// The guest kernel's image mapping, as kdump's /proc/vmcore describes it: a
// PT_LOAD whose p_vaddr is the image's virtual address, over the same file
// bytes as the RAM segment holding its physical pages (readers that
// translate kernel addresses without page tables, drgn among them, need it).
struct KernelImageSegment {
    uint64_t vaddr = 0;     // page-aligned, in the kernel image region
    uint64_t paddr = 0;     // page-aligned guest physical address of vaddr
    uint64_t max_size = 0;  // at most this many bytes; cut at the first absent page
};

struct FoundNotes {
    std::optional<std::string> vmcoreinfo;           // the VMCOREINFO text
    KeyValues domain;                                // keys for NT_XEN_DOMAIN (KERNEL=, KERNELOFFSET=)
    std::optional<KernelImageSegment> kernel_image;  // the kernel image segment
    std::vector<std::string> warnings;               // what the caller should be told
};

}  // namespace xendump::pipeline
