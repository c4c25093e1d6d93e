// Guest-kernel knowledge as an observer of the pass: the VMCOREINFO scanner
// sees every kept page; after the pass it hands the encoder the VMCOREINFO
// text, the KERNEL= / KERNELOFFSET= keys of NT_XEN_DOMAIN and the kernel
// image segment (found_notes.hpp), before the encoder finishes the head.
// The dumper and the converter get it through WriteOptions::guest_kernel.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeline/observer.hpp"
#include "xendump/dump_spec.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"
#include "xendump/page_source.hpp"

namespace xendump::pipeline {

class KernelObserver final : public PageObserver {
public:
    // `source` re-reads the few pages init_uts_ns occupies in finish(), to
    // tell the running kernel's text from a copy in page cache
    // (kernel/vmcoreinfo.hpp); it must outlive the observer.
    explicit KernelObserver(PageSource& source) : source_(source) {}

    void observe(const PageBatch& batch) override;
    void finish(FoundNotes& notes) override;

private:
    kernel::VmcoreinfoScanner scanner_;
    PageSource& source_;
};

// The VMCOREINFO of the guest in `source`, for a pass that needs it before
// it starts (dump levels): kernel::find_vmcoreinfo's scan and choice, but
// through the source's loans of its mappings where it has them (scan_pages:
// the scanner looks at a page's first bytes where it lies, nothing is
// copied), and ending as soon as the text chosen so far is witnessed by
// init_uts_ns, has both forms (vmcoreinfo_data and vmcoreinfo_note) and is
// not ambiguous: no page further on could take its place short of a
// second, different text with all of that (which a full scan would call
// ambiguous or rank by size). Linux allocates both pages early in boot: in
// the Xen lab's 1 GiB HVM guest they sit at pfns 4948 and 5107, so the scan
// maps 20 MiB instead of the whole guest.
std::optional<kernel::VmcoreinfoResult> find_vmcoreinfo(PageSource& source);

// NT_PRSTATUS (xen-dump-core(5) "Notes" note 8) for every vcpu of a 64-bit guest (not 32-bit
// PV, whose contexts have another layout), unless the spec has them; a
// context that cannot be decoded leaves all of them out, with a warning.
void add_prstatus(DumpSpec& spec, std::vector<std::string>& warnings);

}  // namespace xendump::pipeline
