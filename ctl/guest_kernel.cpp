#include "guest_kernel.hpp"

#include "xendump/dump_kernel_log.hpp"
#include "xendump/text.hpp"

#include <cstdio>

namespace xendump::ctl {

namespace {

std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

}  // namespace

nlohmann::json backtrace_json(const kernel::Backtrace& t, size_t max_frames) {
    nlohmann::json j;
    j["method"] = std::string(kernel::to_string(t.method));
    j["user_mode"] = t.user_mode;
    j["user_ip"] = t.user_ip ? nlohmann::json(hex(*t.user_ip)) : nlohmann::json(nullptr);
    j["partial"] = t.partial();
    j["stopped"] = t.partial() ? nlohmann::json(t.stopped) : nlohmann::json(nullptr);
    j["frames"] = nlohmann::json::array();
    for (const auto& f : t.frames) {
        if (j["frames"].size() == max_frames) break;
        j["frames"].push_back({{"ip", hex(f.ip)},
                               {"sp", hex(f.sp)},
                               {"symbol", f.symbol.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.symbol)},
                               {"reliable", f.reliable}});
    }
    return j;
}


std::optional<std::string> DumpKernel::symbolize(uint64_t address) const {
    if (!kallsyms || !kernel::is_kernel_image_address(address)) return std::nullopt;
    const auto& table = kallsyms->table;
    if (auto end = table.address("_end"); end && address >= *end) return std::nullopt;
    if (!table.resolve(address)) return std::nullopt;
    return table.describe(address);
}

std::string noted_release(const DumpReader& reader) {
    if (auto v = reader.domain().get(keys::kKernel); v && !v->empty()) return *v;
    if (auto v = reader.domain().get(keys::kKernelUntrusted)) return unescape_text(*v);
    return {};
}

std::string shown_release(const std::string& release) {
    return escape_text(release) + (kernel::is_release_name(release) ? "" : " (untrusted)");
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
    } else if (auto noted = noted_release(reader); !noted.empty()) {
        k.release = std::move(noted);
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
