// The age v1 file format (C2SP age, https://c2sp.org/age): recipients and
// identities (X25519 and ssh-ed25519), the header and its MAC, and the STREAM
// payload of 64 KiB chunks, sealed and opened one chunk at a time so that a
// writer may seal chunks in any order (its head last) and a reader may
// decrypt only the chunks it needs. The primitives come from OpenSSL (crypto.hpp);
// only the framing is written here.
//
// Layout of a file (the spec's "Header" and "Payload"):
//   age-encryption.org/v1\n  (-> stanza\n body lines)*  --- MAC\n
//   nonce (16 bytes)  chunk 0 … chunk n-1
// Chunk i is at payload_offset + i * (65536 + 16); every chunk but the last
// holds 65536 bytes of plaintext plus a 16-byte tag; the last holds 0 to 65536
// (0 only when it is the only chunk) and is sealed with the "last" flag.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "age/crypto.hpp"
#include "util/lru_slots.hpp"

namespace xendump::io {
class RandomAccess;
}

namespace xendump::age {

inline constexpr size_t kChunkSize = 64 * 1024;
inline constexpr size_t kSealedChunkSize = kChunkSize + kTagSize;
inline constexpr size_t kPayloadNonceSize = 16;
inline constexpr size_t kFileKeySize = 16;
using FileKey = Secret<kFileKeySize>;

// One recipient stanza: "-> ARG0 ARG1 …" and its body (ARG0 is its type).
struct Stanza {
    std::vector<std::string> args;
    Bytes body;
    size_t offset = 0;  // where its "->" line starts in the file (parsed stanzas)
};

// Whom a file is encrypted to: an X25519 key (age1…) or an SSH ed25519 public key.
class Recipient {
public:
    enum class Kind { x25519, ssh_ed25519 };
    // "age1…" or "ssh-ed25519 BASE64 [comment]". Throws Error saying what is
    // wrong (without repeating the text, which may have come from a private file).
    static Recipient parse(std::string_view text);
    static Recipient x25519(const Point& public_key);

    Kind kind() const noexcept { return kind_; }
    // age1… or "ssh-ed25519 BASE64" (no comment).
    std::string to_string() const;
    // Wraps `file_key` for this recipient with a fresh ephemeral key.
    Stanza wrap(const FileKey& file_key) const;

private:
    Recipient() = default;
    friend class Identity;
    Kind kind_ = Kind::x25519;
    Point x25519_{};  // the X25519 key (ssh-ed25519: the converted ed25519 key)
    Bytes ssh_key_;   // ssh-ed25519: the public key in SSH wire format
};

// A recipients file as age -R reads it: one recipient per line, '#' comments
// and empty lines skipped; errors name "FILE:LINE" (never the line's text).
std::vector<Recipient> parse_recipients(std::string_view text, const std::string& name);
std::vector<Recipient> read_recipients_file(const std::filesystem::path& file);
// WriteOptions::recipients parsed (xendump/recipients.hpp); errors name the
// recipient by its place in the list ("recipient 2 of 3: …").
std::vector<Recipient> parse_recipient_list(const std::vector<std::string>& texts);

// A private key: an age X25519 identity (AGE-SECRET-KEY-1…) or an SSH
// ed25519 private key (unencrypted OpenSSH format). Secrets are wiped on
// destruction.
class Identity {
public:
    enum class Kind { x25519, ssh_ed25519 };
    static Identity generate();  // a new X25519 identity
    static Identity parse(std::string_view age_secret_key);
    // "-----BEGIN OPENSSH PRIVATE KEY-----" … (an ssh-ed25519 key, no passphrase).
    static Identity parse_openssh(std::string_view pem);

