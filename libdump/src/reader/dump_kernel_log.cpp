#include "xendump/dump_kernel_log.hpp"

#include <algorithm>
#include <charconv>
#include <vector>

#include "xendump/error.hpp"
#include "xendump/kernel/guest_memory.hpp"
#include "xendump/kernel/prstatus.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"
#include "xendump/kernel/virtual_memory.hpp"

namespace xendump {

// PV guests' page tables hold machine frames: back to pfns through the
// dump's pfn->gmfn table. HVM/PVH: frames are pfns.
kernel::FrameToPfn dump_frame_to_pfn(const DumpReader& reader) {
    if (reader.type() != format::GuestType::pv) return {};
    return [&reader](uint64_t frame) -> std::optional<uint64_t> {
        auto index = reader.index_of_gmfn(frame);
        if (!index) return std::nullopt;
        return reader.entry(*index).pfn;
    };
}

kernel::DumpLevelInput dump_level_input(const DumpReader& reader, const kernel::Vmcoreinfo* info) {
    kernel::DumpLevelInput in;
    in.present = reader.page_source();
    in.reader = dump_page_reader(reader);
    in.vmcoreinfo = reader.guest_width() == 8 ? info : nullptr;  // x86_64 kernels only
    in.frame_to_pfn = dump_frame_to_pfn(reader);
    if (reader.guest_width() == 8)
        for (const auto& v : reader.vcpus())
            if (v.bytes.size() >= kernel::XenVcpuContextX86_64::kSize)
                in.stack_pointers.push_back(kernel::XenVcpuContextX86_64::decode(v.bytes).rsp);
    return in;
}

GuestView guest_view(const DumpReader& reader) {
    GuestView g;
    g.type = reader.type();
    g.guest_width = reader.guest_width();
    g.vcpus = reader.vcpus();
    g.pages = dump_page_reader(reader);
    g.frame_to_pfn = dump_frame_to_pfn(reader);
    return g;
}

kernel::PageReader dump_page_reader(const DumpReader& reader) {
    return [&reader](uint64_t pfn, kernel::PageSpan out) { return reader.read_page_by_pfn(pfn, out); };
}

std::optional<kernel::Vmcoreinfo> dump_vmcoreinfo(const DumpReader& reader, bool scan_pages) {
    if (auto text = reader.vmcoreinfo()) return kernel::Vmcoreinfo::parse(*text);
    if (!scan_pages) return std::nullopt;
    // Every page, run by run, 8 MiB at a time (no copy of the table).
    kernel::VmcoreinfoScanner scanner;
    constexpr uint64_t kBatch = 2048;
    std::vector<std::byte> buf(kBatch * format::kPageSize);
    for (const PageRun& run : reader.runs())
        for (uint64_t done = 0; done < run.count; done += kBatch) {
            const uint64_t n = std::min(kBatch, run.count - done);
            reader.read_pages(run.first_index + done, n, std::span(buf).first(n * format::kPageSize));
            for (uint64_t i = 0; i < n; ++i)
                scanner.observe(run.first_pfn + done + i,
                                std::span<const std::byte>(buf).subspan(i * format::kPageSize, format::kPageSize));
        }
    kernel::PhysicalMemory memory(dump_page_reader(reader));
    if (auto found = scanner.result(&memory)) return found->info;
    return std::nullopt;
}

kernel::PrintkLog read_dump_log(const DumpReader& reader, const kernel::Vmcoreinfo& info) {
    if (reader.guest_width() != 8) throw Error("a 32-bit guest: only x86_64 guest kernels are read");
    return read_guest_log(guest_view(reader), info);
}

kernel::PrintkLog read_guest_log(const GuestView& guest, const kernel::Vmcoreinfo& info) {
    if (guest.guest_width != 8) throw Error("a 32-bit guest: only x86_64 guest kernels are read");
    kernel::PhysicalMemory physical(guest.pages);
    kernel::KernelVirtualMemory memory(physical, kernel::KernelPaging::from_vmcoreinfo(info), guest.frame_to_pfn);
    return kernel::read_printk_log(
        info, [&memory](uint64_t vaddr, std::span<std::byte> out) { return memory.read(vaddr, out); });
}

kernel::PrintkLog read_dump_log(const DumpReader& reader, bool scan_pages) {
    const auto info = dump_vmcoreinfo(reader, scan_pages);
    if (!info)
        throw Error("no VMCOREINFO of a Linux kernel in the dump (not a Linux guest, or its kernel published none): "
                    "the kernel log cannot be found");
    return read_dump_log(reader, *info);
}

std::optional<uint32_t> panic_cpu(const kernel::PrintkLog& log) {
    // Linux lib/dump_stack.c dump_stack_print_info: "CPU: %d PID: %d Comm: ..."
    // a few records after the report (panic prints it through dump_stack).
    constexpr std::string_view kCpu = "CPU: ";
    constexpr size_t kLookAhead = 16;
    const auto reports = kernel::crash_records(log);
    if (reports.empty()) return std::nullopt;
    const kernel::PrintkRecord* first = reports.front();
    const size_t at = static_cast<size_t>(first - log.records.data());
    for (size_t i = at; i < log.records.size() && i <= at + kLookAhead; ++i) {
        const std::string& text = log.records[i].text;
        if (!text.starts_with(kCpu)) continue;
        uint32_t cpu = 0;
        const char* p = text.data() + kCpu.size();
        auto r = std::from_chars(p, text.data() + text.size(), cpu);
        if (r.ec == std::errc() && r.ptr != p && std::string_view(r.ptr, text.data() + text.size()).starts_with(" PID: "))
            return cpu;
    }
    constexpr uint32_t kCallerCpu = 0x80000000u;
    if (first->caller_id && (*first->caller_id & kCallerCpu)) return *first->caller_id & ~kCallerCpu;
    return std::nullopt;
}

DumpBacktraces dump_backtraces(const DumpReader& reader, const kernel::Vmcoreinfo* info,
                               const kernel::Kallsyms& kallsyms, std::string_view release,
                               const kernel::PrintkLog* log, const kernel::BacktraceLimits& limits) {
    return guest_backtraces(guest_view(reader), info, kallsyms, release, log, limits);
}

DumpBacktraces guest_backtraces(const GuestView& guest, const kernel::Vmcoreinfo* info,
                                const kernel::Kallsyms& kallsyms, std::string_view release,
                                const kernel::PrintkLog* log, const kernel::BacktraceLimits& limits) {
    DumpBacktraces out;
    const auto orc = kernel::OrcTable::locate(kallsyms.table, kernel::orc_version_for_release(release));
    out.orc = orc.has_value();
    if (log) out.panic_vcpu = panic_cpu(*log);
    // A guest of one vcpu that reported a crash reported it there.
    if (log && !out.panic_vcpu && kernel::first_crash_line(*log) && guest.vcpus.size() == 1)
        out.panic_vcpu = guest.vcpus.front().id;
    kernel::PhysicalMemory physical(guest.pages);
    const kernel::FrameToPfn& frames = guest.frame_to_pfn;
    for (const auto& v : guest.vcpus) {
        VcpuBacktrace b;
        b.vcpu = v.id;
        if (guest.guest_width != 8 || v.bytes.size() < kernel::XenVcpuContextX86_64::kSize) {
            b.error = "not a 64-bit vcpu context: only x86_64 guests are unwound";
            out.vcpus.push_back(std::move(b));
            continue;
        }
        const auto ctx = kernel::XenVcpuContextX86_64::decode(v.bytes);
        kernel::KernelPaging paging;
        if (info) {
            paging = kernel::KernelPaging::from_vmcoreinfo(*info);
        } else {
            // The vcpu's own page tables (a PV guest's cr3 names a machine frame).
            paging.phys_base = kallsyms.phys_base;
            const uint64_t top = ctx.ctrlreg[3] >> 12;
            if (auto pfn = frames ? frames(top) : std::optional<uint64_t>(top)) paging.top_table = *pfn << 12;
        }
        kernel::KernelVirtualMemory memory(physical, paging, frames);
        const kernel::KernelUnwinder unwinder(
            kallsyms.table, [&memory](uint64_t vaddr, std::span<std::byte> bytes) { return memory.read(vaddr, bytes); },
            orc);
        b.trace = unwinder.unwind(kernel::unwind_start(ctx, guest.type), limits);
        out.vcpus.push_back(std::move(b));
    }
    return out;
}

}  // namespace xendump
