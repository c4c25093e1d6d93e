// Recipients of encrypted dumps (issue 33): WriteOptions::recipients holds
// them as text, one each, in the forms the age tool takes with -r: an X25519
// key "age1…" or an SSH public key "ssh-ed25519 AAAA… [comment]". A dump
// written to recipients is an age v1 file whose plaintext is exactly the
// file written without them (xen-dump-core(5), "Encrypted dumps"); only a
// private key of one of them reads it.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace xendump {

// Checks one recipient and returns it in its canonical form (an SSH key
// without its comment). Throws Error saying what is wrong (without repeating
// the text).
std::string parse_recipient(std::string_view text);

// A recipients file as `age -R` reads it: one recipient a line, '#'
// comments and empty lines skipped. Throws Error naming FILE:LINE.
std::vector<std::string> read_recipients_file(const std::filesystem::path& file);

}  // namespace xendump
