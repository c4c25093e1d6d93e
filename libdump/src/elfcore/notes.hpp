// ELF note encoding as the v1 format writes it (xen-dump-core(5) "Notes"): the standard layout
// (name padded to 4 bytes) and descriptors padded with NULs so that every note
// starts 8-aligned, descsz counting the padding. For names whose header ends
// 8-aligned ("Xen", "XEN CORE", "VMCOREINFO") readers using 4- and 8-byte note
// alignment agree; "CORE" notes are only ever in the 4-aligned PT_NOTE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace xendump::elfcore {

inline constexpr uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Bytes of namesz/descsz/type plus the padded name.
uint64_t note_header_size(std::string_view name);
// descsz to record for a descriptor of `size` bytes so the next note is 8-aligned.
uint64_t note_padded_desc_size(std::string_view name, uint64_t size);
// namesz, descsz, type and the padded name.
std::vector<std::byte> note_header(std::string_view name, uint32_t type, uint64_t descsz);

class NoteBuffer {
public:
    // Appends a note; returns the offset of its descriptor inside the buffer.
    uint64_t add(std::string_view name, uint32_t type, std::span<const std::byte> desc);
    const std::vector<std::byte>& bytes() const noexcept { return buf_; }
    uint64_t size() const noexcept { return buf_.size(); }

private:
    std::vector<std::byte> buf_;
};

template <typename T>
std::span<const std::byte> bytes_of(const T& v) {
    return std::as_bytes(std::span<const T>(&v, 1));
}

}  // namespace xendump::elfcore
