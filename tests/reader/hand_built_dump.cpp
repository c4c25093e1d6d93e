#include "hand_built_dump.hpp"

#include <elf.h>
#include <xxhash.h>

#include <fstream>
#include <stdexcept>

#include "hostile_files.hpp"
#include "test_support.hpp"

namespace xendump::test {

namespace {

constexpr uint64_t kPage = 4096;

uint64_t align(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

class Image {
public:
    std::vector<std::byte> b;
    uint64_t size() const { return b.size(); }
    void pad_to(uint64_t off) {
        if (off < b.size()) throw std::logic_error("pad backwards");
        b.resize(off);
    }
    void raw(const void* p, size_t n) {
        auto* c = static_cast<const std::byte*>(p);
        b.insert(b.end(), c, c + n);
    }
    template <class T>
    void put(const T& v) {
        raw(&v, sizeof v);
    }
    // One note (xen-dump-core(5) "Notes"): header, name padded to 4, descriptor padded to 8
    // (this format keeps every note start 8-aligned). Returns its offset.
    uint64_t note(const std::string& name, uint32_t type, const std::vector<std::byte>& desc) {
        uint64_t at = size();
        std::vector<std::byte> d = desc;
        d.resize(align(d.size(), 8));
        uint32_t head[3] = {static_cast<uint32_t>(name.size() + 1), static_cast<uint32_t>(d.size()), type};
        put(head);
        raw(name.c_str(), name.size() + 1);
        pad_to(align(size(), 4));
        raw(d.data(), d.size());
        return at;
    }
};

template <class T>
std::vector<std::byte> bytes_of(const T& v) {
    std::vector<std::byte> out(sizeof v);
    std::memcpy(out.data(), &v, sizeof v);
    return out;
}

std::vector<std::byte> digest_of(const std::byte* p, size_t n) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(p, n));
    std::vector<std::byte> out(16);
    std::memcpy(out.data(), &c, 16);
    return out;
}

}  // namespace

void HandBuiltDump::write(const std::filesystem::path& path) const { write_bytes(path, bytes); }

std::vector<PageEntry> sample_entries(uint64_t n, bool pv) {
    std::vector<PageEntry> e;
    uint64_t pfn = 0;
    for (uint64_t i = 0; i < n; ++i) {
        if (i == n / 3 || i == n / 2) pfn += 5;  // holes: three runs
        e.push_back({pfn, pv ? 0x100000 + ((pfn * 7919) % 0x10000) * 3 : pfn});
        ++pfn;
    }
    return e;
}

