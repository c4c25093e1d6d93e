#include "reader/notes.hpp"

#include <cstring>

#include "reader/checked.hpp"
#include "xendump/error.hpp"

namespace xendump::reader {

namespace {

uint64_t pad4(uint64_t v) { return (v + 3) & ~uint64_t{3}; }

uint32_t load_u32(std::span<const std::byte> b, size_t at) {
    uint32_t v;
    std::memcpy(&v, b.data() + at, sizeof v);
    return v;
}

}  // namespace

const Note* NoteList::find(std::string_view name, uint32_t type) const {
    for (const auto& n : notes)
        if (n.type == type && n.name == name) return &n;
    return nullptr;
}

namespace {

// The one note walker: `fetch(pos, len, out)` puts the `len` bytes at
// offset `pos` of the notes into `out`. Without a `limit` every descriptor
// is fetched; with one, see DescriptorLimit (bounds are checked either way).
struct WalkLimits {
    const DescriptorLimit* desc = nullptr;
    size_t max_notes = SIZE_MAX;
    uint32_t max_name = UINT32_MAX;
};

template <class Fetch>
NoteList walk_notes(uint64_t end, uint64_t file_offset, const std::string& structure, Fetch&& fetch,
                    const WalkLimits& limits) {
    NoteList out;
    uint64_t pos = 0;
    auto fail = [&](uint64_t at, const std::string& msg) {
        out.error = Finding{"notes-parse", structure, file_offset + at, msg};
    };
    std::vector<std::byte> buf;
    while (pos < end) {
        if (end - pos < 12) {
            fail(pos, "note header at " + hex(file_offset + pos) + " needs 12 bytes but only " +
                          std::to_string(end - pos) + " remain before the end of the notes (" +
                          hex(file_offset + end) + ")");
            return out;
        }
        fetch(pos, 12, buf);
        uint32_t namesz = load_u32(buf, 0);
        uint32_t descsz = load_u32(buf, 4);
        uint32_t type = load_u32(buf, 8);
        // Sizes come from the file: 64-bit sums of 32-bit values cannot overflow.
        uint64_t name_at = pos + 12;
        uint64_t desc_at = name_at + pad4(namesz);
        uint64_t next = desc_at + pad4(descsz);
        if (desc_at > end || end - desc_at < descsz) {
            fail(pos, "note at " + hex(file_offset + pos) + " (namesz " + std::to_string(namesz) + ", descsz " +
                          std::to_string(descsz) + ") runs past the end of the notes (" +
                          hex(file_offset + end) + ")");
            return out;
        }
        if (out.notes.size() >= limits.max_notes) {
            fail(pos, "more than " + std::to_string(limits.max_notes) + " notes");
            return out;
        }
        if (namesz > limits.max_name) {
            fail(pos, "note at " + hex(file_offset + pos) + " has a name of " + std::to_string(namesz) +
                          " bytes (at most " + std::to_string(limits.max_name) + ")");
            return out;
        }
        Note n;
        fetch(name_at, namesz, buf);
        const char* name_bytes = reinterpret_cast<const char*>(buf.data());
        n.name.assign(name_bytes, strnlen(name_bytes, namesz));
        n.type = type;
        n.offset = file_offset + pos;
        n.desc_offset = file_offset + desc_at;
        n.desc_size = descsz;
        const DescriptorRule rule = limits.desc ? (*limits.desc)(n.name, type) : DescriptorRule(UINT64_MAX);
        const uint64_t most = rule.most;
        if (most != 0 && descsz > most) {
            fail(pos, "note at " + hex(file_offset + pos) + " (type " + std::to_string(type) + ") has a descriptor of " +
                          std::to_string(descsz) + " bytes, more than it can hold here (" + std::to_string(most) + ")");
            return out;
        }
        if (rule.read) fetch(desc_at, descsz, n.desc);
        // The last note's descriptor padding may be cut by the end of the
        // segment only if nothing follows (pad bytes are not data).
        n.end_offset = file_offset + (next < end ? next : end);
        out.notes.push_back(std::move(n));
        pos = next;
    }
    return out;
}

}  // namespace

NoteList parse_notes(std::span<const std::byte> bytes, uint64_t file_offset, const std::string& structure) {
    auto fetch = [&](uint64_t pos, uint64_t len, std::vector<std::byte>& out) {
        out.assign(bytes.begin() + static_cast<ptrdiff_t>(pos), bytes.begin() + static_cast<ptrdiff_t>(pos + len));
    };
    return walk_notes(bytes.size(), file_offset, structure, fetch, WalkLimits{nullptr, kMaxNotes, UINT32_MAX});
}

NoteList parse_notes_in_file(const DumpFile& file, uint64_t offset, uint64_t size, const std::string& structure,
                             const DescriptorLimit& limit, size_t max_notes) {
    if (!range_inside(offset, size, file.size()))
        throw Error(structure + ": " + past_end("offset", offset, "size", size, file.size()), file.path(), offset);
    auto fetch = [&](uint64_t pos, uint64_t len, std::vector<std::byte>& out) {
        out.resize(static_cast<size_t>(len));
        file.read_exact(offset + pos, out, structure);
    };
    return walk_notes(size, offset, structure, fetch, WalkLimits{&limit, max_notes, kMaxNoteName});
}

}  // namespace xendump::reader
