// xen-dumpctl estimate [--dump-level N] [--json[=short|pretty]] FILE: what each dump level (makedumpfile -d)
// would keep of the dump's guest, and the pages and bytes of each class a
// level excludes, as `makedumpfile --mem-usage` shows them. The classes come
// from the guest kernel's struct page array through its VMCOREINFO (libdump
// kernel/dump_level.hpp); nothing is written.
#include <chrono>
#include <cstdio>
#include <string>

#include "cli.hpp"
#include "commands.hpp"
#include "dump_format.hpp"
#include "dump_selection.hpp"
#include "level_estimate.hpp"
#include "options.hpp"
#include "xendump/dump_kernel_log.hpp"
#include "xendump/error.hpp"
#include "xendump/kernel/dump_level.hpp"
#include "xendump/reader.hpp"

namespace xendump::ctl {

// --dump-level N, refused before the dump is looked for.
std::string check_estimate(const Invocation& c) {
    try {
        cli::dump_level_choice(c.p);
    } catch (const cli::UsageError& err) {
        return err.message;
    }
    return {};
}

int cmd_estimate(Invocation& c) {
    const std::string path = c.dump_path.string();
    const DumpReader& reader = *c.dump;
    const auto info = dump_vmcoreinfo(reader, true);
    const auto start = std::chrono::steady_clock::now();
    kernel::DumpLevelEstimate e;
    const unsigned also = cli::dump_level_choice(c.p);  // check_estimate: valid
    try {
        e = kernel::estimate_dump_levels(dump_level_input(reader, info ? &*info : nullptr), also);
    } catch (const Error& err) {
        std::fprintf(stderr, "xen-dumpctl estimate: %s: %s\n", path.c_str(), err.what());
        return cli::kExitFailure;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    cli::print_level_estimate(e, path, c.json, seconds);
    return cli::kExitOk;
}

}  // namespace xendump::ctl
