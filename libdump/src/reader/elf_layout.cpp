#include "reader/elf_layout.hpp"

#include <libelf.h>

#include <cstring>
#include <memory>

#include "reader/check_error.hpp"
#include "reader/checked.hpp"

namespace xendump::reader {

namespace {

struct ElfCloser {
    void operator()(Elf* e) const { elf_end(e); }
};
using ElfHandle = std::unique_ptr<Elf, ElfCloser>;

[[noreturn]] void fail(const DumpFile& f, const char* check, const std::string& structure, uint64_t offset,
                       const std::string& msg) {
    throw CheckError(Finding{check, structure, offset, msg}, f.path());
}

// xen-dump-core(5) "ELF header": the fixed fields of the ELF header.
void check_ident(const DumpFile& f, const Elf64_Ehdr& eh) {
    const std::string s = "ELF header";
    if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) fail(f, "elf-ident", s, 0, "bad ELF magic (not an ELF file)");
    if (eh.e_ident[EI_CLASS] != ELFCLASS64)
        fail(f, "elf-ident", s, EI_CLASS,
             "EI_CLASS is " + std::to_string(eh.e_ident[EI_CLASS]) + ", expected ELFCLASS64 (2)");
    if (eh.e_ident[EI_DATA] != ELFDATA2LSB)
        fail(f, "elf-ident", s, EI_DATA,
             "EI_DATA is " + std::to_string(eh.e_ident[EI_DATA]) + ", expected ELFDATA2LSB (1)");
    if (eh.e_ident[EI_VERSION] != EV_CURRENT)
        fail(f, "elf-ident", s, EI_VERSION, "EI_VERSION is " + std::to_string(eh.e_ident[EI_VERSION]) + ", expected 1");
    if (eh.e_type != ET_CORE)
        fail(f, "elf-ident", s, offsetof(Elf64_Ehdr, e_type),
             "e_type is " + std::to_string(eh.e_type) + ", expected ET_CORE (4)");
    if (eh.e_version != EV_CURRENT)
        fail(f, "elf-ident", s, offsetof(Elf64_Ehdr, e_version), "e_version is " + std::to_string(eh.e_version) + ", expected 1");
    if (eh.e_machine != EM_X86_64 && eh.e_machine != EM_386)
        fail(f, "elf-ident", s, offsetof(Elf64_Ehdr, e_machine),
             "e_machine is " + std::to_string(eh.e_machine) + ", expected EM_X86_64 (62) or EM_386 (3)");
    if (eh.e_ehsize != sizeof(Elf64_Ehdr))
        fail(f, "elf-ident", s, offsetof(Elf64_Ehdr, e_ehsize), "e_ehsize is " + std::to_string(eh.e_ehsize) + ", expected 64");
    if (eh.e_phnum != 0 && eh.e_phentsize != sizeof(Elf64_Phdr))
        fail(f, "elf-ident", s, offsetof(Elf64_Ehdr, e_phentsize),
             "e_phentsize is " + std::to_string(eh.e_phentsize) + ", expected 56");
    if (eh.e_shoff != 0 && eh.e_shentsize != sizeof(Elf64_Shdr))
        fail(f, "elf-ident", s, offsetof(Elf64_Ehdr, e_shentsize),
             "e_shentsize is " + std::to_string(eh.e_shentsize) + ", expected 64");
}

// The largest section name table copied for an encrypted file (ours and
// Xen's are a few hundred bytes).
constexpr uint64_t kMaxEncryptedShstrtab = 16ull << 20;

// An encrypted file (xen-dump-core(5) "Encrypted dumps"), or a flattened one
// (reader/flattened_image.hpp), has no bytes in place for libelf to map: it
// reads, with elf_memory(), a compact image of what it walks, decrypted: the ELF header, the program headers at 64, the section
// headers after them and the section name table last, the offsets of the
// copy pointing there. Memory: the tables (56 bytes a segment, 64 a
// section, as the layout holds anyway) and the name table.
struct ElfImage {
    std::vector<std::byte> bytes;
    uint64_t shstrtab_offset = 0;  // where the name table lies in the file
    bool moved = false;            // the image holds it
    uint64_t shstrndx = 0;
};

ElfImage encrypted_elf_image(const DumpFile& f, const Elf64_Ehdr& eh, uint64_t phnum, uint64_t shnum, const Elf64_Shdr& sh0) {
    ElfImage img;
    const uint64_t ph_bytes = phnum * sizeof(Elf64_Phdr), sh_bytes = shnum * sizeof(Elf64_Shdr);
    img.bytes.resize(sizeof(Elf64_Ehdr) + ph_bytes + sh_bytes);
    Elf64_Ehdr copy = eh;
    copy.e_phoff = phnum ? sizeof(Elf64_Ehdr) : 0;
    copy.e_shoff = eh.e_shoff ? sizeof(Elf64_Ehdr) + ph_bytes : 0;
    std::memcpy(img.bytes.data(), &copy, sizeof copy);
    if (ph_bytes) f.read_exact(eh.e_phoff, std::span(img.bytes).subspan(sizeof(Elf64_Ehdr), ph_bytes), "program header table");
    if (sh_bytes) f.read_exact(eh.e_shoff, std::span(img.bytes).subspan(copy.e_shoff, sh_bytes), "section header table");
    img.shstrndx = eh.e_shstrndx == SHN_XINDEX ? sh0.sh_link : eh.e_shstrndx;
    if (shnum == 0 || img.shstrndx >= shnum) return img;  // read_elf_layout says what is wrong
    Elf64_Shdr str{};
    const uint64_t at = copy.e_shoff + img.shstrndx * sizeof(Elf64_Shdr);
    std::memcpy(&str, img.bytes.data() + at, sizeof str);
    if (str.sh_type == SHT_NULL || !range_inside(str.sh_offset, str.sh_size, f.size())) return img;
    if (str.sh_size > kMaxEncryptedShstrtab)
        fail(f, "section-range", "section [" + std::to_string(img.shstrndx) + "] (.shstrtab)",
             eh.e_shoff + img.shstrndx * sizeof(Elf64_Shdr),
             "the section name table is " + hex(str.sh_size) + " bytes, more than a reader of an encrypted file copies (" +
                 hex(kMaxEncryptedShstrtab) + ")");
    img.shstrtab_offset = str.sh_offset;
    img.moved = true;
    str.sh_offset = img.bytes.size();
    std::memcpy(img.bytes.data() + at, &str, sizeof str);
    img.bytes.resize(img.bytes.size() + str.sh_size);
    f.read_exact(img.shstrtab_offset, std::span(img.bytes).last(str.sh_size), "section name table");
    return img;
}

}  // namespace

