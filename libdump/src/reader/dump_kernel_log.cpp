#include "xendump/dump_kernel_log.hpp"

#include "xendump/error.hpp"
#include "xendump/kernel/prstatus.hpp"
#include "xendump/kernel/virtual_memory.hpp"

namespace xendump {

// PV guests' page tables hold machine frames: back to pfns through the
// dump's pfn->gmfn table. HVM/PVH: frames are pfns.
kernel::FrameToPfn dump_frame_to_pfn(const DumpReader& reader) {
    if (reader.type() != format::GuestType::pv) return {};
    return [&reader](uint64_t frame) -> std::optional<uint64_t> {
        auto index = reader.index_of_gmfn(frame);
        if (!index) return std::nullopt;
        return reader.entries()[*index].pfn;
    };
}

kernel::DumpLevelInput dump_level_input(const DumpReader& reader, const kernel::Vmcoreinfo* info) {
    kernel::DumpLevelInput in;
    in.present = reader.entries();
    in.reader = dump_page_reader(reader);
    in.vmcoreinfo = reader.guest_width() == 8 ? info : nullptr;  // x86_64 kernels only
    in.frame_to_pfn = dump_frame_to_pfn(reader);
    if (reader.guest_width() == 8)
        for (const auto& v : reader.vcpus())
            if (v.bytes.size() >= kernel::XenVcpuContextX86_64::kSize)
                in.stack_pointers.push_back(kernel::XenVcpuContextX86_64::decode(v.bytes).rsp);
    return in;
}

kernel::PageReader dump_page_reader(const DumpReader& reader) {
    return [&reader](uint64_t pfn, kernel::PageSpan out) { return reader.read_page_by_pfn(pfn, out); };
}

std::optional<kernel::Vmcoreinfo> dump_vmcoreinfo(const DumpReader& reader, bool scan_pages) {
    if (auto text = reader.vmcoreinfo()) return kernel::Vmcoreinfo::parse(*text);
    if (!scan_pages) return std::nullopt;
    auto source = reader.page_source();
    if (auto found = kernel::find_vmcoreinfo(*source)) return found->info;
    return std::nullopt;
}

kernel::PrintkLog read_dump_log(const DumpReader& reader, const kernel::Vmcoreinfo& info) {
    if (reader.guest_width() != 8) throw Error("a 32-bit guest: only x86_64 guest kernels are read");
    kernel::PhysicalMemory physical(dump_page_reader(reader));
    kernel::KernelVirtualMemory memory(physical, kernel::KernelPaging::from_vmcoreinfo(info), dump_frame_to_pfn(reader));
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
