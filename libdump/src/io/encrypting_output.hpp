// The age file behind an encrypting io::Sink (issue 33; xen-dump-core(5),
// "Encrypted dumps"): the Sink's offsets are the plaintext's, the file on
// disk is the age file (age/age.hpp) whose payload is exactly that
// plaintext. The plaintext never reaches the file: each 64 KiB chunk is
// sealed once all of its bytes are final (a chunk sealed twice would reuse
// its nonce) and written at its place (Encryptor::chunk_offset); the head
// goes at offset 0 first. A chunk whose bytes come from several calls is
// kept in memory until then.
//
// Final bytes: those written by put(); a range given to reserve() is final
// once rewrite() has filled it (the kdump head, bitmaps and descriptors
// written after the pages), a range given to hold() only at finish() (the v1
// head's notes and kernel program header, patched after the pass when the
// guest kernel is found). A chunk past which nothing is written yet may be
// the last one and waits too. So what is held in memory is: the chunks
// written in part (the stream's current chunk, the edges of a range written
// ahead), the chunks of a reserved range filled in part (a kdump file's
// descriptors are filled in order, a batch at a time, so a few at once; a
// PV guest whose machine frames do not rise with its pfns fills them out
// of order, up to its whole descriptor table) and the held ranges.
//
// Rewriting bytes outside a reserved or held range, or in a chunk already
// sealed, is an internal Error: with encryption an encoder's placeholders
// must be declared.
//
// Sealing (ChaCha20-Poly1305 over every byte) costs as much as the rest of
// a v1 dump's writing, and copying every byte on the way cost as much again
// (issue 33: BENCHMARKS.md, #16). So a chunk whose 64 KiB come whole
// from one put() is sealed from the caller's bytes where they lie (a batch's
// pages: nothing is copied), and only the others (the edges of a put, the
// placeholders) are assembled in memory. What each call makes final is
// sealed before the call returns (the caller's bytes are only borrowed): on
// a pool of `threads` threads and the caller's, runs of up to kChunksPerJob
// consecutive chunks at a time, each run written at once: by the thread that
// sealed it at its place when the output is positional (a file: no write is
// ordered behind another), else by the caller in the order the chunks were
// made final (a pipe: the head, then chunk 0, 1, …). Which chunks are
// sealed, their bytes and where they go do not depend on the number of
// threads; memory grows by the runs being sealed (kSlotsPerThread for each
// thread, 256 KiB each), not with the file.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "age/age.hpp"

namespace xendump::io {

class EncryptingOutput {
public:
    // Writes ciphertext at a file offset; for an output that cannot seek the
    // offsets follow each other (the head, then chunk 0, 1, …).
    // Positional: `emit` may be called from the sealing threads, at once and
    // in any order (each call at its own offset); else only from the
    // caller's thread, the offsets following each other.
    using Emit = std::function<void(uint64_t offset, std::span<const uint8_t> bytes)>;
    enum class Placing { in_order, positional };
    // Told on the caller's thread before `n` bytes are emitted (the Sink's room on disk).
    using Room = std::function<void(uint64_t n)>;
    // `threads`: how many threads seal (1: the caller's only; clamped to kMaxWriteThreads).
    EncryptingOutput(std::span<const age::Recipient> recipients, Emit emit, std::string name, unsigned threads = 1,
                     Placing placing = Placing::in_order, Room room = {});
    ~EncryptingOutput();
    EncryptingOutput(const EncryptingOutput&) = delete;
    EncryptingOutput& operator=(const EncryptingOutput&) = delete;

    void begin();  // emits the head
    // Final bytes at `offset` (nullptr: zeros), each byte put at most once.
    void put(uint64_t offset, const std::byte* data, uint64_t n);
    // The same for the bytes of `iov` one after the other (an iov_base of nullptr: zeros).
    void put(uint64_t offset, std::span<const iovec> iov);
    // Zeros at `offset` that rewrite() replaces later (those not replaced stay zeros).
    void reserve(uint64_t offset, uint64_t n);
    // Bytes that may be rewritten until finish(); before they are put.
    void hold(uint64_t offset, uint64_t n);
    void rewrite(uint64_t offset, std::span<const std::byte> data);
    // Seals every chunk not sealed yet, the one holding byte `size` - 1 as
    // the last. Nothing may be put past `size`.
    void finish(uint64_t size);

    // Where plaintext offset `plain` lies in the file (its chunk's place
    // plus the offset in the chunk), and the file's size for `plain` bytes.
    uint64_t file_offset(uint64_t plain) const noexcept;
    uint64_t file_size(uint64_t plain) const noexcept { return enc_.file_size(plain); }
    uint64_t head_size() const noexcept { return enc_.payload_offset(); }
    // Chunks held in memory now, and the most at once (memory: 64 KiB each).
    size_t pending_chunks() const noexcept { return pending_.size(); }
    size_t peak_pending_chunks() const noexcept { return peak_; }
    // Chunks being sealed or sealed and waiting to be written, at most.
    size_t seal_slots() const noexcept;
    static constexpr size_t kChunksPerJob = 4;    // a run sealed and written at once: 256 KiB
    static constexpr size_t kSlotsPerThread = 2;  // runs per sealing thread (the caller's counts)
    // Chunks made final by one call sealed at a time (their plaintext borrowed or kept meanwhile).
    static constexpr size_t kWindowChunks = 128;

    class SealPool;

private:
    struct Pending {
        age::SecretBuffer plain{age::kChunkSize};
        uint64_t final_bytes = 0;
    };
    Pending& pending(uint64_t index, uint64_t at);
    bool sealed(uint64_t index) const { return index < sealed_.size() && sealed_[index]; }
    bool held(uint64_t index) const;
    void check_held(uint64_t b, uint64_t e) const;
    void try_seal(uint64_t index);
    // Where a queued chunk's plaintext lies: from `iov` on, past `skip` bytes
    // of its first element; `iov` null: the one piece `own` (a chunk kept in
    // retired_, or zeros when its base is null).
    struct Plain {
        const iovec* iov = nullptr;
        uint64_t skip = 0;
        iovec own{};
    };
    // Chunk `index` (`size` bytes) is final: seal_queued() seals it.
    void queue(uint64_t index, const Plain& plain, uint64_t size, bool last);
    void seal_queued();
    void grow_extent(uint64_t end);

    age::Encryptor enc_;
    Emit emit_;
    Room room_;
    std::string name_;
    std::map<uint64_t, Pending> pending_;
    std::vector<age::SecretBuffer> retired_;            // plaintext of queued chunks, kept until sealed
    std::map<uint64_t, uint64_t> reserved_;             // begin -> end, disjoint, not yet filled
    std::vector<std::pair<uint64_t, uint64_t>> holds_;  // [begin, end) until finish()
    std::vector<bool> sealed_;
    uint64_t extent_ = 0;  // the end of the furthest byte put or reserved
    size_t peak_ = 0;
    bool finished_ = false;
    std::unique_ptr<SealPool> pool_;
};

}  // namespace xendump::io
