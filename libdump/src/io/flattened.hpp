// makedumpfile's flattened format (makedumpfile -F writes it, makedumpfile
// -R rearranges it; xen-dump-core(5), "The flattened stream"): a file
// carried front to back through a pipe. A 4096-byte header (the signature
// "makedumpfile" in a 16-byte field, then the type and the version), then
// records, each a 16-byte head {offset, size} and `size` bytes that go at
// `offset` of the file carried, then an end record whose offset and size
// are both -1. Every number is a signed 64-bit big-endian integer, whatever
// the machine (makedumpfile.h, struct makedumpfile_header and
// makedumpfile_data_header). Records come in any order and may overlap:
// makedumpfile -R writes each where it says, so a later one wins; what no
// record covers is a hole (zeros). makedumpfile -R stops at a record whose
// offset is negative or whose size is not positive, and fails unless it is
// the end record: an empty record is not a record.
//
// Here: the types of the header and the record head, their checks for an
// untrusted stream (each failure an Error naming the stream and the offset
// in it), and FlattenedOutput, the writer.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/object_output.hpp"

namespace xendump::age {
class Recipient;
}

namespace xendump::io {

class Sink;

namespace flat {

inline constexpr uint64_t kHeaderSize = 4096;                   // MAX_SIZE_MDF_HEADER
inline constexpr std::string_view kSignature = "makedumpfile";  // MAKEDUMPFILE_SIGNATURE, NUL-padded to 16 bytes
inline constexpr int64_t kType = 1;                             // TYPE_FLAT_HEADER
inline constexpr int64_t kVersion = 1;                          // VERSION_FLAT_HEADER
inline constexpr int64_t kEndFlag = -1;                         // END_FLAG_FLAT_HEADER: the end record's offset and size
// The largest file a stream may carry here (offset + size of every
// record): 1 PiB, far above any guest, far below what overflows an off_t.
inline constexpr uint64_t kMaxCarriedSize = uint64_t{1} << 50;

// A signed 64-bit number stored big-endian.
struct BigEndian64 {
    std::array<std::byte, 8> bytes{};

    static BigEndian64 of(int64_t v) noexcept;
    int64_t value() const noexcept;
};

// The first 32 bytes of the header (struct makedumpfile_header); zeros
// follow up to kHeaderSize.
struct Header {
    std::array<char, 16> signature{};  // "makedumpfile", NUL-padded
    BigEndian64 type;
    BigEndian64 version;

    // The header makedumpfile -F writes: the signature, kType, kVersion, zeros.
    static std::array<std::byte, kHeaderSize> ours();
};
static_assert(sizeof(Header) == 32);

// The head of a record (struct makedumpfile_data_header).
struct RecordHead {
    BigEndian64 offset;
    BigEndian64 size;

