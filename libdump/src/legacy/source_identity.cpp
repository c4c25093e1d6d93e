#include "legacy/source_identity.hpp"

#include <elf.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <vector>

#include "legacy/hex.hpp"
#include "legacy/xc_core.hpp"
#include "stream_hash.hpp"
#include "xendump/error.hpp"

namespace xendump::legacy {
namespace {

constexpr const char* kDigestKind = "xxh3-128:";
constexpr uint64_t kReadChunk = 1 << 20;

// Hashes [offset, offset + size) of the source, a MiB at a time.
void hash_range(const ByteSource& src, uint64_t offset, uint64_t size, StreamHash& hash, const char* what) {
    std::vector<std::byte> buf(static_cast<size_t>(std::min(size, kReadChunk)));
    while (size > 0) {
        const uint64_t n = std::min<uint64_t>(size, buf.size());
        src.read(offset, std::span(buf.data(), static_cast<size_t>(n)), what);
        hash.update(buf.data(), static_cast<size_t>(n));
        offset += n;
        size -= n;
    }
}

// Header, contexts and index: everything before the pages, and never more
// than the largest header, contexts and index the counts allow.
void hash_xc_core(const ByteSource& src, StreamHash& hash) {
    XcCoreHeader h;
    src.read(0, std::as_writable_bytes(std::span(&h, 1)), "xc_core header");
    constexpr uint64_t kLargestContext = 5168, kLargestEntry = 8;
    const uint64_t most = kXcCoreHeaderSize + uint64_t{h.nr_vcpus} * kLargestContext +
                          uint64_t{h.nr_pages} * kLargestEntry + 4096;
    const uint64_t end = std::min({uint64_t{h.pages_offset}, src.size(), most});
    hash_range(src, 0, std::max(end, kXcCoreHeaderSize), hash, "xc_core header, contexts and index");
}

bool section_is_pages(const ByteSource& src, const Elf64_Shdr& strtab, uint32_t name) {
    static constexpr char kPages[] = ".xen_pages";  // with its NUL
    if (strtab.sh_type == SHT_NOBITS || name > strtab.sh_size || strtab.sh_size - name < sizeof kPages) return false;
    char got[sizeof kPages];
    src.read(strtab.sh_offset + name, std::as_writable_bytes(std::span(got)), "section name");
    return std::memcmp(got, kPages, sizeof kPages) == 0;
}

// ELF header, section headers and every section but the pages. The bytes
// hashed never exceed the file's size: sections that overlap to multiply
// the work are refused.
void hash_elf(const ByteSource& src, StreamHash& hash) {
    Elf64_Ehdr eh;
    src.read(0, std::as_writable_bytes(std::span(&eh, 1)), "ELF header");
    if (eh.e_ident[EI_CLASS] != ELFCLASS64) throw Error("not a 64-bit ELF file", src.name(), EI_CLASS);
    hash.update(&eh, sizeof eh);
    if (eh.e_shnum == 0) return;
    if (eh.e_shentsize != sizeof(Elf64_Shdr))
        throw Error("section header size " + std::to_string(eh.e_shentsize) + " is not " +
                        std::to_string(sizeof(Elf64_Shdr)),
                    src.name(), offsetof(Elf64_Ehdr, e_shentsize));
    std::vector<Elf64_Shdr> sh(eh.e_shnum);
    src.read(eh.e_shoff, std::as_writable_bytes(std::span(sh)), "section header table");
    hash.update(sh.data(), sh.size() * sizeof(Elf64_Shdr));
    const Elf64_Shdr* strtab = eh.e_shstrndx < sh.size() ? &sh[eh.e_shstrndx] : nullptr;
    uint64_t hashed = sizeof eh + sh.size() * sizeof(Elf64_Shdr);
    for (size_t i = 0; i < sh.size(); ++i) {
        const Elf64_Shdr& s = sh[i];
        if (s.sh_type == SHT_NULL || s.sh_type == SHT_NOBITS || s.sh_size == 0) continue;
        if (strtab && section_is_pages(src, *strtab, s.sh_name)) continue;
        hashed += s.sh_size;
        if (s.sh_size > src.size() || hashed > src.size())
            throw Error("sections overlap: section " + std::to_string(i) + " (" + hex(s.sh_size) +
                            " bytes) adds up to more than the file holds",
                        src.name(), eh.e_shoff + i * sizeof(Elf64_Shdr));
        hash_range(src, s.sh_offset, s.sh_size, hash, "section");
    }
}

std::string hex_digits(const unsigned char* p, size_t n) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (size_t i = 0; i < n; ++i) {
        out += kHex[p[i] >> 4];
        out += kHex[p[i] & 15];
    }
    return out;
}

template <class T>
bool parse_number(std::string_view text, T& out) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc{} && end == text.data() + text.size() && !text.empty();
}

}  // namespace
}  // namespace xendump::legacy

