// Encrypted dumps in xen-dumpctl (xen-dump-core(5) "Encrypted dumps",
// xen-dumpctl(1) "ENCRYPTED DUMPS"): the identities of the command line
// (cli/identity.hpp, shared with xen-dump-convert), and what a command does
// with an encrypted dump when it has none.
#pragma once

#include <filesystem>

#include "identity.hpp"
#include "xendump/reader.hpp"

namespace xendump::ctl {

using cli::describe_encryption;
using cli::identity_options;
using cli::kExitNeedsKey;
using cli::KeyNeeded;

// The dump at `path` opened with `open`'s identities. An encrypted dump and
// no identity: throws KeyNeeded saying so (cli::require_key).
DumpReader open_dump(const std::filesystem::path& path, const OpenOptions& open);

// Whether a dump file's name says it is encrypted (NAME.core.age, NAME.kdump.age).
bool has_age_suffix(const std::filesystem::path& path);

}  // namespace xendump::ctl