const Section* ElfLayout::find(std::string_view name) const {
    for (const auto& s : sections)
        if (s.name == name) return &s;
    return nullptr;
}

ElfLayout read_elf_layout(const DumpFile& f, std::vector<Finding>& findings) {
    ElfLayout out;
    const uint64_t size = f.size();
    if (size < sizeof(Elf64_Ehdr)) {
        if (size >= SELFMAG) {
            char magic[SELFMAG];
            f.read_exact(0, std::as_writable_bytes(std::span(magic)), "ELF header");
            if (std::memcmp(magic, ELFMAG, SELFMAG) != 0) fail(f, "elf-ident", "ELF header", 0, "bad ELF magic (not an ELF file)");
        }
        fail(f, "elf-ident", "ELF header", 0,
             "file is " + std::to_string(size) + " bytes, shorter than an ELF header (64)");
    }
    f.read_exact(0, std::as_writable_bytes(std::span(&out.ehdr, 1)), "ELF header");
    const Elf64_Ehdr& eh = out.ehdr;
    check_ident(f, eh);

    // Section header 0 first: it may hold the real counts (PN_XNUM, SHN_UNDEF).
    Elf64_Shdr sh0{};
    if (eh.e_shoff != 0) {
        if (!range_inside(eh.e_shoff, sizeof(Elf64_Shdr), size))
            fail(f, "shoff-range", "ELF header", offsetof(Elf64_Ehdr, e_shoff),
                 "e_shoff " + hex(eh.e_shoff) + " is past the end of the file (" + hex(size) + ")");
        f.read_exact(eh.e_shoff, std::as_writable_bytes(std::span(&sh0, 1)), "section header [0]");
    }
    out.shnum = eh.e_shnum;
    if (eh.e_shoff != 0 && eh.e_shnum == 0) out.shnum = sh0.sh_size;
    out.phnum = eh.e_phnum;
    if (eh.e_phnum == PN_XNUM) {
        if (eh.e_shoff == 0)
            fail(f, "pn-xnum", "ELF header", offsetof(Elf64_Ehdr, e_phnum),
                 "e_phnum is PN_XNUM but there is no section header 0 to hold the real count");
        out.phnum = sh0.sh_info;
        if (out.phnum < PN_XNUM)
            fail(f, "pn-xnum", "section header [0]", eh.e_shoff + offsetof(Elf64_Shdr, sh_info),
                 "e_phnum is PN_XNUM but sh_info " + std::to_string(out.phnum) + " is below 0xffff");
    }
    auto ph_bytes = checked_mul(out.phnum, sizeof(Elf64_Phdr));
    if (out.phnum != 0 && (!ph_bytes || !range_inside(eh.e_phoff, *ph_bytes, size)))
        fail(f, "phoff-range", "ELF header", offsetof(Elf64_Ehdr, e_phoff),
             "program header table: " + past_end("e_phoff", eh.e_phoff, "phnum*56", ph_bytes.value_or(~0ULL), size));
    auto sh_bytes = checked_mul(out.shnum, sizeof(Elf64_Shdr));
    if (out.shnum != 0 && (!sh_bytes || !range_inside(eh.e_shoff, *sh_bytes, size)))
        fail(f, "shoff-range", "ELF header", offsetof(Elf64_Ehdr, e_shoff),
             "section header table: " + past_end("e_shoff", eh.e_shoff, "shnum*64", sh_bytes.value_or(~0ULL), size));

    // The tables are inside the file: libelf can walk them.
    elf_version(EV_CURRENT);
    ElfImage image;
    if (!f.in_place()) image = encrypted_elf_image(f, eh, out.phnum, out.shnum, sh0);
    ElfHandle elf(!f.in_place() ? elf_memory(reinterpret_cast<char*>(image.bytes.data()), image.bytes.size())
                                : elf_begin(f.fd(), ELF_C_READ_MMAP, nullptr));
    if (!elf) fail(f, "elf-ident", "ELF header", 0, std::string("libelf cannot read the file: ") + elf_errmsg(-1));
    size_t phnum = 0, shnum = 0, shstrndx = 0;
    if (elf_getphdrnum(elf.get(), &phnum) != 0 || phnum != out.phnum)
        fail(f, "pn-xnum", "ELF header", offsetof(Elf64_Ehdr, e_phnum),
             "libelf resolves " + std::to_string(phnum) + " program headers, the headers say " + std::to_string(out.phnum));
    if (elf_getshdrnum(elf.get(), &shnum) != 0 || shnum != out.shnum)
        fail(f, "shoff-range", "ELF header", offsetof(Elf64_Ehdr, e_shnum),
             "libelf resolves " + std::to_string(shnum) + " section headers, the headers say " + std::to_string(out.shnum));

    FindingList list(findings);
    for (size_t i = 0; i < phnum; ++i) {
        Segment seg;
        seg.index = i;
        seg.header_offset = eh.e_phoff + i * sizeof(Elf64_Phdr);
        if (!gelf_getphdr(elf.get(), static_cast<int>(i), &seg.phdr))
            fail(f, "phoff-range", seg.structure(), seg.header_offset, std::string("libelf: ") + elf_errmsg(-1));
        seg.in_file = range_inside(seg.phdr.p_offset, seg.phdr.p_filesz, size);
        if (!seg.in_file)
            list.add({"segment-range", seg.structure(), seg.header_offset,
                      past_end("p_offset", seg.phdr.p_offset, "p_filesz", seg.phdr.p_filesz, size)});
        out.segments.push_back(seg);
    }
    // Trailing PT_NULLs (unused entries: a PV table padded to makedumpfile's
    // view, xen-dump-core(5)) are no segments.
    while (!out.segments.empty() && out.segments.back().phdr.p_type == PT_NULL) out.segments.pop_back();

    if (shnum == 0) {
        list.finish();
        return out;
    }
    if (elf_getshdrstrndx(elf.get(), &shstrndx) != 0 || shstrndx >= shnum)
        fail(f, "section-range", "ELF header", offsetof(Elf64_Ehdr, e_shstrndx),
             "e_shstrndx does not name a section (" + std::to_string(shstrndx) + " of " + std::to_string(shnum) + ")");
    for (size_t i = 0; i < shnum; ++i) {
        Section sec;
        sec.index = i;
        sec.header_offset = eh.e_shoff + i * sizeof(Elf64_Shdr);
        Elf_Scn* scn = elf_getscn(elf.get(), i);
        if (!scn || !gelf_getshdr(scn, &sec.shdr))
            fail(f, "shoff-range", "section [" + std::to_string(i) + "]", sec.header_offset,
                 std::string("libelf: ") + elf_errmsg(-1));
        // The image's name table lies elsewhere than the file's.
        if (image.moved && i == image.shstrndx) sec.shdr.sh_offset = image.shstrtab_offset;
        // No section of a dump is SHT_NOBITS: one that says so is read like
        // any other (its bytes are where it points), so it must be inside too.
        sec.in_file = sec.shdr.sh_type == SHT_NULL || range_inside(sec.shdr.sh_offset, sec.shdr.sh_size, size);
        if (!sec.in_file && i == shstrndx)
            fail(f, "section-range", "section [" + std::to_string(i) + "] (.shstrtab)", sec.header_offset,
                 past_end("sh_offset", sec.shdr.sh_offset, "sh_size", sec.shdr.sh_size, size));
        out.sections.push_back(sec);
    }
    for (auto& sec : out.sections) {
        if (sec.index == 0) continue;
        const char* name = elf_strptr(elf.get(), shstrndx, sec.shdr.sh_name);
        if (!name)
            fail(f, "section-range", "section [" + std::to_string(sec.index) + "]", sec.header_offset,
                 "sh_name " + hex(sec.shdr.sh_name) + " is outside the section name table");
        sec.name.assign(name, strnlen(name, kMaxSectionName + 1));
        if (!sec.in_file)
            list.add({"section-range", sec.structure(), sec.header_offset,
                      past_end("sh_offset", sec.shdr.sh_offset, "sh_size", sec.shdr.sh_size, size)});
    }
    list.finish();
    return out;
}

}  // namespace xendump::reader
