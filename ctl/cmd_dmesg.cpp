// xen-dumpctl dmesg [--json[=short|pretty]] FILE: the guest kernel's log from its printk
// buffer in the dump (libdump kernel/printk_log.hpp), as `makedumpfile
// --dump-dmesg` prints it, or as JSON records. The buffer is found through
// the dump's VMCOREINFO note (or, for a file without one such as an
// unconverted `xl dump-core` file, through a VMCOREINFO found in its pages);
// kernel virtual addresses are translated with the guest's own page tables.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli.hpp"
#include "commands.hpp"
#include "dump_selection.hpp"
#include "options.hpp"
#include "xendump/dump_kernel_log.hpp"
#include "xendump/error.hpp"
#include "xendump/kernel/printk_log.hpp"
#include "xendump/reader.hpp"

namespace xendump::ctl {

namespace {

nlohmann::json record_json(const kernel::PrintkRecord& r) {
    auto optional = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    nlohmann::json j;
    j["sequence"] = optional(r.sequence);
    j["time_ns"] = r.time_ns;
    j["level"] = optional(r.level);
    j["facility"] = optional(r.facility);
    j["caller_id"] = optional(r.caller_id);
    j["caller"] = r.caller_id ? nlohmann::json(kernel::caller_string(*r.caller_id)) : nlohmann::json(nullptr);
    // Guest bytes need not be UTF-8: invalid sequences become U+FFFD.
    j["text"] = r.text;
    if (!r.subsystem.empty()) j["subsystem"] = r.subsystem;
    if (!r.device.empty()) j["device"] = r.device;
    if (r.truncated) j["truncated"] = true;
    return j;
}

}  // namespace

int cmd_dmesg(Invocation& c) {
    const std::string path = c.dump_path.string();
    kernel::PrintkLog log;
    try {
        log = read_dump_log(*c.dump, true);
    } catch (const Error& e) {
        std::fprintf(stderr, "xen-dumpctl dmesg: %s: %s\n", path.c_str(), e.what());
        return cli::kExitFailure;
    }
    if (c.json) {
        nlohmann::json j;
        j["file"] = path;
        j["format"] = log.format == kernel::PrintkFormat::ringbuffer ? "printk_ringbuffer" : "log_buf";
        j["buffer_size"] = log.buffer_size;
        j["partial"] = log.partial();
        j["damage"] = log.damage;
        j["records"] = nlohmann::json::array();
        for (const auto& r : log.records) j["records"].push_back(record_json(r));
        print_json(j, c.json);
    } else {
        const std::string out = kernel::format_dmesg(log);
        std::fwrite(out.data(), 1, out.size(), stdout);
    }
    std::fflush(stdout);
    // A partial log is printed (what could be read is worth having) and
    // marked: each reason on stderr, and exit status 1.
    for (const auto& d : log.damage)
        std::fprintf(stderr, "xen-dumpctl dmesg: %s: the log is incomplete: %s\n", path.c_str(), d.c_str());
    return log.partial() ? cli::kExitFailure : cli::kExitOk;
}

}  // namespace xendump::ctl
