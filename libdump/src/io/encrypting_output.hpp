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
//
// Sealing ahead (seal_ahead(), a positional output only): a caller that
// knows bytes before it puts them (a v1 batch's pages, on the pipeline's
// worker that has just hashed them) has their whole chunks sealed there and
// then, on its own thread, while the bytes are still in the CPU's cache.
// The sealed runs wait in memory (flush_ahead()) until the put() of those
// bytes passes over them and writes them, on its thread: one thread writes
// the file, in order, as for an unencrypted dump (writers at once on one
// file wait on each other for its lock). The bytes and the places are the
// same as put() would make: only the thread and the time of the sealing
// differ.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_set>
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
    // Told before `n` bytes are emitted at file offset `at` (the Sink's room
    // on disk): on the caller's thread (of put(), reserve(), rewrite(),
    // finish()), also for what the sealing threads then write.
    using Room = std::function<void(uint64_t n, uint64_t at)>;
    // `threads`: how many threads seal (1: the caller's only; clamped to
    // kMaxWriteThreads and to the machine's CPUs).
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

    // A thread's run of chunks sealed ahead and not written yet (up to
    // kAheadChunks chunks that follow each other, written at once): kept by
    // the caller of seal_ahead(), one per thread at a time (a pipeline
    // batch's work). Its buffer is the output's, lent while the run is not
    // empty and until put() has written it: as many as runs sealed ahead
    // of put() (a pipeline's batches in flight).
    struct AheadRun {
        std::unique_ptr<uint8_t[]> sealed;
        uint64_t at = 0, bytes = 0;  // where the run goes in the file, how many bytes so far
        uint64_t next = 0;           // the chunk after the run's last
        size_t count = 0;
        std::vector<std::span<const uint8_t>> pieces;  // a chunk's plaintext
    };
    static constexpr size_t kAheadChunks = 16;  // a run sealed ahead: 1 MiB, one write
    // Sealed ahead and not written yet, at most (the rest is sealed by
    // put()): with many threads and small batches, the runs waiting for
    // put() would otherwise add as much again as the pages in flight.
    static constexpr uint64_t kAheadBudget = 32u << 20;
    // Whether seal_ahead() seals anything: a positional output.
    bool seals_ahead() const noexcept { return positional_; }
    // Any thread, at once with the others' calls (but not with finish()):
    // the bytes [offset, offset + size of `iov`) (an iov_base of nullptr:
    // zeros), which put() will be given later, the same bytes; of them the
    // chunks lying whole in [from, to) are sealed now, while what waits
    // for put() stays within kAheadBudget (a run at a time,
    // through `run`; flush_ahead() hands over what is left), and written by
    // the put() that passes over them. Returns
    // the end of the last chunk sealed (`from` when none): the `from` of
    // the next call over the same bytes. The caller promises that no
    // hold() or reserve() covers these bytes and that more bytes follow
    // them (none of their chunks is the last): put() and finish() check it
    // (an internal Error, never a chunk sealed twice). Not positional: does
    // nothing and returns `from`.
    uint64_t seal_ahead(uint64_t offset, std::span<const iovec> iov, uint64_t from, uint64_t to, AheadRun& run);
    void flush_ahead(AheadRun& run);

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
    void mark_sealed(uint64_t index);
    // Chunk `index` was sealed ahead and not put yet; take_ahead(): and is
    // then taken (put() passes over it).
    bool sealed_ahead(uint64_t index);
    // A run sealed ahead whose first chunk is `index`: written by put()
    // when it passes over that chunk.
    struct ReadyRun {
        uint64_t at = 0, bytes = 0;
        std::unique_ptr<uint8_t[]> sealed;
    };
    bool take_ahead(uint64_t index, ReadyRun& ready);

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
    bool positional_ = false;
    std::mutex ahead_mutex_;
    std::unordered_set<uint64_t> ahead_;  // chunks sealed ahead that put() has not passed over yet
    uint64_t ahead_bytes_ = 0;            // their sealed bytes not written yet (kAheadBudget)
    std::vector<std::unique_ptr<uint8_t[]>> ahead_free_;  // AheadRun buffers not lent
    std::map<uint64_t, ReadyRun> ready_;  // runs sealed ahead, not written yet, by their first chunk
    std::unique_ptr<SealPool> pool_;
};

}  // namespace xendump::io
