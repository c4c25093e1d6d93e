#include "compact_readers.hpp"

namespace xendump::ctl {

CompactReaders compact_readers(std::string_view compression) {
    if (compression == "none" || compression == "zlib" || compression == "lzo")
        return {{"crash", "libkdumpfile", "drgn", "makedumpfile", "xen-dumpctl", "xen-dump-convert"}, ""};
    if (compression == "zstd")
        return {{"crash", "libkdumpfile", "drgn", "xen-dumpctl", "xen-dump-convert"},
                "not Debian 12's makedumpfile (1.7.2, built without zstd): --compress zlib or lzo for it"};
    return {{"xen-dumpctl", "xen-dump-convert"}, "no other reader: " + std::string(compression) + " has no flag of makedumpfile's format"};
}

CompactReaders flattened_readers(const CompactReaders& carried) {
    CompactReaders out;
    std::string later;
    for (const auto& name : carried.read) {
        if (name == "crash" || name.starts_with("xen-dump"))
            out.read.push_back(name);
        else
            later += (later.empty() ? "" : ", ") + name;
    }
    if (!later.empty()) out.not_read = later + " once rearranged (xen-dump-convert FILE -o OUT, makedumpfile -R)";
    if (!carried.not_read.empty()) out.not_read += (out.not_read.empty() ? "" : "; ") + carried.not_read;
    return out;
}

std::string readers_line(const CompactReaders& r) {
    std::string out;
    for (const auto& name : r.read) {
        if (!out.empty()) out += ", ";
        out += name;
    }
    if (!r.not_read.empty()) out += "; " + r.not_read;
    return out;
}

}  // namespace xendump::ctl
