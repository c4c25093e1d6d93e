#include "writer/guest_kernel_notes.hpp"

#include "xendump/error.hpp"
#include "xendump/kernel/guest_memory.hpp"
#include "xendump/kernel/prstatus.hpp"

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

LateNotes GuestKernelNotes::late_notes() {
    LateNotes late;
    if (scanner_.candidates().empty()) return late;
    // Re-reads only the few pages init_uts_ns occupies, to tell the running
    // kernel's text from a copy in page cache (kernel/vmcoreinfo.hpp).
    kernel::PhysicalMemory memory(kernel::page_reader(*source_));
    found_ = scanner_.result(&memory);
    if (!found_) return late;
    if (found_->ambiguous) {
        // Two different complete texts and nothing to tell them apart: a wrong
        // VMCOREINFO would mislead crash more than none at all.
        warnings_.push_back("VMCOREINFO left out: " + std::to_string(found_->candidates) +
                            " different candidate texts in guest memory rank equal");
        found_.reset();
        return late;
    }
    const kernel::Vmcoreinfo& info = found_->info;
    late.vmcoreinfo = info.text();
    if (!info.release().empty()) late.domain.set(keys::kKernel, std::string(info.release()));
    if (auto off = info.value("KERNELOFFSET")) late.domain.set(keys::kKernelOffset, std::string(*off));
    return late;
}

}  // namespace xendump::writer
