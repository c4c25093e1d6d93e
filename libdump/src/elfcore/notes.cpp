#include "elfcore/notes.hpp"

#include <cstring>

#include "xendump/error.hpp"

namespace xendump::elfcore {

uint64_t note_header_size(std::string_view name) { return 12 + align_up(name.size() + 1, 4); }

uint64_t note_padded_desc_size(std::string_view name, uint64_t size) {
    return align_up(note_header_size(name) + size, 8) - note_header_size(name);
}

std::vector<std::byte> note_header(std::string_view name, uint32_t type, uint64_t descsz) {
    if (descsz > UINT32_MAX) throw Error("note descriptor too large (" + std::to_string(descsz) + " bytes)");
    std::vector<std::byte> out(note_header_size(name));
    const uint32_t words[3] = {static_cast<uint32_t>(name.size() + 1), static_cast<uint32_t>(descsz), type};
    std::memcpy(out.data(), words, sizeof words);
    std::memcpy(out.data() + 12, name.data(), name.size());
    return out;
}

uint64_t NoteBuffer::add(std::string_view name, uint32_t type, std::span<const std::byte> desc) {
    const uint64_t descsz = note_padded_desc_size(name, desc.size());
    auto head = note_header(name, type, descsz);
    buf_.insert(buf_.end(), head.begin(), head.end());
    const uint64_t desc_off = buf_.size();
    buf_.insert(buf_.end(), desc.begin(), desc.end());
    buf_.resize(desc_off + descsz);
    return desc_off;
}

}  // namespace xendump::elfcore
