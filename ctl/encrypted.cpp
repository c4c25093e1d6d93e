#include "encrypted.hpp"

namespace xendump::ctl {

DumpReader open_dump(const std::filesystem::path& path, const OpenOptions& open) {
    cli::require_key(path, open);
    return DumpReader::open(path, open);
}

bool has_age_suffix(const std::filesystem::path& path) { return path.filename().string().ends_with(".age"); }

}  // namespace xendump::ctl
