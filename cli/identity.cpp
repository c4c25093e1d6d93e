#include "identity.hpp"

#include <cstdlib>

namespace xendump::cli {

OpenOptions identity_options(const Parsed& p) {
    OpenOptions out;
    for (const std::string& f : p.values("--identity")) out.identity_files.emplace_back(f);
    if (out.identity_files.empty())
        if (const char* env = std::getenv("XEN_DUMP_IDENTITY"); env && *env) out.identity_files.emplace_back(env);
    out.allow_insecure_identity = p.has("--allow-insecure-identity");
    return out;
}

void require_key(const std::filesystem::path& path, const OpenOptions& open) {
    if (!open.identity_files.empty()) return;
    if (const auto e = encryption_of(path))
        throw KeyNeeded(describe_encryption(*e) + ": its pages need a key: give an identity with -i FILE (or $XEN_DUMP_IDENTITY)",
                        path.string());
}

std::string describe_encryption(const EncryptionInfo& e) {
    std::string types;
    for (const auto& t : e.recipient_types) types += (types.empty() ? "" : ", ") + t;
    return "encrypted (age, " + std::to_string(e.recipient_types.size()) +
           (e.recipient_types.size() == 1 ? " recipient" : " recipients") + (types.empty() ? "" : ": " + types) + ")";
}

}  // namespace xendump::cli
