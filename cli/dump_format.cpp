#include "dump_format.hpp"

#include <charconv>
#include <string>

#include "xendump/error.hpp"
#include "xendump/kernel/dump_level.hpp"

namespace xendump::cli {

DumpFormatChoice dump_format_choice(const Parsed& p) {
    DumpFormatChoice c;
    const std::string format = p.value("--format").value_or("v1");
    if (format != "v1" && format != "kdump") throw UsageError{"--format wants v1 or kdump, not '" + format + "'"};
    c.kdump = format == "kdump";
    if (auto alg = p.value("--compress")) {
        try {
            c.compression = compression_from_string(*alg);
        } catch (const Error& e) {
            throw UsageError{e.message()};
        }
        if (!c.kdump) throw UsageError{"--compress needs --format kdump"};
    }
    if (p.has("--dump-level")) {
        c.dump_level = dump_level_choice(p);
        if (!c.kdump) throw UsageError{"--dump-level needs --format kdump"};
    }
    return c;
}

unsigned dump_level_choice(const Parsed& p) {
    const auto level = p.value("--dump-level");
    if (!level) return 0;
    unsigned n = 0;
    const auto [end, ec] = std::from_chars(level->data(), level->data() + level->size(), n);
    if (level->empty() || ec != std::errc() || end != level->data() + level->size() || n > kernel::kMaxDumpLevel)
        throw UsageError{"--dump-level wants a number from 0 to 31, not '" + *level + "'"};
    return n;
}

}  // namespace xendump::cli
