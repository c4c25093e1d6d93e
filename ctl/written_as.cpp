#include "written_as.hpp"

#include "xendump/text.hpp"

namespace xendump::ctl {

WrittenAs written_as(const DumpReader& r) {
    WrittenAs w;
    w.format = r.format() == FileFormat::v1 ? "v1" : r.format() == FileFormat::kdump ? "kdump" : "xen_elf";
    if (const auto compact = r.compact_format()) {
        w.compression = std::string(to_string(compact->compression));
        w.dump_level = compact->dump_level;
    }
    return w;
}

std::string format_column(const WrittenAs& w) {
    std::string out = escape_text(w.format);
    if (w.compression) out += "/" + escape_text(*w.compression);
    if (w.dump_level) out += "/d" + std::to_string(*w.dump_level);
    return out;
}

}  // namespace xendump::ctl
