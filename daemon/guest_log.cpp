#include "guest_log.hpp"

#include <sys/stat.h>

#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/recipients.hpp"

namespace xendump::daemon {

namespace {

// The crashed vcpu's top frames; nullopt when kallsyms or the vcpu is not found.
std::optional<GuestBacktrace> crash_backtrace(const GuestView& guest, const kernel::Vmcoreinfo& info,
                                              const kernel::PrintkLog& log) {
    const auto kallsyms = kernel::find_kallsyms(guest.pages, &info);
    if (!kallsyms) return std::nullopt;
    const DumpBacktraces traces = guest_backtraces(guest, &info, *kallsyms, info.release(), &log);
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

// The log of `guest` and what the record keeps of it (the file's name aside):
// one reading for a dump file and for a paused guest alike. Throws Error
// when there is no log to read.
kernel::PrintkLog read_record(const GuestView& guest, const std::optional<kernel::Vmcoreinfo>& info,
                              GuestLogRecord& out) {
    out.kernel = info.has_value();
    if (!info)
        throw Error("no VMCOREINFO of a Linux kernel in the dump (not a Linux guest, or its kernel published none): "
                    "the kernel log cannot be found");
    kernel::PrintkLog log = read_guest_log(guest, *info);
    if (kernel::first_crash_line(log)) {
        try {
            out.backtrace = crash_backtrace(guest, *info, log);
        } catch (const std::exception&) {
            // The log stands without a backtrace.
        }
    }
    out.log.records = log.records.size();
    out.log.partial = log.partial();
    out.log.damage = log.damage;
    if (auto panic = kernel::first_crash_line(log)) out.panic = bounded_panic_line(std::move(*panic));
    return log;
}

unsigned mode_of(const std::filesystem::path& dump) {
    struct stat st {};
    if (::stat(dump.c_str(), &st) != 0) throw_errno("cannot stat", dump.string());
    return st.st_mode & 0777;
}

}  // namespace

std::string bounded_panic_line(std::string line) {
    if (line.size() <= kPanicLineBytes) return line;
    const auto* s = reinterpret_cast<const unsigned char*>(line.data());
    size_t cut = 0;
    for (size_t next; cut < line.size(); cut = next) {
        if (s[cut] == '\\')
            next = cut + (cut + 1 < line.size() && s[cut + 1] == 'x' ? 4 : 2);  // \xNN, \n, \r, \\ (escape_text)
        else if (s[cut] < 0x80)
            next = cut + 1;
        else
            next = cut + (s[cut] >= 0xF0 ? 4 : s[cut] >= 0xE0 ? 3 : 2);
        if (next > kPanicLineBytes) break;
    }
    const size_t dropped = line.size() - cut;
    line.resize(cut);
    line += " [" + std::to_string(dropped) + " more bytes]";
    return line;
}

GuestLogRecord record_guest_log(const std::filesystem::path& dump) {
    GuestLogRecord out;
    kernel::PrintkLog log;
    try {
        const DumpReader reader = DumpReader::open(dump);
        log = read_record(guest_view(reader), dump_vmcoreinfo(reader, false), out);
    } catch (const std::exception& e) {
        out.log.error = e.what();
        return out;
    }
    const std::filesystem::path file = dmesg_path(dump);
    try {
        write_file_atomically(file, kernel::format_dmesg(log), mode_of(dump));
        out.log.dmesg_file = file.filename().string();
    } catch (const std::exception& e) {
        out.log.error = e.what();
    }
    return out;
}

GuestLogCapture capture_guest_log(const GuestView& guest, const kernel::Vmcoreinfo* info) {
    GuestLogCapture out;
    try {
        out.text = kernel::format_dmesg(read_record(guest, info ? std::optional(*info) : std::nullopt, out.record));
    } catch (const std::exception& e) {
        out.record.log.error = e.what();
    }
    return out;
}

void save_encrypted_guest_log(const std::filesystem::path& dump, GuestLogCapture& capture,
                              const std::vector<std::string>& recipients) {
    if (!capture.text) return;
    const std::filesystem::path file = dmesg_path(dump);
    try {
        AtomicFile out(file, mode_of(dump));
        AgeWriter age(out.fd(), file.string(), recipients);
        age.write(std::as_bytes(std::span(*capture.text)));
        age.finish();
        out.commit();
        capture.record.log.dmesg_file = file.filename().string();
    } catch (const std::exception& e) {
        capture.record.log.error = e.what();
    }
}

}  // namespace xendump::daemon
