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
// (OpenSSL, age/crypto.hpp) under a fresh random 96-bit nonce stored before
// it (random nonces: no count per block in memory, which must not grow with
// the file; 2^32 seals under one key, the bound for random nonces, would be
// 16 TiB written). The block's number is sealed with its bytes, so a block
// read back from another place fails; a block of zeros on disk (never
// written: a hole) reads as zeros. On disk a block takes kSealedBlock bytes
// at kSealedBlock times its number.
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
    static constexpr size_t kSealedBlock = age::kAeadNonceSize + 8 + kBlock + age::kTagSize;

    // `what` says what the file is for, in errors ("the page digests");
    // `dir`: where (unnamed_temp_file's; empty: $TMPDIR, else /var/tmp).
    explicit SealedTempFile(const std::string& what, const std::string& dir = {});
    ~SealedTempFile();
    SealedTempFile(const SealedTempFile&) = delete;
    SealedTempFile& operator=(const SealedTempFile&) = delete;

    // Throws Error naming the directory and the offset. Bytes never written
    // read as zeros.
    void write(uint64_t offset, const void* data, size_t size);
    void read(uint64_t offset, void* out, size_t size) const;

    const std::string& dir() const noexcept { return file_.dir; }
    int fd() const noexcept { return file_.fd.get(); }  // for fstat (the blocks it takes)
    uint64_t size() const noexcept { return size_; }  // the end of the furthest byte written

private:
    // Callers hold mutex_; plain_ holds the block number, then its bytes.
    void load(uint64_t block) const;
    void store(uint64_t block);
    // Whole blocks `first`… (n <= kRunBlocks), sealed from `bytes` where they
    // lie and written with one call: a consistent live dump's image takes
    // its rounds' pages in runs, the pause's among them. CPU time to write
    // 12772 pages again in 1 MiB calls (the pause of a 1 GiB guest in the
    // simulator): a plain file 4.5 ms; sealed a block a pwrite 110 ms,
    // in runs 45 ms (the sealing itself, some 3 us a page).
    void store_run(uint64_t first, uint64_t n, const uint8_t* bytes);
    // 66 KiB of sealed blocks, on the heap only during the call (a buffer
    // kept would be memory the file's users do not expect to hold).
    static constexpr uint64_t kRunBlocks = 16;

    UnnamedTempFile file_;
    std::string what_;
    age::Key32 key_;
    uint64_t size_ = 0;
    mutable std::mutex mutex_;
    mutable age::SecretBuffer plain_{8 + kBlock};
    mutable age::Bytes sealed_;
};

}  // namespace xendump::io
