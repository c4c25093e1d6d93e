// ELF note iteration over bytes read from a dump (xen-dump-core(5) "Notes"): namesz, descsz,
// type, name padded to 4, descriptor padded to 4. Parsing can fail; the
// failure is returned as a Finding so callers choose strict or lenient.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reader/dump_file.hpp"
#include "xendump/reader.hpp"

namespace xendump::reader {

struct Note {
    std::string name;              // without the terminating NUL
    uint32_t type = 0;
    uint64_t offset = 0;           // file offset of the note header
    uint64_t desc_offset = 0;      // file offset of the descriptor
    uint64_t end_offset = 0;       // file offset just past the padded descriptor
    uint64_t desc_size = 0;        // descsz (also when the descriptor is left unread)
    std::vector<std::byte> desc;   // descsz bytes
};

struct NoteList {
    std::vector<Note> notes;      // the notes parsed before any error
    std::optional<Finding> error;  // "notes-parse" when the bytes do not end exactly after a note

    const Note* find(std::string_view name, uint32_t type) const;
};

// `bytes` were read at file offset `file_offset`; `structure` names them in
// messages ("note segment (program header [0])"). More than kMaxNotes notes
// end the parse with a Finding: a segment of empty 12-byte notes would
// otherwise cost several times its size in Note objects.
inline constexpr size_t kMaxNotes = 65536;
NoteList parse_notes(std::span<const std::byte> bytes, uint64_t file_offset, const std::string& structure);

// What the caller does with a note's descriptor (name without its NUL,
// type). A number is the largest descriptor it reads: 0 leaves it unread
// (Note::desc empty) whatever its size; a note whose descsz is larger than a
// non-zero limit is a parse error. unread_up_to(most) leaves it unread too,
// but bounds it as a limit does: a descriptor that grows with the guest
// (NT_XEN_DIGEST: 16 bytes a 256-page chunk) is read where it lies, in
// windows, by whoever uses it (reader::DigestTable).
struct DescriptorRule {
    uint64_t most = 0;  // larger is a parse error (0: no bound)
    bool read = false;  // Note::desc holds the descriptor
    DescriptorRule(uint64_t limit) : most(limit), read(limit != 0) {}  // NOLINT: a plain limit reads
    static DescriptorRule unread_up_to(uint64_t most) {
        DescriptorRule r(most);
        r.read = false;
        return r;
    }
};
using DescriptorLimit = std::function<DescriptorRule(std::string_view name, uint32_t type)>;

// The notes of [offset, offset + size) read note by note from the file, so a
// large note nobody wants (the trailer's padding) costs nothing. The file is
// untrusted: more than `max_notes` notes, a name longer than kMaxNoteName or
// a descriptor over its limit end the parse with a Finding.
inline constexpr uint32_t kMaxNoteName = 64;
NoteList parse_notes_in_file(const DumpFile& file, uint64_t offset, uint64_t size, const std::string& structure,
                             const DescriptorLimit& limit, size_t max_notes);

}  // namespace xendump::reader
