#include "pipeline/kernel_observer.hpp"

#include <algorithm>

#include "pipeline/batch_source.hpp"
#include "xendump/error.hpp"
#include "xendump/kernel/guest_memory.hpp"
#include "xendump/kernel/prstatus.hpp"
#include "xendump/text.hpp"

namespace xendump::pipeline {

namespace {

// x86_64 Linux maps its image at __START_KERNEL_map + (physical - phys_base)
// (VMCOREINFO: SYMBOL(_stext), NUMBER(phys_base), NUMBER(KERNEL_IMAGE_SIZE)).
// The segment starts at _stext's 2 MiB boundary (the image's alignment) and
// ends where the image region ends.
std::optional<KernelImageSegment> kernel_image_segment(const kernel::Vmcoreinfo& info) {
    const auto stext = info.symbol("_stext");
    if (!stext || !kernel::is_kernel_image_address(*stext)) return std::nullopt;
    constexpr uint64_t kImageAlign = 2u << 20;
    const uint64_t vaddr = *stext & ~(kImageAlign - 1);
    const int64_t image_size = info.number("KERNEL_IMAGE_SIZE").value_or(512 << 20);
    const uint64_t region_end = kernel::kStartKernelMap + static_cast<uint64_t>(std::max<int64_t>(image_size, 0));
    if (vaddr >= region_end) return std::nullopt;
    const uint64_t paddr = kernel::kernel_virt_to_phys(vaddr, info.phys_base());
    if (paddr % kImageAlign) return std::nullopt;  // Linux aligns phys_base to 2 MiB
    return KernelImageSegment{vaddr, paddr, region_end - vaddr};
}

}  // namespace

void add_prstatus(DumpSpec& spec, std::vector<std::string>& warnings) {
    const bool pv32 = spec.type == format::GuestType::pv && spec.guest_width == 4;
    if (pv32 || !spec.prstatus.empty()) return;
    try {
        spec.prstatus = kernel::prstatus_notes(spec.vcpus, spec.type);
    } catch (const Error& e) {
        warnings.push_back("no NT_PRSTATUS notes: " + std::string(e.what()));
    }
}

std::optional<kernel::VmcoreinfoResult> find_vmcoreinfo(PageSource& source) {
    kernel::VmcoreinfoScanner scanner;
    kernel::PhysicalMemory memory(kernel::page_reader(source));
    uint64_t candidates = 0;
    std::optional<kernel::VmcoreinfoResult> settled;
    scan_pages(source, [&](uint64_t pfn, std::span<const std::byte> page) {
        scanner.observe(pfn, page);
        if (scanner.candidate_pages() == candidates) return true;
        candidates = scanner.candidate_pages();
        auto now = scanner.result(&memory);
        if (now && now->witnessed && now->confirmed_by_note && !now->ambiguous) settled = std::move(now);
        return !settled;
    });
    return settled ? settled : scanner.result(&memory);
}

void KernelObserver::observe(const PageBatch& b) {
    for (size_t i = 0; i < b.count; ++i)
        if (b.keep[i]) scanner_.observe(b.pfn(i), b.bytes(i));
}

void KernelObserver::finish(FoundNotes& notes) {
    if (scanner_.candidate_pages() == 0) return;
    kernel::PhysicalMemory memory(kernel::page_reader(source_));
    std::optional<kernel::VmcoreinfoResult> found = scanner_.result(&memory);
    if (!found) return;
    if (found->ambiguous) {
        // Two different complete texts and nothing to tell them apart: a wrong
        // VMCOREINFO would mislead crash more than none at all.
        notes.warnings.push_back(found->overflowed
                                     ? "VMCOREINFO left out: " + std::to_string(found->texts) +
                                           " different candidate texts in guest memory, none witnessed by init_uts_ns"
                                     : "VMCOREINFO left out: " + std::to_string(found->candidates) +
                                           " different candidate texts in guest memory rank equal");
        return;
    }
    const kernel::Vmcoreinfo& info = found->info;
    notes.vmcoreinfo = info.text();
    // The release names the guest's kernel to tools (xen-dumpctl debug's
    // vmlinux path): only a release name is recorded as one.
    if (kernel::is_release_name(info.release()))
        notes.domain.set(keys::kKernel, std::string(info.release()));
    else if (!info.release().empty())
        notes.domain.set(keys::kKernelUntrusted, escape_text(info.release()));
    if (auto off = info.value("KERNELOFFSET")) notes.domain.set(keys::kKernelOffset, std::string(*off));
    notes.kernel_image = kernel_image_segment(info);
}

}  // namespace xendump::pipeline
