#include "writer/guest_kernel_notes.hpp"

#include <algorithm>

#include "xendump/error.hpp"
#include "xendump/kernel/guest_memory.hpp"
#include "xendump/kernel/prstatus.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"

namespace xendump::writer {

void GuestKernelNotes::attach(DumpSpec& spec, WriteOptions& options, PageSource& source) {
    source_ = &source;
    const bool pv32 = spec.type == format::GuestType::pv && spec.guest_width == 4;
    if (!pv32 && spec.prstatus.empty()) {
        try {
            spec.prstatus = kernel::prstatus_notes(spec.vcpus, spec.type);
        } catch (const Error& e) {
            warnings_.push_back("no NT_PRSTATUS notes: " + std::string(e.what()));
        }
    }
    spec.reserve_vmcoreinfo = true;
    auto previous = options.page_observer;
    options.page_observer = [this, previous](uint64_t pfn, std::span<const std::byte> page) {
        scanner_.observe(pfn, page);
        if (previous) previous(pfn, page);
    };
    options.after_pages = [this] { return late_notes(); };
}

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

LateNotes GuestKernelNotes::late_notes() {
    LateNotes late;
    if (scanner_.candidate_pages() == 0) return late;
    // Re-reads only the few pages init_uts_ns occupies, to tell the running
    // kernel's text from a copy in page cache (kernel/vmcoreinfo.hpp).
    kernel::PhysicalMemory memory(kernel::page_reader(*source_));
    found_ = scanner_.result(&memory);
    if (!found_) return late;
    if (found_->ambiguous) {
        // Two different complete texts and nothing to tell them apart: a wrong
        // VMCOREINFO would mislead crash more than none at all.
        warnings_.push_back(found_->overflowed
                                ? "VMCOREINFO left out: " + std::to_string(found_->texts) +
                                      " different candidate texts in guest memory, none witnessed by init_uts_ns"
                                : "VMCOREINFO left out: " + std::to_string(found_->candidates) +
                                      " different candidate texts in guest memory rank equal");
        found_.reset();
        return late;
    }
    const kernel::Vmcoreinfo& info = found_->info;
    late.vmcoreinfo = info.text();
    if (!info.release().empty()) late.domain.set(keys::kKernel, std::string(info.release()));
    if (auto off = info.value("KERNELOFFSET")) late.domain.set(keys::kKernelOffset, std::string(*off));
    late.kernel_image = kernel_image_segment(info);
    return late;
}

}  // namespace xendump::writer
