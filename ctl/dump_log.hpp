// The guest kernel's log inside a dump file, as `dmesg` prints it and `info`
// quotes its crash reports: the printk buffer (libdump kernel/printk_log.hpp)
// found through VMCOREINFO and read through the guest's own page tables.
#pragma once

#include <optional>

#include "xendump/kernel/printk_log.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"
#include "xendump/reader.hpp"

namespace xendump::ctl {

// The dump's VMCOREINFO note; with `scan_pages`, when the file has none (an
// unconverted `xl dump-core` file), a copy found in its pages (reads them all).
std::optional<kernel::Vmcoreinfo> dump_vmcoreinfo(const DumpReader& reader, bool scan_pages);

// Reads the log of an x86_64 guest. Throws Error (see read_printk_log) when
// there is none to read; damage inside the buffer gives a partial log.
kernel::PrintkLog read_dump_log(const DumpReader& reader, const kernel::Vmcoreinfo& info);

}  // namespace xendump::ctl
