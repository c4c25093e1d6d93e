// Encrypted dumps in xen-dumpctl (xen-dump-core(5) "Encrypted dumps",
// xen-dumpctl(1) "ENCRYPTED DUMPS"): the identities of the command line, and
// what a command does with an encrypted dump when it has none.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "options.hpp"
#include "xendump/error.hpp"
#include "xendump/reader.hpp"

namespace xendump::ctl {

// The exit status of a command that needs an encrypted dump's pages and was
// given no identity (-i, $XEN_DUMP_IDENTITY); xen-dumpctl(1) "EXIT STATUS".
inline constexpr int kExitNeedsKey = 3;

// An encrypted dump and no identity to read it: main prints it (one line) and exits kExitNeedsKey.
class KeyNeeded : public Error {
public:
    using Error::Error;
};

// -i/--identity FILE (repeatable), else $XEN_DUMP_IDENTITY; --allow-insecure-identity.
OpenOptions identity_options(const ParsedArgs& p);

// The dump at `path` opened with `open`'s identities. An encrypted dump and
// no identity: throws KeyNeeded saying so (the header parsed first: a
// damaged one is an Error of its own).
DumpReader open_dump(const std::filesystem::path& path, const OpenOptions& open);

// "encrypted (age, N recipients: X25519, ssh-ed25519)": what info, list and verify say of one.
std::string describe_encryption(const EncryptionInfo& e);

// Whether a dump file's name says it is encrypted (NAME.core.age, NAME.kdump.age).
bool has_age_suffix(const std::filesystem::path& path);

}  // namespace xendump::ctl
