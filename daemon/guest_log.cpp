#include "guest_log.hpp"

#include <sys/stat.h>

#include "xendump/dump_kernel_log.hpp"
#include "xendump/error.hpp"

namespace xendump::daemon {

namespace {

// The crashed vcpu's top frames; nullopt when kallsyms or the vcpu is not found.
std::optional<GuestBacktrace> crash_backtrace(const DumpReader& reader, const kernel::Vmcoreinfo& info,
                                              const kernel::PrintkLog& log) {
    const auto kallsyms = kernel::find_kallsyms(dump_page_reader(reader), &info);
    if (!kallsyms) return std::nullopt;
    const DumpBacktraces traces = dump_backtraces(reader, &info, *kallsyms, info.release(), &log);
    for (const auto& v : traces.vcpus) {
        if (traces.panic_vcpu != v.vcpu || !v.trace) continue;
        GuestBacktrace b;
        b.vcpu = v.vcpu;
        b.method = std::string(kernel::to_string(v.trace->method));
        for (const auto& f : v.trace->frames) {
            if (b.frames.size() == kGuestBacktraceFrames) break;
            b.frames.push_back(kernel::format_frame(f));
        }
        if (v.trace->user_mode) b.frames.push_back(kernel::summarize_backtrace(*v.trace, 1));
        b.stopped = v.trace->stopped;
        return b;
    }
    return std::nullopt;
}

}  // namespace

GuestLogRecord record_guest_log(const std::filesystem::path& dump) {
    GuestLogRecord out;
    kernel::PrintkLog log;
    try {
        const DumpReader reader = DumpReader::open(dump);
        const auto info = dump_vmcoreinfo(reader, false);
        out.kernel = info.has_value();
        log = read_dump_log(reader, false);
        if (info && kernel::first_crash_line(log)) {
            try {
                out.backtrace = crash_backtrace(reader, *info, log);
            } catch (const std::exception&) {
                // The log stands without a backtrace.
            }
        }
    } catch (const std::exception& e) {
        out.log.error = e.what();
        return out;
    }
    out.log.records = log.records.size();
    out.log.partial = log.partial();
    out.log.damage = log.damage;
    out.panic = kernel::first_crash_line(log);
    const std::filesystem::path file = dmesg_path(dump);
    try {
        struct stat st {};
        if (::stat(dump.c_str(), &st) != 0) throw_errno("cannot stat", dump.string());
        write_file_atomically(file, kernel::format_dmesg(log), st.st_mode & 0777);
        out.log.dmesg_file = file.filename().string();
    } catch (const std::exception& e) {
        out.log.error = e.what();
    }
    return out;
}

}  // namespace xendump::daemon
