// xen-dumpctl dmesg [--json[=short|pretty]] FILE: the guest kernel's log from its printk
// buffer in the dump (libdump kernel/printk_log.hpp), as `makedumpfile
// --dump-dmesg` prints it, or as JSON records. The buffer is found through
// the dump's VMCOREINFO note (or, for a file without one such as an
// unconverted `xl dump-core` file, through a VMCOREINFO found in its pages);
// kernel virtual addresses are translated with the guest's own page tables.
#include <cstdio>
#include <iostream>
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

constexpr std::string_view kUsage =
    "xen-dumpctl dmesg [--json[=short|pretty]] [-S TIME] [-U TIME] [-r] [-1 | -n N] [--dump-dir DIR] [--config FILE] FILE|MATCH...";

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

int cmd_dmesg(Args args) {
    auto a = parse_file_command(args, false);
    const ParsedArgs& p = a.p;
    if (p.help) {
        std::printf("usage: %.*s\n\nPrint the guest kernel's log (its printk buffer, as dmesg shows it) from the\n"
                    "dump, one \"[seconds.micros] text\" line per record, as makedumpfile prints the log.\n"
                    "Needs the kernel's VMCOREINFO (in the dump's note, else found in its pages).\n"
                    "With --json, one JSON object: the format, whether the log is partial and\n"
                    "why, and the records (sequence, time_ns, level, facility, caller, text).\n"
                    "Of the dumps MATCH selects, the latest one that has a file is read.\n%s\n%s",
                    static_cast<int>(kUsage.size()), kUsage.data(), kSelectionHelp, options_help("dmesg").c_str());
        return cli::kExitOk;
    }
    if (!a.error.empty()) return usage_error("dmesg", a.error);
    const std::string path = one_dump(a).string();
    auto reader = DumpReader::open(path);
    kernel::PrintkLog log;
    try {
        log = read_dump_log(reader, true);
    } catch (const Error& e) {
        std::fprintf(stderr, "xen-dumpctl dmesg: %s: %s\n", path.c_str(), e.what());
        return cli::kExitFailure;
    }
    if (p.has("--json")) {
        nlohmann::json j;
        j["file"] = path;
        j["format"] = log.format == kernel::PrintkFormat::ringbuffer ? "printk_ringbuffer" : "log_buf";
        j["buffer_size"] = log.buffer_size;
        j["partial"] = log.partial();
        j["damage"] = log.damage;
        j["records"] = nlohmann::json::array();
        for (const auto& r : log.records) j["records"].push_back(record_json(r));
        std::cout << j.dump(a.json_indent, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
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
