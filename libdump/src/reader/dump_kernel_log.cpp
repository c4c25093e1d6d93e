#include "xendump/dump_kernel_log.hpp"

#include <algorithm>
#include <vector>

#include "xendump/error.hpp"
#include "xendump/kernel/guest_memory.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"
#include "xendump/kernel/virtual_memory.hpp"

namespace xendump {

namespace {

// PV guests' page tables hold machine frames: back to pfns through the
// dump's pfn->gmfn table. HVM/PVH: frames are pfns.
kernel::FrameToPfn frame_to_pfn(const DumpReader& reader) {
    if (reader.type() != format::GuestType::pv) return {};
    return [&reader](uint64_t frame) -> std::optional<uint64_t> {
        auto index = reader.index_of_gmfn(frame);
        if (!index) return std::nullopt;
        return reader.entry(*index).pfn;
    };
}

}  // namespace

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
    kernel::PhysicalMemory physical(dump_page_reader(reader));
    kernel::KernelVirtualMemory memory(physical, kernel::KernelPaging::from_vmcoreinfo(info), frame_to_pfn(reader));
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

}  // namespace xendump
