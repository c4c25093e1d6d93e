// An output that is written strictly front to back: a pipe or a file. The
// same calls produce the same bytes on both; a file may leave zero ranges as
// holes (xen-dump-core(5) "Page data": holes read as zeros, so the layout does not change).
// Given recipients, the output is the age file of those bytes
// (io/encrypting_output.hpp, xen-dump-core(5) "Encrypted dumps"): offsets,
// offset() and the calls stay those of the plaintext; no holes, no
// copy_from(), and every placeholder rewritten later is declared with
// reserve() or hold().
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace xendump::age {
class Recipient;
}

namespace xendump::io {

class EncryptingOutput;
class ObjectOutput;

// Appends the `n` bytes at `p` to `iov` (for Sink::writev), as part of its
// last element when they follow it in memory: a stretch of adjacent memory
// is one element.
inline void append_adjacent(std::vector<iovec>& iov, const void* p, size_t n) {
    auto* b = static_cast<std::byte*>(const_cast<void*>(p));
    if (!iov.empty() && static_cast<std::byte*>(iov.back().iov_base) + iov.back().iov_len == b)
        iov.back().iov_len += n;
    else
        iov.push_back({b, n});
}

// How errors name an output given as a descriptor: "standard output" for
// fd 1 (xen-dumpd -o -), "fd N" otherwise.
std::string fd_name(int fd);

class Sink {
public:
    // `seekable`: positional writes (pwrite) from offset 0, no lseek. Holes are
    // used only when `sparse` and the fd is a regular file (which is then
    // truncated to 0 first so that skipped ranges read as zeros).
    // With `recipients`, the output is encrypted to them (`sparse` then has
    // no effect: an age file has no holes), its chunks sealed on
    // `seal_threads` threads (EncryptingOutput; the same bytes whatever the number).
    Sink(int fd, bool seekable, bool sparse, std::string name, std::span<const age::Recipient> recipients = {},
         unsigned seal_threads = 1);
    // Into an object (io/object_output.hpp), positional: what a file
    // takes, without holes, copy_from() or write-behind.
    Sink(ObjectOutput& object, std::string name);
    ~Sink();
    Sink(const Sink&) = delete;
    Sink& operator=(const Sink&) = delete;

    void write(std::span<const std::byte> data);
    void writev(std::span<const iovec> iov);  // several buffers, one syscall when possible
    void zeros(uint64_t n);                   // a hole when allowed, else written zeros
    // A placeholder: `n` zero bytes (as zeros()) that write_at() replaces
    // after the position has moved on; what is not replaced stays zeros.
    void reserve(uint64_t n);
    // Bytes at [offset, offset + n), written (or about to be) as usual,
    // that write_at() may still rewrite until finish(). Only an encrypted
    // output cares: it keeps their chunks until then.
    void hold(uint64_t offset, uint64_t n);
    // Moves `n` bytes from `src_fd` at `src_off` (copy_file_range); returns
    // false (nothing done) when the kernel cannot, so the caller writes instead.
    bool copy_from(int src_fd, uint64_t src_off, uint64_t n);
    void finish();                            // sets the final size after a trailing hole
    // Rewrites bytes already written, at `offset` (a seekable output only:
    // Error otherwise): what an encoder learns after the pages goes into
    // the head it wrote first. The position stays where it was. Encrypted:
    // only bytes of a reserve() not rewritten yet or of a hold() (else Error).
    void write_at(uint64_t offset, std::span<const std::byte> data);
    // Writes bytes ahead of the position, at `offset` >= offset() (a
    // seekable output only: Error otherwise): what an encoder knows the
    // place of before the stream reaches it (the v1 trailer's chunk
    // digests, a window at a time) goes there at once instead of being held.
    // The stream later passes over them with skip_written().
    void write_ahead(uint64_t offset, std::span<const std::byte> data);
    // Rewrites bytes that write_ahead() wrote (a plaintext output: Error
    // otherwise; an object takes them as ObjectOutput::rewrite): a live
    // dump's chunk digests re-done after its rounds.
    void rewrite_ahead(uint64_t offset, std::span<const std::byte> data);
    // The next `n` bytes were written by write_ahead(): the position moves
    // past them without writing.
    void skip_written(uint64_t n);

