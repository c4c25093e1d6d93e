// The guest kernel inside a dump file, as `info` and `symbol` show it: the
// VMCOREINFO note (xen-dump-core(5) "Notes" note 7) and the kallsyms tables found in the
// dump's pages by their shape (libdump kernel/kallsyms.hpp), read through
// DumpReader. No vmlinux or System.map is needed.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "xendump/kernel/backtrace.hpp"
#include "xendump/kernel/kallsyms.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"
#include "xendump/reader.hpp"

namespace xendump::ctl {

struct DumpKernel {
    std::optional<kernel::Vmcoreinfo> vmcoreinfo;  // the note, when present and valid
    std::optional<kernel::Kallsyms> kallsyms;
    std::optional<std::string> banner;             // linux_banner, without the newline
    std::string release;  // OSRELEASE, KERNEL=, KERNEL_UNTRUSTED= or from the banner, raw; "" unknown
    bool found() const { return vmcoreinfo || kallsyms; }
    // Whether the release may name the kernel (kernel::is_release_name): an
    // untrusted one is shown escaped, marked, and never used to build a path.
    bool release_trusted() const { return kernel::is_release_name(release); }
    // "name+0x1f" for an address inside the kernel image (between the first
    // symbol and _end); nullopt elsewhere (user space, modules, no kallsyms),
    // where the nearest lower symbol would be a guess.
    std::optional<std::string> symbolize(uint64_t address) const;
};

// The release the dump's NT_XEN_DOMAIN note records, raw: KERNEL=, else
// KERNEL_UNTRUSTED= unescaped; "" when neither.
std::string noted_release(const DumpReader& reader);

// `release` for a human-readable output: escaped (escape_text), followed by
// " (untrusted)" when it is no release name (kernel::is_release_name).
std::string shown_release(const std::string& release);

// Looks for the kernel: VMCOREINFO first (it tells kallsyms where to look
// and lets it verify its table), else a shape search of the pages.
DumpKernel find_dump_kernel(const DumpReader& reader);

// One backtrace as JSON (`backtrace --json`, and `info` for the crashed
// vcpu): method, user_mode, user_ip, partial, stopped, and at most
// `max_frames` frames (ip, sp, symbol, reliable).
nlohmann::json backtrace_json(const kernel::Backtrace& t, size_t max_frames);

}  // namespace xendump::ctl
