// An unnamed temporary file (io/temp_file.hpp) whose bytes lie on disk only
// sealed, under a key of its own that lives in this object's memory and
// dies with it (issue 33 item 3: no plaintext on a disk, temporary files
// included). What the writers and the converter keep out of memory (the
// page digests, the bitmaps of pfns and of machine frames, a legacy source's
// tables) goes through it.
//
// The file is read and written at any offset, bytes rewritten included,
// which age's STREAM (each chunk sealed once) does not allow; so it is cut
// into blocks of kBlock bytes, each sealed on its own with ChaCha20-Poly1305
// (OpenSSL, age/crypto.hpp) under the nonce (block number, how many times
// the block was sealed): a nonce is never used twice under the key, and a
// block read back from another place or an older write does not
// authenticate. A block is at kBlock + 16 bytes times its number; the counts
// stay in memory (4 bytes per 4 KiB block: 1/1024 of the file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "age/crypto.hpp"
#include "io/temp_file.hpp"

namespace xendump::io {

class SealedTempFile {
public:
    static constexpr size_t kBlock = 4096;

    // `what` says what the file is for, in errors ("the page digests").
    explicit SealedTempFile(const std::string& what);
    ~SealedTempFile();
    SealedTempFile(const SealedTempFile&) = delete;
    SealedTempFile& operator=(const SealedTempFile&) = delete;

    // Throws Error naming the directory and the offset. Bytes never written
    // read as zeros.
    void write(uint64_t offset, const void* data, size_t size);
    void read(uint64_t offset, void* out, size_t size) const;

    const std::string& dir() const noexcept { return file_.dir; }
    uint64_t size() const noexcept { return size_; }  // the end of the furthest byte written

private:
    void load(uint64_t block, uint8_t* plain) const;  // callers hold mutex_
    void store(uint64_t block, const uint8_t* plain);

    UnnamedTempFile file_;
    std::string what_;
    age::Key32 key_;
    std::vector<uint32_t> sealed_;  // per block: how many times it was sealed (0: never written)
    uint64_t size_ = 0;
    mutable std::mutex mutex_;
    mutable age::SecretBuffer plain_{kBlock};
    mutable age::Bytes cipher_;
};

}  // namespace xendump::io
