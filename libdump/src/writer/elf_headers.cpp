#include "writer/elf_headers.hpp"

#include <elf.h>

#include <cstring>

#include "elfcore/crash_info.hpp"
#include "elfcore/notes.hpp"
#include "elfcore/runs.hpp"
#include "util/util.hpp"

namespace xendump::writer {

using elfcore::NoteBuffer;
using elfcore::bytes_of;
using elfcore::for_each_run;
using elfcore::gmfn_of;
using elfcore::pfn_of;

namespace {

template <typename T>
void append(std::vector<std::byte>& out, const T& v) {
    auto b = bytes_of(v);
    out.insert(out.end(), b.begin(), b.end());
}

}  // namespace

std::vector<std::byte> elf_header(const DumpSpec& spec, const Layout& L, uint64_t phoff, uint64_t shoff,
                                  uint64_t shnum) {
    Elf64_Ehdr eh =
        util::core_elf_header((spec.type == format::GuestType::pv && spec.guest_width == 4) ? EM_386 : EM_X86_64);
    eh.e_phoff = phoff;
    eh.e_shoff = shoff;
    eh.e_phnum = static_cast<Elf64_Half>(L.phnum >= PN_XNUM ? PN_XNUM : L.phnum);
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = static_cast<Elf64_Half>(shnum);
    eh.e_shstrndx = 1;
    std::vector<std::byte> out;
    append(out, eh);
    return out;
}

namespace {

// A program header table of `size` bytes: PT_NOTE over `note_size` bytes at
// the note segment, one PT_LOAD per run of key (p_paddr key * 4096), zeros.
template <typename Key>
std::vector<std::byte> table(const PageSource& source, const Layout& L, uint64_t note_size, uint64_t size, Key key) {
    using util::kPage;
    std::vector<std::byte> out;
    out.reserve(size);
    Elf64_Phdr note{};
    note.p_type = PT_NOTE;
    note.p_offset = L.notes_offset;
    note.p_filesz = note.p_memsz = note_size;
    // 4: the notes use the standard layout (names padded to 4); with 8 some
    // readers would apply 8-byte note rules and misplace "CORE" descriptors.
    note.p_align = 4;
    append(out, note);
    for_each_run(source, key, [&](uint64_t i, uint64_t first_key, uint64_t count) {
        Elf64_Phdr load{};
        load.p_type = PT_LOAD;
        load.p_flags = PF_R | PF_W | PF_X;
        load.p_offset = L.pages_offset + i * kPage;
        load.p_paddr = first_key * kPage;
        load.p_vaddr = 0;
        load.p_filesz = load.p_memsz = count * kPage;
        load.p_align = 0;  // as the kernel's /proc/vmcore: crash then reads KERNELOFFSET (xen-dump-core(5))
        append(out, load);
    });
    out.resize(size);  // the kernel image header's room, or PT_NULLs: zeros
    return out;
}

// XEN_ELFNOTE_CRASH_INFO as makedumpfile reads it on x86_64 (xen_crash_info_t):
// eight words (Xen's major and minor version, then changeset, compiler,
// dates and taint, 0 here: no Xen host crashed), then
// dom0_pfn_to_mfn_frame_list_list, the guest's. It refuses fewer than eight
// words; the compact format's three-word note (crash reads the last word)
// would not do.
struct CrashInfoX8664 {
    uint64_t common[8];
    uint64_t pfn_to_mfn_frame_list_list;
};
static_assert(sizeof(CrashInfoX8664) == 72);

}  // namespace


std::vector<std::byte> program_headers(const PageSource& source, const Layout& L, uint64_t size) {
    return table(source, L, L.notes_size, size, pfn_of);
}

std::optional<MachineView> machine_view(const DumpSpec& spec, const PageSource& source) {
    const std::optional<uint64_t> fll = elfcore::p2m_frame_list_list(spec);  // 64-bit PV guests only
    if (!fll || source.nr_entries() == 0) return std::nullopt;
    MachineView v;
    for_each_run(source, gmfn_of, [&](uint64_t, uint64_t, uint64_t) { ++v.loads; });
    CrashInfoX8664 info{};
    info.common[0] = spec.xen_version.major_version;
    info.common[1] = spec.xen_version.minor_version;
    info.pfn_to_mfn_frame_list_list = *fll;
    NoteBuffer note;
    note.add(format::kNameXen, elfcore::kXenElfnoteCrashInfo, bytes_of(info));
    v.note = note.bytes();
    return v;
}

std::vector<std::byte> machine_view_headers(const PageSource& source, const Layout& L, const MachineView& view,
                                            uint64_t size) {
    // The PT_NOTE covers the crash info note after the segment too.
    return table(source, L, L.notes_size + view.note.size(), size, gmfn_of);
}

}  // namespace xendump::writer
