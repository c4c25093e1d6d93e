#include "guest_log.hpp"

#include <sys/stat.h>

#include "xendump/dump_kernel_log.hpp"
#include "xendump/error.hpp"

namespace xendump::daemon {

GuestLogRecord record_guest_log(const std::filesystem::path& dump) {
    GuestLogRecord out;
    kernel::PrintkLog log;
    try {
        const DumpReader reader = DumpReader::open(dump);
        out.kernel = dump_vmcoreinfo(reader, false).has_value();
        log = read_dump_log(reader, false);
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
