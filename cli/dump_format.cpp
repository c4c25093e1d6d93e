#include "dump_format.hpp"

#include <string>

#include "xendump/error.hpp"

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
    return c;
}

}  // namespace xendump::cli