    // Regular files are written behind: every kWriteBehindWindow bytes the
    // kernel is told to start writing the window just filled, and what lies
    // more than kWriteBehindDepth windows behind is waited for and dropped
    // from the page cache. The disk then works while the next pages are
    // read, the final fsync has little left to do, and a dump does not push
    // dom0's own files out of the cache.
    static constexpr uint64_t kWriteBehindWindow = 8u << 20;
    static constexpr uint64_t kWriteBehindDepth = 8;
    // Sees each range the write-behind has waited for (written back without
    // error) just before the range is dropped from the page cache: ranges
    // follow each other from offset 0. What is never dropped (the last
    // windows) is not seen. A write error reported then throws Error.
    void before_drop(std::function<void(uint64_t offset, uint64_t size)> f) { before_drop_ = std::move(f); }

    // A write blocked on a stalled reader (a pipe nobody drains) and
    // interrupted by a signal throws Error("cancelled") when `flag` is set,
    // instead of waiting again: a cancel must not wait for the reader.
    void cancel_on(const std::atomic<bool>* flag);

    // The room the file may take on disk (WriteOptions::room, a regular
    // file only): asked now, and again before a write whose bytes could take
    // the file past the grant (counted from its allocated blocks, fstat's
    // st_blocks, and the bytes written since: holes take none). `planned` is
    // the file's planned size (0: not known), bounding `needed` and `wanted`.
    // A grant smaller than `needed` throws Error.
    using RoomFn = std::function<uint64_t(uint64_t occupied, uint64_t needed, uint64_t wanted)>;
    void ask_room(RoomFn f, uint64_t planned);

    uint64_t offset() const noexcept { return pos_; }
    // The bytes of the file written for offset() bytes: offset() unless
    // encrypted (then the age file's size; final after finish()).
    uint64_t file_size() const noexcept;
    bool encrypted() const noexcept { return enc_ != nullptr; }
    bool holes() const noexcept { return holes_; }
    bool positional() const noexcept { return seekable_; }
    // An encrypted file's chunks sealed ahead of their bytes' writev(), on
    // any thread (EncryptingOutput::seal_ahead()), when the output can: an
    // encrypted seekable file; else null.
    EncryptingOutput* sealer_ahead() const noexcept;

private:
    void init(bool sparse);
    void write_behind();
    void make_room(uint64_t n);  // before `n` more bytes are written (ask_room)
    // The same for `n` bytes at file offset `at` (an encrypted file's sealed
    // chunks, which the sealing threads may write);
    // `unwritten`: the bytes are counted as written meanwhile until the
    // EncryptingOutput's emit has written them.
    void make_room(uint64_t n, uint64_t at, bool unwritten = false);
    // Writes `iov` at file offset `at` (a seekable output; else at the end
    // of the stream), whole; `stream`: the bytes at the position (which
    // then moves past each part written, also when the rest fails).
    void emit(uint64_t at, std::span<const iovec> iov, bool stream);
    uint64_t disk_pos() const noexcept;  // where offset() lies in the file

    int fd_;
    bool seekable_;
    bool holes_ = false;
    bool regular_ = false;
    uint64_t pos_ = 0;
    uint64_t ahead_begin_ = 0, ahead_end_ = 0;  // the bytes write_ahead() wrote and skip_written() has not passed
    // Write-behind (regular files): [flushed_, started_) is being written to
    // disk; everything below flushed_ is on disk and dropped from the cache.
    uint64_t started_ = 0, flushed_ = 0;
    std::function<void(uint64_t, uint64_t)> before_drop_;
    const std::atomic<bool>* cancel_ = nullptr;
    // ask_room: at most `room_bound_` bytes are allocated now (the blocks at
    // the last look plus the bytes written since), `room_granted_` allowed.
    RoomFn room_;
    uint64_t room_planned_ = 0, room_bound_ = 0, room_granted_ = 0;
    bool room_asked_ = false;
    uint64_t room_unwritten_ = 0;  // an encrypted file's bytes given room and not written yet
    std::mutex room_mutex_;  // the room's members: chunks are sealed and written on several threads
    std::string name_;
    std::unique_ptr<EncryptingOutput> enc_;
    ObjectOutput* obj_ = nullptr;
    uint64_t stream_end_ = 0;  // an encrypted stream: the ciphertext written
};

}  // namespace xendump::io
