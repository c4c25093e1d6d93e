// The guest kernel's log inside a dump file, as `xen-dumpctl dmesg` prints
// it, `info` quotes its crash reports and xen-dumpd records it beside every
// dump: the printk buffer (kernel/printk_log.hpp) found through VMCOREINFO
// and read through the guest's own page tables, from a DumpReader, or from
// a paused guest as a dump holds it (GuestView, DumpOptions::inspect_guest).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "xendump/kernel/backtrace.hpp"
#include "xendump/kernel/dump_level.hpp"
#include "xendump/kernel/guest_memory.hpp"
#include "xendump/kernel/kallsyms.hpp"
#include "xendump/kernel/printk_log.hpp"
#include "xendump/kernel/virtual_memory.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"
#include "xendump/reader.hpp"

namespace xendump {

// A guest's memory and vcpus as the kernel readers below take them: a dump
// file's (guest_view) or a paused guest's, read from the hypervisor while a
// dump of it is written (DumpOptions::inspect_guest).
struct GuestView {
    format::GuestType type = format::GuestType::hvm;
    unsigned guest_width = 8;          // 4 or 8
    std::vector<VcpuContext> vcpus;
    kernel::PageReader pages;          // the guest's pages by pfn
    kernel::FrameToPfn frame_to_pfn;   // a PV guest's machine frames to pfns; empty: identity
};

// The dump file's guest; `reader` must outlive the result.
GuestView guest_view(const DumpReader& reader);

// The dump's pages by pfn (DumpReader::read_page_by_pfn); `reader` must
// outlive the result.
kernel::PageReader dump_page_reader(const DumpReader& reader);

// The frame a page-table entry of the dump's guest names, as a pfn: a PV
// guest's tables hold machine frames (back through the pfn->gmfn table);
// empty (identity) for HVM/PVH. `reader` must outlive the result.
kernel::FrameToPfn dump_frame_to_pfn(const DumpReader& reader);

// What the dump-level classifier (kernel/dump_level.hpp) reads from a dump
// file: its pages, `info` (may be null), the PV translation and the vcpus'
// stack pointers (64-bit guests). `reader` and `info` must outlive the result.
kernel::DumpLevelInput dump_level_input(const DumpReader& reader, const kernel::Vmcoreinfo* info);

// The dump's VMCOREINFO note; with `scan_pages`, when the file has none (an
// unconverted `xl dump-core` file), a copy found in its pages (reads them all).
std::optional<kernel::Vmcoreinfo> dump_vmcoreinfo(const DumpReader& reader, bool scan_pages);

// Reads the log of an x86_64 guest. Throws Error (see read_printk_log) when
// there is none to read; damage inside the buffer gives a partial log.
kernel::PrintkLog read_guest_log(const GuestView& guest, const kernel::Vmcoreinfo& info);
kernel::PrintkLog read_dump_log(const DumpReader& reader, const kernel::Vmcoreinfo& info);

// The same through dump_vmcoreinfo(reader, scan_pages); throws Error naming
// the missing VMCOREINFO when there is none (not a Linux guest, or its kernel
// published none).
kernel::PrintkLog read_dump_log(const DumpReader& reader, bool scan_pages);

// Where each vcpu was: a backtrace per vcpu of a 64-bit guest
// (kernel/backtrace.hpp) from its saved registers, through the kernel's ORC
// tables when kallsyms reaches them, else its frame pointers, else a stack
// scan. Kernel virtual addresses are translated with the page tables
// VMCOREINFO names (init_top_pgt), else with the vcpu's own cr3.
struct VcpuBacktrace {
    uint32_t vcpu = 0;
    std::optional<kernel::Backtrace> trace;
    std::string error;  // why there is none (a short context, a 32-bit guest)
};

struct DumpBacktraces {
    std::vector<VcpuBacktrace> vcpus;
    bool orc = false;                    // the kernel's ORC tables were found
    std::optional<uint32_t> panic_vcpu;  // the vcpu that reported the crash (panic_cpu)
};

// `kallsyms` from kernel::find_kallsyms on the dump's pages; `release`
// (OSRELEASE, or from the banner; "" unknown) chooses the ORC format.
// `log`, when given, tells which vcpu crashed.
DumpBacktraces dump_backtraces(const DumpReader& reader, const kernel::Vmcoreinfo* info,
                               const kernel::Kallsyms& kallsyms, std::string_view release,
                               const kernel::PrintkLog* log = nullptr,
                               const kernel::BacktraceLimits& limits = {});
DumpBacktraces guest_backtraces(const GuestView& guest, const kernel::Vmcoreinfo* info,
                                const kernel::Kallsyms& kallsyms, std::string_view release,
                                const kernel::PrintkLog* log = nullptr, const kernel::BacktraceLimits& limits = {});

// The CPU that reported the log's first crash report: the "CPU: N PID: ..."
// line dump_stack prints right after it, else the report's caller when it is
// a CPU ("C<n>"); nullopt when the log does not say.
std::optional<uint32_t> panic_cpu(const kernel::PrintkLog& log);

}  // namespace xendump
