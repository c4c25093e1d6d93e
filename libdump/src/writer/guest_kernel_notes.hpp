// The glue between the guest-kernel scanners (libdump/src/kernel) and the
// writer's hooks, shared by the dumper and the converter: both get the same
// notes from the same single pass (ARCHITECTURE.md: "dumps and conversions
// both get it in their single pass"). The writer itself does not use this
// file; it only knows DumpSpec::reserve_vmcoreinfo and WriteOptions hooks.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "xendump/dump_spec.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"
#include "xendump/page_source.hpp"
#include "xendump/writer.hpp"

namespace xendump::writer {

class GuestKernelNotes {
public:
    // Prepares `spec` and `options` for a write of `source`'s pages:
    //  - NT_PRSTATUS (xen-dump-core(5) "Notes" note 8) for every vcpu of a 64-bit guest
    //    (not 32-bit PV, whose contexts have another layout); a context that
    //    cannot be decoded leaves all of them out, with a warning;
    //  - reserve_vmcoreinfo, a page_observer feeding the VmcoreinfoScanner,
    //    and after_pages handing the writer the VMCOREINFO text with KERNEL=
    //    and KERNELOFFSET= (see writer/late_notes.hpp for the layout).
    // `this` and `source` must outlive the write (the hooks point at them).
    void attach(DumpSpec& spec, WriteOptions& options, PageSource& source);

    // After the write: what was found (nullopt: no Linux kernel recognised).
    const std::optional<kernel::VmcoreinfoResult>& found() const { return found_; }
    const std::vector<std::string>& warnings() const { return warnings_; }

private:
    LateNotes late_notes();

    kernel::VmcoreinfoScanner scanner_;
    PageSource* source_ = nullptr;
    std::optional<kernel::VmcoreinfoResult> found_;
    std::vector<std::string> warnings_;
};

}  // namespace xendump::writer
