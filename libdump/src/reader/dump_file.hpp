// The open dump file: an fd, its size at open, and bounds-checked reads that
// say which structure was being read when they fail. An age-encrypted file
// (xen-dump-core(5) "Encrypted dumps") reads as its plaintext: size() and
// read_exact() are the plaintext's, each read decrypting only the 64 KiB
// chunks it touches (age/age.hpp Decryptor). A flattened file (makedumpfile
// -F, io/flattened.hpp), plain or encrypted, reads as the file it carries
// once unflatten() has found it one (reader/flattened_image.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xendump/fd.hpp"
#include "xendump/reader.hpp"

namespace xendump::age {
class Decryptor;
class Identity;
}  // namespace xendump::age

namespace xendump::io {
class RandomAccess;
}

namespace xendump::s3 {
class ObjectReader;
}

namespace xendump::reader {

class FlattenedImage;

// The first line of every age file (C2SP age, "Header").
inline constexpr std::string_view kAgeFirstLine = "age-encryption.org/v1\n";

// Whether the regular file open at `fd` (`size` bytes) starts with kAgeFirstLine.
bool starts_as_age(int fd, uint64_t size);
bool starts_as_age(const io::RandomAccess& in);

class DumpFile {
public:
    // The identities to decrypt with, asked for only when the file is
    // encrypted (a plain file needs no key file, nor that it be readable).
    using Identities = std::function<std::vector<age::Identity>()>;
    // The identities of `options`' files, read when asked for (each file as
    // age -i reads it; one that group or others may read is refused unless
    // allow_insecure_identity): for every reader of an input (DumpReader,
    // the converter's inputs). `options` must outlive the result.
    static Identities identities_of(const OpenOptions& options);
    // An encrypted file is decrypted with the first identity that matches;
    // without identities it is refused (Error saying it is encrypted).
    // `path` s3://BUCKET/KEY reads an object of the store through ranged
    // GETs (store/object_reader.hpp; the client's settings from the
    // environment), as it reads a file.
    explicit DumpFile(std::string path, const Identities& identities = {});
    // A regular file already open for reading (its fd now owned), named
    // `name` in errors: a file the library wrote itself (a temporary one).
    DumpFile(UniqueFd fd, std::string name);
    // Bytes the library keeps itself (a consistent live dump's temporary
    // image, dump/live_image.hpp), read through `in` as they are (fd() -1).
    explicit DumpFile(std::unique_ptr<io::RandomAccess> in);
    ~DumpFile();
    DumpFile(const DumpFile&) = delete;
    DumpFile& operator=(const DumpFile&) = delete;

    // The file's own fd: for advice (posix_fadvise) and, when in_place(),
    // for reading its bytes where they lie (copy_file_range); -1 for an
    // object in the store.
    int fd() const noexcept { return fd_; }
    // Of the plaintext when encrypted, of the carried file when flattened.
    uint64_t size() const noexcept { return size_; }
    const std::string& path() const noexcept { return path_; }
    bool encrypted() const noexcept { return age_ != nullptr; }
    // Whether the bytes read lie in fd() at their offsets: a local file, neither encrypted nor flattened.
    bool in_place() const noexcept { return fd_ >= 0 && !age_ && !flat_; }
    // An object in the store: what reading it has fetched so far (nullopt for a file).
    std::optional<StoreInfo> store() const;
    // The object read, when the bytes come from the store (null for a file).
    const s3::ObjectReader* object() const noexcept { return object_; }

    // When the bytes (the plaintext of an encrypted file) are a flattened
    // stream, reads go from now on to the file it carries: size() and
    // read_exact() are that file's. Returns whether they are; throws Error
    // (naming the file and the offset in it) for a stream that cannot be
    // read in place (reader/flattened_image.hpp).
    bool unflatten();
    const FlattenedImage* flattened() const noexcept { return flat_.get(); }
    // The plaintext's size (size() unless flattened).
    uint64_t stored_size() const noexcept { return flat_ ? stored_size_ : size_; }
    // Encrypted files: the header and the chunks decrypted so far (nullopt when plain).
    std::optional<EncryptionInfo> encryption() const;

    // Reads exactly out.size() bytes at `offset`. Throws Error (naming
    // `structure`) when the range leaves the file or the read fails.
    void read_exact(uint64_t offset, std::span<std::byte> out, const std::string& structure) const;
    std::vector<std::byte> read_bytes(uint64_t offset, uint64_t size, const std::string& structure) const;

private:
    void take_size();  // closes fd_ and throws unless it is a regular file
    void open_age(const Identities& identities);  // when in_ starts as an age file
    // Exactly out.size() bytes of the plaintext at `offset` (inside stored_size()).
    void read_stored(uint64_t offset, std::span<std::byte> out, const std::string& structure) const;

    std::string path_;
    int fd_ = -1;
    uint64_t size_ = 0;
    // What the bytes are read from: fd_ (a file), or an object in the store.
    std::unique_ptr<io::RandomAccess> in_;
    const s3::ObjectReader* object_ = nullptr;  // in_, when it is an object
    // Encrypted: the decryptor, read from several threads at once (verify's
    // two hashing threads): its chunk cache has its own lock, held only to
    // look a chunk up or keep it, never while one is decrypted.
    std::unique_ptr<age::Decryptor> age_;
    uint64_t stored_size_ = 0;              // flattened: the plaintext's size
    std::unique_ptr<FlattenedImage> flat_;  // set by unflatten()
};

}  // namespace xendump::reader
