// xen-dumpctl backtrace|bt [--json] FILE|MATCH...: where each vcpu of the
// guest was, a backtrace per vcpu from its saved registers and its kernel
// stack (libdump kernel/backtrace.hpp): through the kernel's own ORC tables
// (found through kallsyms), else frame pointers, else a stack scan marked
// with "?" frames. No vmlinux is needed.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli.hpp"
#include "commands.hpp"
#include "dump_selection.hpp"
#include "guest_kernel.hpp"
#include "options.hpp"
#include "xendump/dump_kernel_log.hpp"
#include "xendump/error.hpp"
#include "xendump/reader.hpp"

namespace xendump::ctl {

int cmd_backtrace(Invocation& c) {
    const std::string path = c.dump_path.string();
    const DumpReader& reader = *c.dump;
    const DumpKernel k = find_dump_kernel(reader);
    if (!k.kallsyms)
        throw Error("no kallsyms tables of a Linux kernel in the dump's pages: no symbols to unwind with", path);
    std::optional<kernel::PrintkLog> log;
    if (k.vmcoreinfo) {
        try {
            log = read_dump_log(reader, *k.vmcoreinfo);
        } catch (const Error&) {
            // Without the log the crashed vcpu is not marked; the traces stand.
        }
    }
    const DumpBacktraces traces = dump_backtraces(reader, k.vmcoreinfo ? &*k.vmcoreinfo : nullptr, *k.kallsyms,
                                                  k.release, log ? &*log : nullptr);
    if (c.json) {
        nlohmann::json j;
        j["file"] = path;
        j["orc"] = traces.orc;
        j["panic_vcpu"] = traces.panic_vcpu ? nlohmann::json(*traces.panic_vcpu) : nlohmann::json(nullptr);
        j["vcpus"] = nlohmann::json::array();
        for (const auto& v : traces.vcpus) {
            nlohmann::json e = v.trace ? backtrace_json(*v.trace, SIZE_MAX) : nlohmann::json::object();
            e["vcpu"] = v.vcpu;
            e["error"] = v.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.error);
            j["vcpus"].push_back(e);
        }
        print_json(j, c.json);
    } else {
        for (const auto& v : traces.vcpus) {
            std::printf("VCPU %u%s", v.vcpu, traces.panic_vcpu == v.vcpu ? " (reported the crash)" : "");
            if (!v.trace) {
                std::printf(": %s\n\n", v.error.c_str());
                continue;
            }
            std::printf(", %s:\n%s\n", std::string(kernel::to_string(v.trace->method)).c_str(),
                        kernel::format_backtrace(*v.trace).c_str());
        }
    }
    std::fflush(stdout);
    // A walk that stopped early is printed and says why (it is still the
    // best account of that vcpu): not a failure of the command.
    return cli::kExitOk;
}

}  // namespace xendump::ctl