    Kind kind() const noexcept { return kind_; }
    Recipient recipient() const;
    std::string to_string() const;  // AGE-SECRET-KEY-1… (X25519 identities only)
    // The file key when `stanza` is addressed to this identity; nullopt when
    // it is not (another recipient's or an unknown type). Throws Error for a
    // stanza of this identity's type that is malformed (age: a header failure).
    std::optional<FileKey> unwrap(const Stanza& stanza) const;

private:
    Identity() = default;
    Kind kind_ = Kind::x25519;
    Key32 secret_;    // the X25519 scalar (ssh-ed25519: SHA-512(seed)[0..32))
    Point x25519_{};  // its public key
    Bytes ssh_key_;   // ssh-ed25519: the public key in SSH wire format
};

// An identities file as age -i reads it: either one OpenSSH private key, or
// AGE-SECRET-KEY-1… lines with '#' comments and empty lines; errors name
// "FILE:LINE". A file that group or others may read is refused unless
// `allow_insecure` (its keys are already exposed).
std::vector<Identity> parse_identities(std::string_view text, const std::string& name);
std::vector<Identity> read_identities_file(const std::filesystem::path& file, bool allow_insecure);

// A parsed header (everything before the payload nonce).
struct Header {
    std::vector<Stanza> stanzas;
    std::array<uint8_t, 32> mac{};
    size_t mac_input_size = 0;  // the MAC covers bytes [0, mac_input_size): up to "---"
    size_t size = 0;            // the header's bytes, through the MAC line's newline
};
// The largest header read (a hostile file must not make a reader read without bound).
inline constexpr size_t kMaxHeaderSize = 1 << 20;
// Parses the header at the start of `data` (which may go on with the
// payload). Throws Error "age header: …" naming `name` and the offset.
Header parse_header(std::span<const uint8_t> data, const std::string& name);
// The header with stanzas `stanzas` and the MAC under `file_key`.
Bytes encode_header(const std::vector<Stanza>& stanzas, const FileKey& file_key);

// Seals the chunks of one file: a fresh file key wrapped for each recipient,
// a fresh payload nonce. head() is what precedes chunk 0. Chunks may be sealed
// in any order and from several threads, each exactly once (sealing one
// twice would reuse its nonce); the last one is flagged, and none after it.
class Encryptor {
public:
    explicit Encryptor(std::span<const Recipient> recipients);
    ~Encryptor();
    Encryptor(const Encryptor&) = delete;
    Encryptor& operator=(const Encryptor&) = delete;

    const Bytes& head() const noexcept { return head_; }
    uint64_t payload_offset() const noexcept { return head_.size(); }
    uint64_t chunk_offset(uint64_t index) const noexcept { return head_.size() + index * kSealedChunkSize; }
    // The size of the whole file for `plaintext_size` bytes of plaintext.
    uint64_t file_size(uint64_t plaintext_size) const noexcept;

    // Seals chunk `index`: `plain` is kChunkSize bytes unless `last`; the last
    // chunk is empty only when it is chunk 0. `out` has plain.size() + 16 bytes.
    void seal(uint64_t index, std::span<const uint8_t> plain, bool last, std::span<uint8_t> out);
    // The same, the chunk's plaintext given in pieces that follow each other.
    void seal(uint64_t index, std::span<const std::span<const uint8_t>> plain, bool last, std::span<uint8_t> out);
    // True when the last chunk and every chunk before it were sealed.
    bool complete() const;

private:
    Bytes head_;
    Key32 payload_key_;
    mutable std::mutex mutex_;
    std::vector<bool> sealed_;
    std::optional<uint64_t> last_;
    uint64_t count_ = 0;
};

// Encrypts a stream front to back through an Encryptor: `out` receives the
// head, then each sealed chunk. finish() seals the last chunk.
class StreamWriter {
public:
    StreamWriter(std::span<const Recipient> recipients, std::function<void(std::span<const uint8_t>)> out);
    void write(std::span<const uint8_t> data);
    void finish();
    uint64_t plaintext_size() const noexcept { return size_; }

private:
    void emit(bool last);
    Encryptor enc_;
    std::function<void(std::span<const uint8_t>)> out_;
    SecretBuffer buffer_;  // the chunk being filled
    Bytes sealed_;
    uint64_t index_ = 0, size_ = 0;
    bool started_ = false, finished_ = false;
};

// Reads an age file with random access: the header is parsed, the file key
// unwrapped with the first identity that matches, the header MAC and the last
// chunk checked at construction; then any chunk is decrypted on its own (from
// its counter), and the last few are kept. `in` (a file, an object in the
// store) stays the caller's and must outlive the decryptor; its name() names
// the file in errors, which give the chunk and its offset.
//
// chunk() and read() may be called from several threads at once: a chunk is
// decrypted outside the cache's lock (two threads missing the same chunk
// may both decrypt it), so readers of different chunks do not wait for
// each other (verify's hashing threads).
class Decryptor {
public:
    Decryptor(const io::RandomAccess& in, std::span<const Identity> identities, size_t cache_chunks = 4);
    // The regular file open at `fd` (the caller's), named `name`: anything
    // else (a pipe) is refused, chunks being read where they lie.
    Decryptor(int fd, const std::string& name, std::span<const Identity> identities, size_t cache_chunks = 4);
    ~Decryptor();
    Decryptor(const Decryptor&) = delete;
    Decryptor& operator=(const Decryptor&) = delete;

