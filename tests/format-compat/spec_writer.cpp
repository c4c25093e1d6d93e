// Written from the specification's text (../shared/spec/xen-core-format.md,
// cited by section) and xen-dump-core(5); see spec_writer.hpp.
#include "spec_writer.hpp"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <system_error>

namespace xendump::test::compat {

namespace {

// Numbers the specification gives (§1, §3, §5) and xen-dump-core(5) "Trailer notes" (type 14).
constexpr uint64_t kPage = 4096;
constexpr uint32_t kXenNone = 0x2000000, kXenHeader = 0x2000001, kXenVersion = 0x2000002, kXenFormatVersion = 0x2000003;
constexpr uint32_t kCoreHeader = 7, kCorePrstatus = 8, kCoreP2m = 9, kCoreDomain = 10, kCoreSharedInfo = 11,
                   kCoreDigest = 12, kCoreUnreadable = 13, kCorePadding = 14;
constexpr uint64_t kMagicPv = 0xF00FEBED, kMagicHvm = 0xF00FEBEE;
constexpr uint64_t kSlot = 5168, kContext32 = 2800, kXenVersionSize = 1280, kSharedInfo = 4096;
constexpr uint64_t kChunkPages = 256;
constexpr std::string_view kXen = "Xen", kXenCore = "XEN CORE";

bool pv(Guest g) { return g == Guest::pv64 || g == Guest::pv32; }
uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Bytes that will stand at file offset `base` onwards.
struct Bytes {
    uint64_t base = 0;
    std::vector<std::byte> b;