namespace xendump {
using legacy::parse_number;

std::string SourceIdentity::mtime_text() const {
    std::string ns = std::to_string(mtime_nsec);
    return std::to_string(mtime_sec) + "." + std::string(9 - std::min<size_t>(9, ns.size()), '0') + ns;
}

std::string SourceIdentity::value() const {
    return "size=" + std::to_string(size) + ";mtime=" + mtime_text() + ";digest=" + digest;
}

std::optional<SourceIdentity> SourceIdentity::parse(std::string_view value) {
    SourceIdentity id;
    bool size = false, mtime = false;
    while (!value.empty()) {
        const size_t end = std::min(value.find(';'), value.size());
        const std::string_view field = value.substr(0, end);
        value.remove_prefix(std::min(end + 1, value.size()));
        const size_t eq = field.find('=');
        if (eq == std::string_view::npos) return std::nullopt;
        const std::string_view key = field.substr(0, eq), v = field.substr(eq + 1);
        if (key == "size") {
            if (!parse_number(v, id.size)) return std::nullopt;
            size = true;
        } else if (key == "mtime") {
            const size_t dot = v.find('.');
            if (dot == std::string_view::npos || v.size() - dot != 10 || !parse_number(v.substr(0, dot), id.mtime_sec) ||
                !parse_number(v.substr(dot + 1), id.mtime_nsec))
                return std::nullopt;
            mtime = true;
        } else if (key == "digest") {
            id.digest = std::string(v);
        }  // other fields: written by a later version, ignored
    }
    if (!size || !mtime || id.digest.empty()) return std::nullopt;
    return id;
}

std::string SourceIdentity::difference_from(const SourceIdentity& recorded) const {
    if (size != recorded.size)
        return "size " + std::to_string(size) + ", recorded " + std::to_string(recorded.size);
    if (mtime_sec != recorded.mtime_sec || mtime_nsec != recorded.mtime_nsec)
        return "modification time " + mtime_text() + ", recorded " + recorded.mtime_text();
    if (digest != recorded.digest) return "digest of all but the pages " + digest + ", recorded " + recorded.digest;
    return {};
}

}  // namespace xendump

namespace xendump::legacy {

SourceIdentity identify_source(const FileByteSource& src) {
    StreamHash hash;
    std::byte head[kXcCoreHeaderSize]{};
    const size_t n = static_cast<size_t>(std::min<uint64_t>(src.size(), sizeof head));
    src.read(0, std::span(head, n), "file header");
    if (looks_like_xc_core(std::span(head, n)))
        hash_xc_core(src, hash);
    else if (n >= SELFMAG && std::memcmp(head, ELFMAG, SELFMAG) == 0)
        hash_elf(src, hash);
    else
        throw Error("neither an xc_core file nor an ELF file: no source identity", src.name(), 0);
    const XXH128_canonical_t d = hash.finish_and_reset();
    SourceIdentity id;
    id.size = src.size();
    id.mtime_sec = src.mtime().tv_sec;
    id.mtime_nsec = static_cast<uint32_t>(src.mtime().tv_nsec);
    id.digest = kDigestKind + hex_digits(d.digest, sizeof d.digest);
    return id;
}

}  // namespace xendump::legacy

namespace xendump {

SourceIdentity identify_source(const std::filesystem::path& path) {
    return legacy::identify_source(legacy::FileByteSource(path.string()));
}

SourceIdentity identify_source(const std::filesystem::path& path, const OpenOptions& open) {
    return legacy::identify_source(legacy::FileByteSource(path.string(), open));
}

}  // namespace xendump
