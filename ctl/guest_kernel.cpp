#include "guest_kernel.hpp"

#include "xendump/dump_kernel_log.hpp"

namespace xendump::ctl {

std::optional<std::string> DumpKernel::symbolize(uint64_t address) const {
    if (!kallsyms || !kernel::is_kernel_image_address(address)) return std::nullopt;
    const auto& table = kallsyms->table;
    if (auto end = table.address("_end"); end && address >= *end) return std::nullopt;
    if (!table.resolve(address)) return std::nullopt;
    return table.describe(address);
}

DumpKernel find_dump_kernel(const DumpReader& reader) {
    DumpKernel k;
    if (auto text = reader.vmcoreinfo()) k.vmcoreinfo = kernel::Vmcoreinfo::parse(*text);
    const auto pages = dump_page_reader(reader);
    k.kallsyms = kernel::find_kallsyms(pages, k.vmcoreinfo ? &*k.vmcoreinfo : nullptr);
    if (k.kallsyms) {
        kernel::PhysicalMemory memory(pages);
        k.banner = kernel::read_linux_banner(memory, *k.kallsyms);
        if (k.banner)
            while (!k.banner->empty() && (k.banner->back() == '\n' || k.banner->back() == '\r'))
                k.banner->pop_back();
    }
    if (k.vmcoreinfo && !k.vmcoreinfo->release().empty()) {
        k.release = std::string(k.vmcoreinfo->release());
    } else if (auto v = reader.domain().get(keys::kKernel)) {
        k.release = *v;
    } else if (k.banner) {
        // "Linux version RELEASE (builder) ..." (init/version.c linux_banner).
        constexpr std::string_view kPrefix = "Linux version ";
        if (k.banner->starts_with(kPrefix)) {
            const std::string rest = k.banner->substr(kPrefix.size());
            k.release = rest.substr(0, rest.find(' '));
        }
    }
    return k;
}

}  // namespace xendump::ctl