    uint64_t at() const { return base + b.size(); }
    void raw(const void* p, size_t n) {
        const auto* c = static_cast<const std::byte*>(p);
        b.insert(b.end(), c, c + n);
    }
    template <class T>
    void put(const T& v) {
        raw(&v, sizeof v);
    }
    void zeros(uint64_t n) { b.resize(b.size() + n); }
    // §3: namesz, descsz, type; the name NUL-padded to 4; the descriptor
    // NUL-padded to 8 with descsz counting the padding. Returns the note's offset.
    uint64_t note(std::string_view name, uint32_t type, std::span<const std::byte> desc) {
        const uint64_t start = at();
        const uint64_t padded = align_up(desc.size(), 8);
        const uint32_t head[3] = {static_cast<uint32_t>(name.size() + 1), static_cast<uint32_t>(padded), type};
        put(head);
        raw(name.data(), name.size());
        zeros(align_up(name.size() + 1, 4) - name.size());
        raw(desc.data(), desc.size());
        zeros(padded - desc.size());
        return start;
    }
};

template <class T>
std::span<const std::byte> bytes_of(const T& v) {
    return std::as_bytes(std::span(&v, 1));
}

struct Fd {
    int fd;
    explicit Fd(const std::filesystem::path& p) : fd(::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) {
        if (fd < 0) throw std::system_error(errno, std::generic_category(), p.string());
    }
    ~Fd() { ::close(fd); }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    void write_at(uint64_t off, const void* p, size_t n) const {
        const auto* c = static_cast<const char*>(p);
        while (n > 0) {
            const ssize_t w = ::pwrite(fd, c, n, static_cast<off_t>(off));
            if (w <= 0) throw std::system_error(errno, std::generic_category(), "pwrite");
            c += w, off += static_cast<uint64_t>(w), n -= static_cast<size_t>(w);
        }
    }
    void write_at(const Bytes& x) const { write_at(x.base, x.b.data(), x.b.size()); }
};

struct Hash {
    std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> s{XXH3_createState(), &XXH3_freeState};
    Hash() { XXH3_128bits_reset(s.get()); }
    void update(const void* p, size_t n) { XXH3_128bits_update(s.get(), p, n); }
    // §5: stored in XXH128's canonical (big-endian) form.
    void finish_into(std::vector<std::byte>& out) {
        XXH128_canonical_t c;
        XXH128_canonicalFromHash(&c, XXH3_128bits_digest(s.get()));
        const auto* p = reinterpret_cast<const std::byte*>(c.digest);
        out.insert(out.end(), p, p + sizeof c.digest);
        XXH3_128bits_reset(s.get());
    }
};

std::string domain_text(const SpecFile& spec) {
    // §3.1, NUL-padded by note().
    static constexpr const char* kType[] = {"pv", "pv", "hvm", "pvh"};
    std::string vcpus;
    for (uint32_t v = 0; v < spec.nr_vcpus; ++v) vcpus += (v ? "," : "") + std::to_string(v);
    const uint64_t max_pfn = spec.entries.empty() ? 0 : spec.entries.back().pfn + 1;
    return "DOMID=7\nNAME=compat-" + std::string(name_of(spec.guest)) + "\nUUID=6f2c9a54-1d3e-4b7a-9c0d-2e8f5a6b7c81\n" +
           "TYPE=" + kType[static_cast<int>(spec.guest)] + "\nGUEST_WIDTH=" + (spec.guest == Guest::pv32 ? "4" : "8") +
           "\nMAX_PFN=" + std::to_string(max_pfn) + "\nNR_PAGES=" + std::to_string(spec.entries.size()) +
           "\nVCPUS=" + vcpus + "\nP2M=" + (pv(spec.guest) ? "tree" : "translated") +
           "\nREASON=request\nPAUSED=1\nTIME=2026-12-03T06:00:00Z\nWRITER=format-compat-test 1\n";
}

struct Section {
    std::string name;
    uint32_t type;
    uint64_t offset, size, entsize, align;
};

}  // namespace

const char* name_of(Guest g) {
    static constexpr const char* k[] = {"pv64", "pv32", "hvm", "pvh"};
    return k[static_cast<int>(g)];
}
const char* name_of(Trailer t) { return t == Trailer::first_spec ? "first_spec" : "reserved_room"; }

void guest_page(const SpecFile& spec, uint64_t pfn, std::span<std::byte> page) {
    const bool zero = spec.pattern_every ? pfn % spec.pattern_every != 0 : pfn % 7 == 3;
    if (zero) {
        std::fill(page.begin(), page.end(), std::byte{0});
        return;
    }
    uint64_t x = spec.seed * 0x9E3779B97F4A7C15ull ^ (pfn + 1) * 0xBF58476D1CE4E5B9ull;
    for (size_t i = 0; i + 8 <= page.size(); i += 8) {
        x ^= x >> 31, x *= 0x94D049BB133111EBull, x ^= x >> 29;
        std::memcpy(page.data() + i, &x, 8);
    }
}

std::vector<Entry> sample_entries(uint64_t n, Guest g) {
    std::vector<Entry> out;
    uint64_t pfn = 0x10;
    for (uint64_t i = 0; i < n; ++i) {
        out.push_back({pfn, pv(g) ? 0x40000 + (n - 1 - i) * 3 : pfn});
        pfn += (i % 5 == 4) ? 2 + i % 3 : 1;  // runs of five pages, holes of 1 to 3
    }
    return out;
}

std::vector<Entry> single_page_runs(uint64_t runs, Guest g) {
    std::vector<Entry> out;
    for (uint64_t k = 0; k < runs; ++k) out.push_back({2 * k, pv(g) ? 0x100000 + (runs - 1 - k) : 2 * k});
    return out;
}

Written write_spec_file(const SpecFile& spec, const std::filesystem::path& path) {
    const uint64_t n = spec.entries.size();
    const bool is_pv = pv(spec.guest);
    Written w;

    // §2: PT_NOTE, then one PT_LOAD per maximal run of present pfns.
    struct Run { uint64_t first_pfn, first_index, count; };
    std::vector<Run> runs;
    for (uint64_t i = 0; i < n; ++i) {
        if (!runs.empty() && runs.back().first_pfn + runs.back().count == spec.entries[i].pfn)
            ++runs.back().count;
        else
            runs.push_back({spec.entries[i].pfn, i, 1});
    }
    w.phnum = 1 + runs.size();

    // §3: the note segment, after the program headers (§1: e_phoff 64).
    Bytes notes{sizeof(Elf64_Ehdr) + w.phnum * sizeof(Elf64_Phdr), {}};
    const uint64_t magic = is_pv ? kMagicPv : kMagicHvm;
    const uint64_t header[4] = {magic, spec.nr_vcpus, n, kPage};
    notes.note(kXen, kXenNone, {});
    notes.note(kXen, kXenHeader, bytes_of(header));
    std::vector<std::byte> version(kXenVersionSize);
    const uint64_t major = 4, minor = 17;
    std::memcpy(version.data(), &major, 8);
    std::memcpy(version.data() + 8, &minor, 8);
    std::memcpy(version.data() + kXenVersionSize - 8, &kPage, 8);  // pagesize, the last field
    notes.note(kXen, kXenVersion, version);
    const uint64_t format_version = 1;
    notes.note(kXen, kXenFormatVersion, bytes_of(format_version));
    const uint64_t xen_notes_end = notes.at();
    notes.note(kXenCore, kCoreHeader, bytes_of(header));
    const std::string text = domain_text(spec);
    notes.note(kXenCore, kCoreDomain, std::as_bytes(std::span(text)));
    std::vector<std::byte> contexts(spec.nr_vcpus * kSlot);
    for (uint64_t v = 0; v < spec.nr_vcpus; ++v) {
        const uint64_t used = spec.guest == Guest::pv32 ? kContext32 : kSlot;  // §3 note 9
        for (uint64_t k = 0; k < used; ++k) contexts[v * kSlot + k] = std::byte(static_cast<uint8_t>(v * 31 + k * 7 + 1));
    }
    const uint64_t prstatus_desc = notes.note(kXenCore, kCorePrstatus, contexts) + 24;
    uint64_t shared_desc = 0;
    if (is_pv) {
        std::vector<std::byte> shared(kSharedInfo, std::byte{0x5a});
        shared_desc = notes.note(kXenCore, kCoreSharedInfo, shared) + 24;
    }
    const uint64_t notes_offset = notes.base, notes_size = notes.b.size();

    // §4, §3.2, §7: pages on a page boundary, the table note with its
    // descriptor on the page boundary after them, then .xen_pfn (HVM/PVH).
    w.pages_offset = align_up(notes.at(), kPage);
    const uint64_t pages_end = w.pages_offset + n * kPage;
    w.table_desc_offset = pages_end + kPage;
    const uint64_t table_note = w.table_desc_offset - 24;
    Bytes table{table_note, {}};
    std::vector<std::byte> pairs;
    for (const auto& e : spec.entries) {
        const uint64_t pair[2] = {e.pfn, e.gmfn};
        pairs.insert(pairs.end(), bytes_of(pair).begin(), bytes_of(pair).end());
    }
    table.note(kXenCore, kCoreP2m, pairs);
    const uint64_t pfn_array = table.at();
    if (!is_pv)
        for (const auto& e : spec.entries) table.put(e.pfn);

    Fd out(path);
    Hash chunk_hash;
    std::vector<std::byte> digest_desc;
    const uint32_t digest_head[2] = {1, kChunkPages};  // XXH3-128, 256 pages a chunk
    digest_desc.insert(digest_desc.end(), bytes_of(digest_head).begin(), bytes_of(digest_head).end());
    std::vector<std::byte> page(kPage);
    for (uint64_t i = 0; i < n; ++i) {
        const uint64_t pfn = spec.entries[i].pfn;
        if (std::binary_search(spec.unreadable.begin(), spec.unreadable.end(), pfn))
            std::fill(page.begin(), page.end(), std::byte{0});  // §5: stored as zeros
        else
            guest_page(spec, pfn, page);
        if (std::any_of(page.begin(), page.end(), [](std::byte b) { return b != std::byte{0}; }))
            out.write_at(w.pages_offset + i * kPage, page.data(), kPage);  // else a hole (§4)
        chunk_hash.update(page.data(), kPage);
        if ((i + 1) % kChunkPages == 0 || i + 1 == n) chunk_hash.finish_into(digest_desc);
    }
    Hash h;
    h.update(notes.b.data(), notes.b.size());
    h.finish_into(digest_desc);
    h.update(pairs.data(), pairs.size());
    h.finish_into(digest_desc);

    // §5 and xen-dump-core(5) "Trailer notes", right after the table (§7).
    Bytes trailer{table.at(), {}};
    if (spec.digests) w.digest_note_offset = trailer.note(kXenCore, kCoreDigest, digest_desc);
    std::vector<std::byte> unreadable;
    const uint64_t count = spec.unreadable.size();
    unreadable.insert(unreadable.end(), bytes_of(count).begin(), bytes_of(count).end());
    for (uint64_t pfn : spec.unreadable) unreadable.insert(unreadable.end(), bytes_of(pfn).begin(), bytes_of(pfn).end());
    const uint64_t reserved_at = trailer.at();
    if (!spec.unreadable.empty()) w.unreadable_note_offset = trailer.note(kXenCore, kCoreUnreadable, unreadable);
    if (spec.trailer == Trailer::reserved_room) {
        // Room for an NT_XEN_UNREADABLE of every page (24 + 8 + 8n) and one more note header.
        const uint64_t room = 24 + 8 + 8 * n + 24;
        const uint64_t used = trailer.at() - reserved_at;
        w.padding_note_offset = trailer.note(kXenCore, kCorePadding, std::vector<std::byte>(room - used - 24));
    }
    w.trailer_offset = trailer.base;
    w.trailer_size = trailer.b.size();

    // §6: the sections, in the table's order; §7: .shstrtab, then the headers.
    std::vector<Section> secs = {{"", SHT_NULL, 0, 0, 0, 0},
                                 {".shstrtab", SHT_STRTAB, 0, 0, 0, 1},
                                 {".note.Xen", SHT_NOTE, notes_offset, xen_notes_end - notes_offset, 0, 4},
                                 {".xen_prstatus", SHT_PROGBITS, prstatus_desc, contexts.size(), kSlot, 8}};
    if (is_pv) secs.push_back({".xen_shared_info", SHT_PROGBITS, shared_desc, kSharedInfo, kSharedInfo, 8});
    secs.push_back({".xen_pages", SHT_PROGBITS, w.pages_offset, n * kPage, kPage, kPage});
    secs.push_back({".note.xen_p2m", SHT_NOTE, table_note, 24 + pairs.size(), 0, 8});
    if (is_pv)
        secs.push_back({".xen_p2m", SHT_PROGBITS, w.table_desc_offset, pairs.size(), 16, 8});
    else
        secs.push_back({".xen_pfn", SHT_PROGBITS, pfn_array, 8 * n, 8, 8});
    if (w.trailer_size != 0) secs.push_back({".note.xen_trailer", SHT_NOTE, w.trailer_offset, w.trailer_size, 0, 8});

    Bytes names{trailer.at(), {}};
    w.shstrtab_offset = names.base;
    names.zeros(1);
    std::vector<uint32_t> name_index;
    for (const auto& s : secs) {
        name_index.push_back(s.name.empty() ? 0 : static_cast<uint32_t>(names.b.size()));
        if (s.name.empty()) continue;
        w.section_name[s.name] = names.at();
        names.raw(s.name.c_str(), s.name.size() + 1);
    }
    secs[1].offset = names.base;
    secs[1].size = names.b.size();
    w.shoff = align_up(names.at(), 8);
    w.shnum = static_cast<uint16_t>(secs.size());
    Bytes shdrs{w.shoff, {}};
    for (size_t i = 0; i < secs.size(); ++i) {
        const Section& x = secs[i];
        const Elf64_Shdr sh{.sh_name = name_index[i], .sh_type = x.type, .sh_flags = 0, .sh_addr = 0,
                            .sh_offset = x.offset, .sh_size = x.size, .sh_link = 0,
                            // §1, §6: the real program header count under PN_XNUM
                            .sh_info = i == 0 && w.phnum >= PN_XNUM ? static_cast<uint32_t>(w.phnum) : 0,
                            .sh_addralign = x.align, .sh_entsize = x.entsize};
        if (!secs[i].name.empty()) w.section_header[secs[i].name] = shdrs.at();
        shdrs.put(sh);
    }
    w.file_size = shdrs.at();

    // §1, §2: the ELF header and the program headers.
    Bytes head{0, {}};
    Elf64_Ehdr eh{.e_ident = {ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3, ELFCLASS64, ELFDATA2LSB, EV_CURRENT, ELFOSABI_NONE},
                  .e_type = ET_CORE,
                  .e_machine = static_cast<uint16_t>(spec.guest == Guest::pv32 ? EM_386 : EM_X86_64),
                  .e_version = EV_CURRENT,
                  .e_entry = 0,
                  .e_phoff = sizeof(Elf64_Ehdr),
                  .e_shoff = w.shoff,
                  .e_flags = 0,
                  .e_ehsize = sizeof(Elf64_Ehdr),
                  .e_phentsize = sizeof(Elf64_Phdr),
                  .e_phnum = static_cast<uint16_t>(std::min<uint64_t>(w.phnum, PN_XNUM)),
                  .e_shentsize = sizeof(Elf64_Shdr),
                  .e_shnum = w.shnum,
                  .e_shstrndx = 1};
    head.put(eh);
    Elf64_Phdr note{};
    note.p_type = PT_NOTE;
    note.p_offset = notes_offset;
    note.p_filesz = note.p_memsz = notes_size;
    note.p_align = 8;
    head.put(note);
    for (const auto& r : runs) {
        Elf64_Phdr p{};
        p.p_type = PT_LOAD;
        p.p_flags = PF_R | PF_W | PF_X;
        p.p_offset = w.pages_offset + r.first_index * kPage;
        p.p_paddr = r.first_pfn * kPage;
        p.p_filesz = p.p_memsz = r.count * kPage;
        p.p_align = kPage;
        head.put(p);
    }

    out.write_at(head);
    out.write_at(notes);
    out.write_at(table);
    out.write_at(trailer);
    out.write_at(names);
    out.write_at(shdrs);
    if (::ftruncate(out.fd, static_cast<off_t>(w.file_size)) != 0)
        throw std::system_error(errno, std::generic_category(), "ftruncate");
    return w;
}

void patch_file(const std::filesystem::path& path, uint64_t offset, std::span<const std::byte> bytes) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), path.string());
    const ssize_t w = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    ::close(fd);
    if (w != static_cast<ssize_t>(bytes.size())) throw std::runtime_error("patch_file: short write");
}

std::vector<std::byte> read_file(const std::filesystem::path& path, uint64_t offset, uint64_t size) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), path.string());
    std::vector<std::byte> b(size);
    const ssize_t r = ::pread(fd, b.data(), size, static_cast<off_t>(offset));
    ::close(fd);
    if (r != static_cast<ssize_t>(size)) throw std::runtime_error("read_file: short read");
    return b;
}

}  // namespace xendump::test::compat