HandBuiltDump build_hand_dump(const HandBuildSpec& spec) {
    HandBuiltDump out;
    const auto& ents = spec.entries;
    const bool pv = spec.type == format::GuestType::pv;
    const uint64_t nr = ents.size();

    struct Run { uint64_t pfn, count, index; };
    std::vector<Run> runs;
    for (uint64_t i = 0; i < nr; ++i) {
        if (!runs.empty() && ents[i].pfn == ents[i - 1].pfn + 1) ++runs.back().count;
        else runs.push_back({ents[i].pfn, 1, i});
    }
    if (spec.split_first_run && runs[0].count > 1) {
        Run second{runs[0].pfn + 1, runs[0].count - 1, 1};
        runs[0].count = 1;
        runs.insert(runs.begin() + 1, second);
    }
    out.nr_loads = runs.size();
    const uint64_t phnum = 1 + runs.size();

    Image img;
    img.pad_to(sizeof(Elf64_Ehdr) + phnum * sizeof(Elf64_Phdr));
    out.phoff = sizeof(Elf64_Ehdr);

    // Note segment (xen-dump-core(5) "Notes").
    out.notes_offset = img.size();
    format::HeaderDesc hdr{pv ? format::kMagicPV : format::kMagicHVM, spec.nr_vcpus, nr, kPage};
    format::XenVersionDesc ver{};
    ver.major_version = 4;
    ver.minor_version = 17;
    std::memcpy(ver.extra_version, ".3", 3);
    ver.pagesize = kPage;
    img.note("Xen", format::kNoteDumpcoreNone, {});
    out.note_offset["xen-header"] = img.note("Xen", format::kNoteDumpcoreHeader, bytes_of(hdr));
    img.note("Xen", format::kNoteDumpcoreXenVersion, bytes_of(ver));
    out.note_offset["format-version"] = img.note("Xen", format::kNoteDumpcoreFormatVersion, bytes_of(uint64_t{1}));
    const uint64_t note_xen_end = img.size();
    out.note_offset["core-header"] = img.note("XEN CORE", format::kNtXenHeader, bytes_of(hdr));
    std::string dom = "DOMID=7\nNAME=hand-built\nUUID=00000000-0000-0000-0000-000000000007\nTYPE=" +
                      std::string(format::to_string(spec.type)) + "\nGUEST_WIDTH=8\nNR_PAGES=" + std::to_string(nr) +
                      "\nVCPUS=";
    for (uint32_t v = 0; v < spec.nr_vcpus; ++v) dom += (v ? "," : "") + std::to_string(v * 2);
    dom += "\nP2M=tree\nREASON=request\nWRITER=hand_built_dump\n";
    std::vector<std::byte> dom_bytes(dom.size());
    std::memcpy(dom_bytes.data(), dom.data(), dom.size());
    out.note_offset["domain"] = img.note("XEN CORE", format::kNtXenDomain, dom_bytes);
    std::vector<std::byte> ctx(spec.nr_vcpus * format::kVcpuSlotSize);
    for (size_t i = 0; i < ctx.size(); ++i) ctx[i] = std::byte(i * 13 + 1);
    const uint64_t prstatus_at = img.note("XEN CORE", format::kNtXenPrstatus, ctx);
    out.note_offset["prstatus"] = prstatus_at;
    std::vector<std::byte> si(format::kSharedInfoSize, std::byte{0x5a});
    const uint64_t shared_at = pv ? img.note("XEN CORE", format::kNtXenSharedInfo, si) : 0;
    out.notes_size = img.size() - out.notes_offset;

    // Pages (xen-dump-core(5) "Page data"), slot i = entry i.
    out.pages_offset = align(img.size(), kPage);
    img.pad_to(out.pages_offset);
    std::vector<std::byte> page(kPage);
    for (const auto& e : ents) {
        fill_pattern_page(spec.seed, e.pfn, page.data());
        img.raw(page.data(), kPage);
    }
    const uint64_t pages_end = img.size();

    // Table note (xen-dump-core(5) "The PFN->GMFN table"): descriptor page-aligned, so the 24-byte header sits
    // at the end of the page after the page data.
    out.table_desc_offset = pages_end + kPage;
    out.table_note_offset = out.table_desc_offset - 24;
    img.pad_to(out.table_note_offset);
    uint32_t th[3] = {9, static_cast<uint32_t>(nr * 16), format::kNtXenP2m};
    img.put(th);
    img.raw("XEN CORE\0\0\0", 12);
    img.raw(ents.data(), nr * 16);
    if (!pv) {
        out.pfn_array_offset = img.size();
        for (const auto& e : ents) img.put(e.pfn);
    }

    // Trailer (xen-dump-core(5) "Trailer notes"): NT_XEN_DIGEST when written, then the room reserved for
    // NT_XEN_UNREADABLE (24 + 8 + 8 bytes a page, + 24): here an empty
    // NT_XEN_UNREADABLE and the padding note (type 14) filling the rest.
    uint64_t trailer_at = align(img.size(), 8);
    img.pad_to(trailer_at);
    if (spec.digests) {
        std::vector<std::byte> d = bytes_of(format::DigestDescHead{format::kDigestXxh3_128, format::kDigestChunkPages});
        const uint64_t chunk = format::kDigestChunkPages * kPage;
        for (uint64_t off = 0; off < nr * kPage; off += chunk) {
            auto h = digest_of(img.b.data() + out.pages_offset + off, std::min(chunk, nr * kPage - off));
            d.insert(d.end(), h.begin(), h.end());
        }
        auto hn = digest_of(img.b.data() + out.notes_offset, out.notes_size);
        auto ht = digest_of(img.b.data() + out.table_desc_offset, nr * 16);
        d.insert(d.end(), hn.begin(), hn.end());
        d.insert(d.end(), ht.begin(), ht.end());
        out.digest_note_offset = img.note("XEN CORE", format::kNtXenDigest, d);
    }
    const uint64_t reserved_at = img.size();
    out.unreadable_note_offset = img.note("XEN CORE", format::kNtXenUnreadable, bytes_of(uint64_t{0}));
    out.padding_note_offset = img.size();
    img.note("XEN CORE", format::kNtXenPadding, std::vector<std::byte>(24 + 8 + 8 * nr + 24 - 32 - 24));
    if (img.size() - reserved_at != 24 + 8 + 8 * nr + 24) throw std::logic_error("trailer reservation");
    const uint64_t trailer_size = img.size() - trailer_at;
    out.trailer_offset = trailer_at;

    // Section names and headers (xen-dump-core(5) "Sections").
    struct Sec { std::string name; uint32_t type; uint64_t off, size, entsize, align; };
    std::vector<Sec> secs = {{"", SHT_NULL, 0, 0, 0, 0}, {".shstrtab", SHT_STRTAB, 0, 0, 0, 1},
                             {".note.Xen", SHT_NOTE, out.notes_offset, note_xen_end - out.notes_offset, 0, 4},
                             {".xen_prstatus", SHT_PROGBITS, prstatus_at + 24, ctx.size(), format::kVcpuSlotSize, 8}};
    if (pv) secs.push_back({".xen_shared_info", SHT_PROGBITS, shared_at + 24, si.size(), format::kSharedInfoSize, 8});
    secs.push_back({".xen_pages", SHT_PROGBITS, out.pages_offset, nr * kPage, kPage, kPage});
    secs.push_back({".note.xen_p2m", SHT_NOTE, out.table_note_offset, 24 + nr * 16, 0, 8});
    if (pv) secs.push_back({".xen_p2m", SHT_PROGBITS, out.table_desc_offset, nr * 16, 16, 8});
    else secs.push_back({".xen_pfn", SHT_PROGBITS, out.pfn_array_offset, nr * 8, 8, 8});
    secs.push_back({".note.xen_trailer", SHT_NOTE, trailer_at, trailer_size, 0, 8});
    std::string names(1, '\0');
    std::vector<uint32_t> name_at;
    for (const auto& s : secs) {
        name_at.push_back(s.name.empty() ? 0 : static_cast<uint32_t>(names.size()));
        if (!s.name.empty()) {
            out.section_name[s.name] = img.size() + names.size();
            names += s.name + '\0';
        }
    }
    secs[1].off = img.size();
    secs[1].size = names.size();
    img.raw(names.data(), names.size());
    out.shoff = align(img.size(), 8);
    img.pad_to(out.shoff);
    for (size_t i = 0; i < secs.size(); ++i) {
        Elf64_Shdr sh{};
        sh.sh_name = name_at[i];
        sh.sh_type = secs[i].type;
        sh.sh_offset = secs[i].off;
        sh.sh_size = secs[i].size;
        sh.sh_entsize = secs[i].entsize;
        sh.sh_addralign = secs[i].align;
        if (!secs[i].name.empty()) out.section_header[secs[i].name] = img.size();
        img.put(sh);
    }

    // ELF header (xen-dump-core(5) "ELF header") and program headers (xen-dump-core(5) "Program headers"), now that offsets are known.
    Elf64_Ehdr eh = core_elf_header(EM_X86_64);
    eh.e_phoff = out.phoff;
    eh.e_shoff = out.shoff;
    eh.e_ehsize = sizeof(Elf64_Ehdr);
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = static_cast<uint16_t>(phnum);
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = static_cast<uint16_t>(secs.size());
    eh.e_shstrndx = 1;
    std::memcpy(img.b.data(), &eh, sizeof eh);
    Elf64_Phdr note{};
    note.p_type = PT_NOTE;
    note.p_offset = out.notes_offset;
    note.p_filesz = out.notes_size;
    note.p_align = 4;
    std::memcpy(img.b.data() + out.phoff, &note, sizeof note);
    for (size_t i = 0; i < runs.size(); ++i) {
        Elf64_Phdr ph{};
        ph.p_type = PT_LOAD;
        ph.p_flags = PF_R | PF_W | PF_X;
        ph.p_offset = out.pages_offset + runs[i].index * kPage;
        ph.p_paddr = runs[i].pfn * kPage;
        ph.p_filesz = ph.p_memsz = runs[i].count * kPage;
        ph.p_align = kPage;
        std::memcpy(img.b.data() + out.phdr_offset(1 + i), &ph, sizeof ph);
    }
    out.bytes = std::move(img.b);
    return out;
}

}  // namespace xendump::test
