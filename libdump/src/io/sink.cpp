#include "io/sink.hpp"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <vector>

#include "age/age.hpp"
#include "io/encrypting_output.hpp"
#include "io/object_output.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"
#include "xendump/writer.hpp"

namespace xendump::io {

std::string fd_name(int fd) { return fd == STDOUT_FILENO ? "standard output" : "fd " + std::to_string(fd); }

namespace {

// A write that failed; on a pipe whose reader left (`-o - | head`, a dropped
// `| ssh`) it says so rather than only "Broken pipe".
[[noreturn]] void throw_write_failed(const std::string& name, uint64_t offset) {
    throw_errno(errno == EPIPE ? "write failed: the reader went away (it closed its end of the pipe); the output is "
                                 "incomplete"
                               : "write failed",
                name, offset);
}
// Written for zero ranges that cannot be holes (pipes, sparse off).
constexpr size_t kZeroBlock = 1 << 20;
const std::byte* zero_block() {
    static const std::vector<std::byte> block(kZeroBlock);
    return block.data();
}
}  // namespace

Sink::Sink(int fd, bool seekable, bool sparse, std::string name, std::span<const age::Recipient> recipients,
           unsigned seal_threads)
    : fd_(fd), seekable_(seekable), name_(std::move(name)) {
    if (!recipients.empty()) {
        sparse = false;
        // A file's sealed chunks are written at their places by the threads
        // that seal them, or by the caller of put() (runs sealed ahead):
        // emit() is safe on any thread (it changes nothing of the Sink when
        // not writing the stream); the room is asked before, here.
        enc_ = std::make_unique<EncryptingOutput>(
            recipients,
            [this](uint64_t at, std::span<const uint8_t> bytes) {
                iovec v{const_cast<uint8_t*>(bytes.data()), bytes.size()};
                emit(at, std::span<const iovec>(&v, 1), false);
                if (room_) {  // on disk now: counted by the file's blocks
                    std::lock_guard lock(room_mutex_);
                    room_unwritten_ -= std::min<uint64_t>(room_unwritten_, bytes.size());
                }
            },
            name_, seal_threads,
            seekable ? EncryptingOutput::Placing::positional : EncryptingOutput::Placing::in_order,
            [this](uint64_t n, uint64_t at) { make_room(n, at, true); });
    }
    init(sparse);
    if (enc_) enc_->begin();
}

Sink::Sink(ObjectOutput& object, std::string name) : fd_(-1), seekable_(true), name_(std::move(name)), obj_(&object) {}

Sink::~Sink() = default;

void Sink::cancel_on(const std::atomic<bool>* flag) {
    cancel_ = flag;
    if (obj_) obj_->cancel_on(flag);
}

uint64_t Sink::disk_pos() const noexcept { return enc_ ? enc_->file_offset(pos_) : pos_; }

uint64_t Sink::file_size() const noexcept { return enc_ ? enc_->file_size(pos_) : pos_; }

void Sink::init(bool sparse) {
    if (!seekable_) {
        // A pipe's default 64 KiB buffer costs a wake-up of the reader every
        // 16 pages; the largest size an unprivileged process may set (1 MiB
        // by default) cuts the context switches 16-fold. Advice only.
        struct stat st {};
        if (::fstat(fd_, &st) == 0 && S_ISFIFO(st.st_mode)) {
            int max = 1 << 20;
            if (FILE* f = std::fopen("/proc/sys/fs/pipe-max-size", "r")) {
                if (std::fscanf(f, "%d", &max) != 1) max = 1 << 20;
                std::fclose(f);
            }
            ::fcntl(fd_, F_SETPIPE_SZ, std::min(max, 4 << 20));
        }
        return;
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw_errno("cannot stat output", name_);
    regular_ = S_ISREG(st.st_mode);
    // An encrypted file is truncated too: no byte of an earlier content stays.
    if ((sparse || enc_) && regular_ && ::ftruncate(fd_, 0) != 0) throw_errno("cannot truncate output", name_);
    holes_ = sparse && regular_;
}

void Sink::ask_room(RoomFn f, uint64_t planned) {
    if (!f || !regular_ || !seekable_) return;
    room_ = std::move(f);
    room_planned_ = enc_ && planned ? enc_->file_size(planned) : planned;
    room_bound_ = room_granted_ = 0;
    room_asked_ = false;
    make_room(0);
}

EncryptingOutput* Sink::sealer_ahead() const noexcept { return enc_ && seekable_ ? enc_.get() : nullptr; }

void Sink::make_room(uint64_t n) {
    if (room_) make_room(n, disk_pos());
}

void Sink::make_room(uint64_t n, uint64_t at, bool unwritten) {
    if (!room_) return;
    std::lock_guard lock(room_mutex_);
    if (room_asked_ && room_bound_ <= room_granted_ && room_granted_ - room_bound_ >= n) {
        room_bound_ += n;
        if (unwritten) room_unwritten_ += n;
        return;
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw_errno("cannot stat output", name_);
    const uint64_t occupied = static_cast<uint64_t>(st.st_blocks) * 512;
    if (!room_asked_ || room_granted_ < occupied || room_granted_ - occupied < n) {
        // What is still to come: up to the planned end (and a few blocks
        // more for the filesystem's rounding), else a step at a time.
        constexpr uint64_t kSlack = 64 << 10;
        const uint64_t rest = room_planned_ > at ? room_planned_ - at + kSlack : kSlack;
        const uint64_t step = std::max(n, room_planned_ ? std::min(kRoomStep, rest) : kRoomStep);
        const uint64_t needed = occupied + step;
        const uint64_t wanted = room_planned_ ? std::max(needed, occupied + rest) : needed;
        const uint64_t granted = room_(occupied, needed, wanted);
        if (granted < needed)
            throw Error("no room on disk to go on: the file occupies " + std::to_string(occupied) +
                            " bytes and needs " + std::to_string(needed) + ", " + std::to_string(granted) +
                            " granted",
                        name_, at);
        room_granted_ = granted;
        room_asked_ = true;
    }
    // The blocks seen, and the bytes other threads are writing meanwhile.
    room_bound_ = occupied + room_unwritten_ + n;
    if (unwritten) room_unwritten_ += n;
}

void Sink::write_at(uint64_t offset, std::span<const std::byte> data) {
    if (!seekable_) throw Error("internal error: rewriting a stream that cannot seek", name_, offset);
    if (offset > pos_ || data.size() > pos_ - offset)
        throw Error("internal error: rewriting bytes not written yet", name_, offset);
    if (enc_) {
        enc_->rewrite(offset, data);
        return;
    }
    if (obj_) return obj_->rewrite(offset, data);
    make_room(data.size());  // what was a hole takes blocks now
    const size_t done = util::pwrite_full(fd_, data.data(), data.size(), offset);
    if (done < data.size()) throw_errno("cannot rewrite the head of the file", name_, offset + done);
}

void Sink::rewrite_ahead(uint64_t offset, std::span<const std::byte> data) {
    if (!seekable_ || enc_) throw Error("internal error: rewriting bytes ahead of an encrypted or streamed output", name_, offset);
    if (offset < ahead_begin_ || offset > ahead_end_ || data.size() > ahead_end_ - offset)
        throw Error("internal error: rewriting bytes not written ahead", name_, offset);
    if (obj_) return obj_->rewrite(offset, data);
    const size_t done = util::pwrite_full(fd_, data.data(), data.size(), offset);
    if (done < data.size()) throw_write_failed(name_, offset + done);
}

void Sink::write_ahead(uint64_t offset, std::span<const std::byte> data) {
    if (!seekable_) throw Error("internal error: writing ahead in a stream that cannot seek", name_, offset);
    if (offset < pos_) throw Error("internal error: writing ahead behind the position", name_, offset);
    if (data.empty()) return;
    // One stretch ahead at a time, written front to back.
    if (ahead_end_ > ahead_begin_ && offset != ahead_end_)
        throw Error("internal error: writes ahead out of order", name_, offset);
    if (enc_) {
        enc_->put(offset, data.data(), data.size());
    } else if (obj_) {
        obj_->ahead(offset, data);
    } else {
        make_room(data.size());
        const size_t done = util::pwrite_full(fd_, data.data(), data.size(), offset);
        if (done < data.size()) throw_write_failed(name_, offset + done);
    }
    if (ahead_end_ == ahead_begin_) ahead_begin_ = offset;
    ahead_end_ = offset + data.size();
}

void Sink::skip_written(uint64_t n) {
    if (n == 0) return;
    if (pos_ != ahead_begin_ || n > ahead_end_ - ahead_begin_)
        throw Error("internal error: skipping bytes not written ahead", name_, pos_);
    if (obj_) obj_->skip(pos_, n);
    pos_ += n;
    ahead_begin_ = pos_;
    write_behind();
}

void Sink::write(std::span<const std::byte> data) {
    iovec iov{const_cast<std::byte*>(data.data()), data.size()};
    writev(std::span<const iovec>(&iov, 1));
}

void Sink::writev(std::span<const iovec> iov) {
    uint64_t total = 0;
    for (const iovec& v : iov) total += v.iov_len;
    if (enc_) {
        enc_->put(pos_, iov);  // sealed from the buffers where they lie
        pos_ += total;
        write_behind();
    } else if (obj_) {
        for (const iovec& v : iov) {
            obj_->put(pos_, static_cast<const std::byte*>(v.iov_base), v.iov_len);
            pos_ += v.iov_len;
        }
        write_behind();
    } else {
        make_room(total);
        emit(pos_, iov, true);
    }
}

void Sink::emit(uint64_t at, std::span<const iovec> iov_in, bool stream) {
    if (enc_ && !seekable_) {
        // A stream: the head and the chunks come in order (nothing is rewritten).
        if (at != stream_end_)
            throw Error("internal error: an encrypted stream's chunks out of order", name_, at);
    }
    std::vector<iovec> iov(iov_in.begin(), iov_in.end());
    size_t i = 0;
    while (i < iov.size()) {
        if (iov[i].iov_len == 0) {
            ++i;
            continue;
        }
        // Also after a signal cut a blocked write short (EINTR or a partial count).
        const auto cancelled = [this, &at] {
            if (cancel_ && cancel_->load()) throw Error("cancelled", name_, at);
        };
        cancelled();
        const int cnt = static_cast<int>(std::min<size_t>(iov.size() - i, IOV_MAX));
        const ssize_t n = util::retry_eintr(
            [&] {
                return seekable_ ? ::pwritev(fd_, &iov[i], cnt, static_cast<off_t>(at)) : ::writev(fd_, &iov[i], cnt);
            },
            cancelled);
        if (n < 0) throw_write_failed(name_, at);
        if (n == 0) throw Error("write returned 0", name_, at);
        at += static_cast<uint64_t>(n);
        if (!seekable_) stream_end_ += static_cast<uint64_t>(n);
        if (stream) {  // what did go in counts, also when the rest fails
            pos_ = at;
            write_behind();
        }
        auto left = static_cast<size_t>(n);
        while (i < iov.size() && left >= iov[i].iov_len) left -= iov[i++].iov_len;
        if (left > 0) {
            iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + left;
            iov[i].iov_len -= left;
        }
    }
}

namespace {
// sync_file_range on a file that cannot do it: write-behind is only advice.
bool unsupported(int e) { return e == EINVAL || e == ENOSYS || e == ESPIPE || e == EOPNOTSUPP; }
}  // namespace

void Sink::write_behind() {
    // Every move of the position comes here: it must not have run over bytes written ahead.
    if (ahead_end_ > ahead_begin_ && pos_ > ahead_begin_)
        throw Error("internal error: wrote over bytes written ahead", name_, ahead_begin_);
    // Encrypted: counted in the file's offsets, where the position's chunk lies.
    const uint64_t at = disk_pos();
    if (!regular_ || !seekable_ || at < started_ || at - started_ < kWriteBehindWindow) return;
    // A filesystem that refuses these calls loses only speed. A write error
    // they report must not be lost: the kernel reports it once per open
    // file, so the final fsync would no longer see it.
    const uint64_t end = at - at % kWriteBehindWindow;
    if (::sync_file_range(fd_, static_cast<off_t>(started_), static_cast<off_t>(end - started_),
                          SYNC_FILE_RANGE_WRITE) != 0 &&
        !unsupported(errno))
        throw_write_failed(name_, started_);
    started_ = end;
    if (started_ - flushed_ <= kWriteBehindDepth * kWriteBehindWindow) return;
    const uint64_t done = started_ - kWriteBehindDepth * kWriteBehindWindow;
    if (::sync_file_range(fd_, static_cast<off_t>(flushed_), static_cast<off_t>(done - flushed_),
                          SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER) != 0) {
        if (!unsupported(errno)) throw_write_failed(name_, flushed_);
        return;  // not known to be on disk: neither read back nor dropped
    }
    if (before_drop_) before_drop_(flushed_, done - flushed_);
    ::posix_fadvise(fd_, static_cast<off_t>(flushed_), static_cast<off_t>(done - flushed_), POSIX_FADV_DONTNEED);
    flushed_ = done;
}

void Sink::reserve(uint64_t n) {
    if (obj_) {
        obj_->hold(pos_, n);
        return zeros(n);
    }
    if (!enc_) return zeros(n);
    enc_->reserve(pos_, n);
    pos_ += n;
    write_behind();
}

void Sink::hold(uint64_t offset, uint64_t n) {
    if (enc_) enc_->hold(offset, n);
    if (obj_) obj_->hold(offset, n);
}

void Sink::zeros(uint64_t n) {
    if (obj_) {
        obj_->put(pos_, nullptr, n);
        pos_ += n;
        write_behind();
        return;
    }
    if (enc_) {
        enc_->put(pos_, nullptr, n);
        pos_ += n;
        write_behind();
        return;
    }
    if (holes_) {
        pos_ += n;
        write_behind();
        return;
    }
    while (n > 0) {
        size_t part = static_cast<size_t>(std::min<uint64_t>(n, kZeroBlock));
        write(std::span<const std::byte>(zero_block(), part));
        n -= part;
    }
}

bool Sink::copy_from(int src_fd, uint64_t src_off, uint64_t n) {
    if (!seekable_ || enc_ || obj_) return false;  // encrypted: the caller writes, through the chunks
    make_room(n);
    uint64_t done = 0;
    while (done < n) {
        const ssize_t r = util::retry_eintr([&] {
            loff_t in = static_cast<loff_t>(src_off + done);
            loff_t out = static_cast<loff_t>(pos_ + done);
            return ::copy_file_range(src_fd, &in, fd_, &out, n - done, 0);
        });
        if (r <= 0) {
            if (done == 0 && (r == 0 || errno == EXDEV || errno == ENOSYS || errno == EINVAL ||
                              errno == EOPNOTSUPP || errno == EBADF))
                return false;
            if (r == 0) throw Error("copy_file_range: source ended early", name_, pos_ + done);
            throw_errno("copy_file_range failed", name_, pos_ + done);
        }
        done += static_cast<uint64_t>(r);
    }
    pos_ += n;
    write_behind();
    return true;
}

void Sink::finish() {
    if (obj_) return obj_->finish(pos_);
    if (enc_) {
        enc_->finish(pos_);
        return;
    }
    if (!holes_) return;
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw_errno("cannot stat output", name_);
    if (static_cast<uint64_t>(st.st_size) < pos_ && ::ftruncate(fd_, static_cast<off_t>(pos_)) != 0)
        throw_errno("cannot set file size", name_, pos_);
}

}  // namespace xendump::io
