// Recipients of encrypted dumps (issue 33): WriteOptions::recipients holds
// them as text, one each, in the forms the age tool takes with -r: an X25519
// key "age1…" or an SSH public key "ssh-ed25519 AAAA… [comment]". A dump
// written to recipients is an age v1 file whose plaintext is exactly the
// file written without them (xen-dump-core(5), "Encrypted dumps"); only a
// private key of one of them reads it.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
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

// An age v1 file written front to back to `fd` (a file or a pipe; the fd
// stays the caller's): the bytes given to write(), encrypted to
// `recipients` (as parse_recipient takes them, at least one) in 64 KiB
// chunks, each sealed and written as soon as the next byte arrives. What
// is not given to write() never reaches `fd`: the plaintext is held in
// memory one chunk at a time, wiped once sealed. Without finish() the file
// lacks its last chunk, and age refuses it. For what is written once and
// in order (xen-dumpctl dump's vmcore, the service's NAME.dmesg.txt.age);
// the dump writers' own output takes WriteOptions::recipients. Throws Error
// naming `name` (a bad recipient: which one).
class AgeWriter {
public:
    AgeWriter(int fd, std::string name, const std::vector<std::string>& recipients);
    ~AgeWriter();
    AgeWriter(const AgeWriter&) = delete;
    AgeWriter& operator=(const AgeWriter&) = delete;

    void write(std::span<const std::byte> data);
    void finish();  // seals the last chunk (once; nothing may be written after)

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace xendump
