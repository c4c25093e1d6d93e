// An output that is not a file descriptor (object storage: store/
// multipart_output.hpp) under io::Sink, which keeps the position and the
// rules of its calls and hands each one down here. Offsets are the dump's.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

namespace xendump::io {

// Why an encrypted dump does not go to an ObjectOutput: its chunks are
// sealed once final, and a v1 head (or a compact file's descriptors) is
// final only at the end; the one wording of the refusal wherever it is met.
inline constexpr const char* kEncryptedNotStreamed =
    "encrypted dumps are not streamed to object storage yet: write the .age file, then upload it";

class ObjectOutput {
public:
    virtual ~ObjectOutput() = default;
    // The bytes at `at` (the stream's position; null `data`: zeros).
    virtual void put(uint64_t at, const std::byte* data, uint64_t n) = 0;
    // Bytes that rewrite() may still change (Sink::hold, Sink::reserve):
    // declared before the stream reaches them.
    virtual void hold(uint64_t offset, uint64_t n) = 0;
    virtual void rewrite(uint64_t offset, std::span<const std::byte> data) = 0;
    // Bytes ahead of the stream (Sink::write_ahead), which skip() later
    // passes over at their place.
    virtual void ahead(uint64_t offset, std::span<const std::byte> data) = 0;
    virtual void skip(uint64_t at, uint64_t n) = 0;
    // The stream ended at `size`: the object is made whole.
    virtual void finish(uint64_t size) = 0;
    virtual void cancel_on(const std::atomic<bool>* flag) = 0;
};

}  // namespace xendump::io