    static RecordHead of(uint64_t offset, uint64_t size) noexcept;
    static RecordHead end() noexcept;  // offset = size = -1
};
static_assert(sizeof(RecordHead) == 16);

// A record of a stream, checked: `size` bytes (1 or more) for [offset,
// offset + size) of the carried file, which ends below kMaxCarriedSize;
// its head lies at `at` in the stream, its data right after.
struct Record {
    uint64_t at = 0;
    uint64_t offset = 0;
    uint64_t size = 0;
    uint64_t data_at() const noexcept { return at + sizeof(RecordHead); }
    uint64_t end() const noexcept { return offset + size; }
};

// Whether `head` (a file's first bytes) starts with the header's signature
// field ("makedumpfile" and four NULs).
bool has_signature(std::span<const std::byte> head);

// Checks the header, of which `got` holds what the stream had (fewer than
// kHeaderSize bytes: it ended early). Throws Error naming `name` and the
// offset of what is wrong. The version is not checked (makedumpfile
// -R does not check it either).
void check_header(std::span<const std::byte> got, const std::string& name);

// The record whose head the stream holds at `at` (`got`: what it had there,
// up to 16 bytes, fewer when it ended); nullopt for the end record. Throws
// Error naming `name` and `at` for a truncated head, a negative offset, a
// size that is not positive, a record past kMaxCarriedSize.
std::optional<Record> parse_record(uint64_t at, std::span<const std::byte> got, const std::string& name);

// The stream ended after `got` of `r`'s bytes.
[[noreturn]] void throw_truncated_data(const Record& r, uint64_t got, const std::string& name);
// Bytes follow the end record at `end_at`: a stream ends there.
[[noreturn]] void throw_after_end(uint64_t end_at, const std::string& name);

// Up to out.size() bytes of a stream, fewer only at its end (0: ended);
// throws Error when a read fails.
using ReadSome = std::function<size_t(std::span<std::byte> out)>;

struct Rearranged {
    uint64_t records = 0;       // before the end record
    uint64_t size = 0;          // of the carried file (the furthest record's end)
    uint64_t stream_bytes = 0;  // read, the end record included
};

// What makedumpfile -R does: reads the stream `read` (named `name` in
// errors) front to back and writes each record's bytes at its offset of
// `out_fd` (a new, empty regular file, named `out_name`), so a later record
// wins and what no record covers stays a hole; checks every head
// (parse_record), and that nothing follows the end record. Memory: a 1 MiB
// buffer. `cancel` set: Error("cancelled"); `progress` sees the stream's
// bytes read so far.
Rearranged rearrange(const ReadSome& read, const std::string& name, int out_fd, const std::string& out_name,
                     const std::atomic<bool>* cancel = nullptr,
                     const std::function<void(uint64_t stream_bytes)>& progress = {});

}  // namespace flat

// An output (under io::Sink, which keeps the offsets and the rules of its
// calls) written as a flattened stream onto a file descriptor that need not
// seek: what a seekable output would place at an offset becomes a record
// for that offset, and a rewrite of bytes already written (Sink::write_at)
// a later record, so a compact file, whose head is written last, goes
// through a pipe. makedumpfile -R, xen-dump-convert and the readers
// (reader/flattened_image.hpp) make the file of it.
//
// Records are at most kRecordBytes: the stream's bytes are gathered into
// one buffer until it is full or a write goes elsewhere, and so are
// rewrites of consecutive bytes (a compact file's descriptors, batch after
// batch) into another: memory is those two buffers whatever the dump.
// Zeros longer than kZeroRun are not written (a hole of the carried file,
// as makedumpfile -F leaves them); the end of the carried file is always
// written, so that its size is right.
class FlattenedOutput final : public ObjectOutput {
public:
    static constexpr uint64_t kRecordBytes = 4u << 20;
    static constexpr uint64_t kZeroRun = 4096;

    // Writes the header at once onto `fd`, front to back (pwrite from 0 when
    // `seekable`, else write), through an io::Sink: with `recipients`, the
    // stream is the age file of the flattened bytes.
    FlattenedOutput(int fd, bool seekable, std::string name, std::span<const age::Recipient> recipients = {},
                    unsigned seal_threads = 1);
    ~FlattenedOutput() override;
    FlattenedOutput(const FlattenedOutput&) = delete;
    FlattenedOutput& operator=(const FlattenedOutput&) = delete;

    void put(uint64_t at, const std::byte* data, uint64_t n) override;
    void hold(uint64_t, uint64_t) override {}  // any byte may be rewritten: a later record
    void rewrite(uint64_t offset, std::span<const std::byte> data) override;
    void ahead(uint64_t offset, std::span<const std::byte> data) override;
    void skip(uint64_t, uint64_t) override {}  // written already, by ahead()
    // Writes what is gathered, the carried file's last byte if no record
    // reached it (a trailing hole), the end record, and ends the stream.
    void finish(uint64_t size) override;
    void cancel_on(const std::atomic<bool>* flag) override;

    // The bytes of the stream written so far (encrypted: the age file's).
    uint64_t stream_size() const noexcept;
    uint64_t records() const noexcept { return records_; }

private:
    // Consecutive bytes waiting to become one record.
    struct Gathered {
        uint64_t offset = 0;
        std::vector<std::byte> bytes;
        uint64_t end() const noexcept { return offset + bytes.size(); }
    };
    void gather(Gathered& g, uint64_t offset, const std::byte* data, uint64_t n);
    void flush(Gathered& g);
    void record(uint64_t offset, std::span<const std::byte> data);  // one record (or more, when larger)

    std::unique_ptr<Sink> out_;
    std::string name_;
    Gathered stream_, rewrites_;
    uint64_t written_end_ = 0;  // the end of the furthest record
    uint64_t records_ = 0;
};

}  // namespace xendump::io