    uint64_t size() const noexcept { return size_; }  // bytes of plaintext
    uint64_t chunks() const noexcept { return chunks_; }
    uint64_t header_size() const noexcept { return header_size_; }
    uint64_t payload_offset() const noexcept { return header_size_ + kPayloadNonceSize; }
    uint64_t chunk_offset(uint64_t index) const noexcept { return payload_offset() + index * kSealedChunkSize; }
    const std::vector<Stanza>& stanzas() const noexcept { return stanzas_; }
    // Chunks decrypted so far (the last one at construction included, the
    // cache's hits not): what a reader's random access cost.
    uint64_t chunks_decrypted() const noexcept { return decrypted_.load(std::memory_order_relaxed); }

    // The plaintext of chunk `index`, authenticated (a copy).
    SecretBuffer chunk(uint64_t index);
    // Reads plaintext at `offset` into `out`; fewer bytes only at the end.
    size_t read(uint64_t offset, std::span<uint8_t> out);

private:
    // Copies chunk `index`'s bytes from `in` on into `out` (as many as fit):
    // from the cache, else decrypted and then kept. Returns how many.
    size_t copy_chunk(uint64_t index, size_t in, std::span<uint8_t> out);
    size_t plain_size(uint64_t index) const noexcept;  // the plaintext bytes of chunk `index`
    void decrypt(uint64_t index, SecretBuffer& out);
    // Into exactly plain_size(index) bytes; wiped when the chunk does not authenticate.
    void decrypt(uint64_t index, std::span<uint8_t> out);
    bool previous_is_last(uint64_t index);  // chunk `index` (full) is sealed as the last

    void open(std::span<const Identity> identities);

    std::unique_ptr<io::RandomAccess> own_;  // the fd form's
    const io::RandomAccess& in_;
    std::string name_;
    std::vector<Stanza> stanzas_;
    uint64_t file_size_ = 0, header_size_ = 0, chunks_ = 0, size_ = 0;
    Key32 payload_key_;
    std::atomic<uint64_t> decrypted_{0};
    std::mutex cache_mutex_;  // cache_
    util::LruSlots<SecretBuffer> cache_;
};

// Reads the header of the age file `in` (no key needed): what `verify`
// checks without an identity. Also returns the file's size. The `fd` form
// refuses what is not a regular file (chunks are read where they lie).
struct FileHeader {
    Header header;
    Bytes bytes;  // the header's bytes
    uint64_t file_size = 0;
};
FileHeader read_header(const io::RandomAccess& in);
FileHeader read_header(int fd, const std::string& name);
// The regular file open at `fd` (the caller's) to read with random access;
// Error naming `name` for anything else.
std::unique_ptr<io::RandomAccess> regular_file(int fd, const std::string& name);

}  // namespace xendump::age
