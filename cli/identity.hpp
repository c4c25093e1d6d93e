// -i/--identity and --allow-insecure-identity of the programs that read
// dumps (xen-dumpctl, xen-dump-convert), as age takes -i: the private keys
// of encrypted dumps (xen-dump-core(5) "Encrypted dumps"), the same rows,
// the same default ($XEN_DUMP_IDENTITY), the same refusal of an identity
// file others may read (libdump reads the files: OpenOptions), and the same
// one line and exit status when a dump is encrypted and no key is given.
#pragma once

#include <filesystem>
#include <string>

#include "cli_options.hpp"
#include "xendump/error.hpp"
#include "xendump/reader.hpp"

namespace xendump::cli {

inline constexpr Option kIdentityOptions[] = {
    {"identity", 'i', Arg::required, "FILE",
     "an age identity file (AGE-SECRET-KEY-1... lines or an ssh-ed25519\nprivate key) to read an encrypted dump; "
     "repeatable (default:\n$XEN_DUMP_IDENTITY)"},
    {"allow-insecure-identity", 0, Arg::none, "", "accept an identity file that group or others may read"},
};

// The exit status of a program that needs an encrypted dump's pages and was
// given no identity (-i, $XEN_DUMP_IDENTITY): xen-dumpctl(1) and
// xen-dump-convert(1) "EXIT STATUS".
inline constexpr int kExitNeedsKey = 3;

// An encrypted dump and no identity to read it: the program prints it (one
// line) and exits kExitNeedsKey.
class KeyNeeded : public Error {
public:
    using Error::Error;
};

// -i/--identity FILE (repeatable), else $XEN_DUMP_IDENTITY; --allow-insecure-identity.
OpenOptions identity_options(const Parsed& p);

// Throws KeyNeeded when the file at `path` is encrypted and `open` names no
// identity (its header parsed first: a damaged one is an Error of its own).
void require_key(const std::filesystem::path& path, const OpenOptions& open);

// "encrypted (age, N recipients: X25519, ssh-ed25519)": what the programs say of one.
std::string describe_encryption(const EncryptionInfo& e);

}  // namespace xendump::cli
