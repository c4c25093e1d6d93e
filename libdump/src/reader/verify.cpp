// The structural conformance checks of xen-dump-core(5) "Conformance" (digests: digest.cpp). Each
// Finding carries a short stable check name, the structure and its offset.
#include <algorithm>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "reader/check_error.hpp"
#include "reader/checked.hpp"
#include "reader/reader_impl.hpp"
#include "util/runs.hpp"
#include "xendump/kernel/guest_memory.hpp"

namespace xendump::reader {

namespace {

using util::kPage;

class Checker {
public:
    Checker(const DumpReader::Impl& d) : d_(d) {}
    std::vector<Finding> run();

private:
    void add(const char* check, const std::string& structure, uint64_t offset, std::string msg) {
        list_.add({check, structure, offset, std::move(msg)});
    }
    const Note* header_note() const {
        return d_.format == FileFormat::v1 ? d_.notes.find(format::kNameXenCore, format::kNtXenHeader)
                                           : d_.notes.find(format::kNameXen, format::kNoteDumpcoreHeader);
    }
    uint64_t table_entry_offset(uint64_t i) const { return d_.table_offset + i * d_.table_entry_size; }
    void check_phoff();
    void check_counts();
    void check_table();
    void check_header_notes();
    void check_segments();
    void check_kernel_image_segment(const Segment& s);
    void check_sections_v1();
    void check_section(const char* name, uint64_t offset, uint64_t size, uint32_t type, uint64_t entsize);
    void check_pfn_array();
    void check_vcpus();
    void check_section_names();
    void check_trailer();

    const DumpReader::Impl& d_;
    std::vector<Finding> out_;
    FindingList list_{out_};  // a bounded number of findings per check
};

// xen-dump-core(5) "ELF header" puts the program headers right after the ELF header;
// xen-dump-core(5) also allows a PV guest's right after the section header
// table, where the writer puts them so that crash reads the file through its
// Xen dump reader (see writer::program_headers_at_end).
void Checker::check_phoff() {
    const Elf64_Ehdr& eh = d_.elf.ehdr;
    const uint64_t after_shdrs = eh.e_shoff + d_.elf.shnum * sizeof(Elf64_Shdr);
    const bool pv = d_.type == format::GuestType::pv;
    if (eh.e_phoff == sizeof(Elf64_Ehdr) || (pv && eh.e_shoff != 0 && eh.e_phoff == after_shdrs)) return;
    add("phoff-range", "ELF header", offsetof(Elf64_Ehdr, e_phoff),
        "e_phoff is " + hex(eh.e_phoff) + "; the program headers follow the ELF header (0x40)" +
            (pv ? " or, for a PV guest, the section header table (" + hex(after_shdrs) + ")" : std::string()));
}

std::vector<Finding> Checker::run() {
    if (d_.format == FileFormat::v1) check_phoff();
    check_counts();
    check_table();
    check_vcpus();
    check_section_names();
    if (d_.format == FileFormat::v1) {
        check_header_notes();
        check_segments();
        check_sections_v1();
        check_trailer();
    } else if (d_.pages_offset % kPage != 0) {
        const Section* s = d_.elf.find(".xen_pages");
        add("section-placement", s->structure(), s->header_offset,
            "sh_offset " + hex(d_.pages_offset) + " is not page-aligned");
    }
    list_.finish();
    return std::move(out_);
}

// nr_pages: header note == table length == .xen_pages size (== NR_PAGES=).
void Checker::check_counts() {
    const Note* h = header_note();
    const uint64_t nr = d_.header.xch_nr_pages;
    const uint64_t at = h->desc_offset + offsetof(format::HeaderDesc, xch_nr_pages);
    if (nr != d_.table_raw_count)
        add("nr-pages-mismatch", "header note", at,
            "nr_pages is " + std::to_string(nr) + " but the " + d_.table_structure + " has " +
                std::to_string(d_.table_raw_count) + " entries");
    const Section* ps = d_.elf.find(".xen_pages");
    if (d_.pages_size % kPage != 0 || d_.pages_size / kPage != d_.table_raw_count)
        add("nr-pages-mismatch", ps->structure(), ps->header_offset,
            "sh_size " + hex(d_.pages_size) + " is not " + std::to_string(d_.table_raw_count) +
                " pages (the table's length)");
    if (auto v = d_.domain.get(keys::kNrPages); v && *v != std::to_string(d_.table_raw_count)) {
        const Note* dn = d_.notes.find(format::kNameXenCore, format::kNtXenDomain);
        add("nr-pages-mismatch", "NT_XEN_DOMAIN note", dn->offset,
            "NR_PAGES=" + *v + " but the table has " + std::to_string(d_.table_raw_count) + " entries");
    }
}

// One pass over the table, a window at a time; duplicate gmfns (PV) from
// the gmfn extents (reader_impl.hpp), not from a copy of the table.
void Checker::check_table() {
    const bool pv = d_.type == format::GuestType::pv;
    bool order_reported = false, identity_reported = false;
    PageEntry prev{};
    d_.table.scan([&](uint64_t i, const PageEntry& e) {
        if (i > 0 && !order_reported && e.pfn <= prev.pfn) {
            add("table-order", d_.table_structure, table_entry_offset(i),
                "entry " + std::to_string(i) + " has pfn " + hex(e.pfn) + ", not above the previous entry's " +
                    hex(prev.pfn));
            order_reported = true;
        }
        if (!pv && !identity_reported && e.gmfn != e.pfn) {
            add("hvm-gmfn-identity", d_.table_structure, table_entry_offset(i),
                "entry " + std::to_string(i) + " has gmfn " + hex(e.gmfn) + " != pfn " + hex(e.pfn) +
                    " in an HVM/PVH dump");
            identity_reported = true;
        }
        prev = e;
        return !(order_reported && (pv || identity_reported));
    });
    if (!pv) return;
    // Sorted by gmfn, extents are disjoint unless a gmfn repeats: the first
    // extent that starts below the end of one before it holds the smallest
    // repeated gmfn.
    const auto& x = d_.gmfn_extents();
    for (size_t k = 1; k < x.size(); ++k) {
        if (x[k].gmfn >= x[k - 1].end_max) continue;
        const uint64_t g = x[k].gmfn;
        // The two lowest entry indices holding g, among the extents that reach it.
        std::vector<uint64_t> holders;
        for (size_t j = k + 1; j-- > 0;) {
            if (g - x[j].gmfn < x[j].count) holders.push_back(x[j].index + (g - x[j].gmfn));
            if (j > 0 && x[j - 1].end_max <= g) break;
        }
        std::sort(holders.begin(), holders.end());
        const uint64_t first = holders[0], second = holders[1];
        add("gmfn-duplicate", d_.table_structure, table_entry_offset(second),
            "entry " + std::to_string(second) + " (pfn " + hex(d_.pfn_of_index(second)) + ") has gmfn " + hex(g) +
                ", already used by entry " + std::to_string(first) + " (pfn " + hex(d_.pfn_of_index(first)) + ")");
        break;
    }
}

// Notes 2 and 5 carry the same header (xen-dump-core(5) "Notes"); note 4 says version 1.
void Checker::check_header_notes() {
    const Note* core = header_note();
    const Note* xen = d_.notes.find(format::kNameXen, format::kNoteDumpcoreHeader);
    if (!xen)
        add("header-notes-agree", "note segment", d_.notes_offset, "there is no Xen DUMPCORE_HEADER note");
    else if (xen->desc.size() != core->desc.size() ||
             std::memcmp(xen->desc.data(), core->desc.data(), core->desc.size()) != 0)
        add("header-notes-agree", "DUMPCORE_HEADER note", xen->offset,
            "its descriptor differs from the NT_XEN_HEADER note at " + hex(core->offset));
    const Note* fv = d_.notes.find(format::kNameXen, format::kNoteDumpcoreFormatVersion);
    uint64_t v = 0;
    if (fv && fv->desc.size() >= 8) std::memcpy(&v, fv->desc.data(), 8);
    if (!fv || v != format::kDumpcoreFormatVersion)
        add("format-version", "DUMPCORE_FORMAT_VERSION note", fv ? fv->offset : d_.notes_offset,
            fv ? "format version is " + hex(v) + ", expected 1" : "there is no DUMPCORE_FORMAT_VERSION note");
    if (!d_.notes.find(format::kNameXenCore, format::kNtXenDomain))
        add("notes-parse", "note segment", d_.notes_offset, "there is no NT_XEN_DOMAIN note");
}

// xen-dump-core(5) "Program headers": PT_NOTE first and alone; then one PT_LOAD per maximal run
// (p_vaddr 0); xen-dump-core(5) lets the last one be the guest kernel's image
// mapping instead (p_vaddr in the kernel image region), over bytes of a run.
void Checker::check_segments() {
    const auto& segs = d_.elf.segments;
    if (segs[0].phdr.p_type != PT_NOTE)
        add("ptnote-first", segs[0].structure(), segs[0].header_offset,
            "the first program header has p_type " + hex(segs[0].phdr.p_type) + ", not PT_NOTE");
    std::vector<const Segment*> loads;
    for (size_t i = 1; i < segs.size(); ++i) {
        const auto& s = segs[i];
        if (s.phdr.p_type == PT_LOAD && s.phdr.p_vaddr != 0 && i + 1 == segs.size() && i > 1)
            check_kernel_image_segment(s);
        else if (s.phdr.p_type == PT_LOAD)
            loads.push_back(&s);
        else if (s.phdr.p_type == PT_NOTE)
            add("ptnote-first", s.structure(), s.header_offset,
                "a second PT_NOTE: readers that take every later program header for PT_LOAD would read it as memory");
        else
            add("load-runs", s.structure(), s.header_offset,
                "p_type " + hex(s.phdr.p_type) + " after the PT_NOTE; only PT_LOADs may follow");
    }
    // The table's runs (the reader may have taken its runs from these very
    // PT_LOADs: open.cpp runs_from_loads).
    const std::vector<PageRun> runs = runs_of_table(d_);
    for (size_t i = 0; i < std::min(loads.size(), runs.size()); ++i) {
        const Segment& s = *loads[i];
        const PageRun& r = runs[i];
        const auto& p = s.phdr;
        if (p.p_paddr != r.first_pfn * kPage || p.p_filesz != r.count * kPage || p.p_memsz != p.p_filesz ||
            p.p_vaddr != 0) {
            add("load-runs", s.structure(), s.header_offset,
                "PT_LOAD p_paddr " + hex(p.p_paddr) + " p_vaddr " + hex(p.p_vaddr) + " p_filesz " + hex(p.p_filesz) +
                    " p_memsz " + hex(p.p_memsz) + " is not run " + std::to_string(i) + " of the table (pfn " +
                    hex(r.first_pfn) + ", " + std::to_string(r.count) + " pages, p_vaddr 0)");
            return;  // later segments are shifted too: one finding says it
        }
        if (p.p_offset != r.file_offset)
            add("load-offset", s.structure(), s.header_offset,
                "p_offset " + hex(p.p_offset) + " is not the slot of pfn " + hex(r.first_pfn) + " (" +
                    hex(r.file_offset) + ")");
    }
    if (loads.size() != runs.size()) {
        const Segment* at = loads.size() > runs.size() ? loads[runs.size()] : nullptr;
        add("load-runs", at ? at->structure() : "ELF header", at ? at->header_offset : offsetof(Elf64_Ehdr, e_phnum),
            std::to_string(loads.size()) + " PT_LOADs for " + std::to_string(runs.size()) +
                " maximal runs of present pfns");
    }
}

void Checker::check_kernel_image_segment(const Segment& s) {
    const auto& p = s.phdr;
    auto bad = [&](const std::string& why) {
        add("load-kernel-image", s.structure(), s.header_offset,
            "PT_LOAD p_vaddr " + hex(p.p_vaddr) + " p_paddr " + hex(p.p_paddr) + " p_filesz " + hex(p.p_filesz) +
                ": " + why);
    };
    if (p.p_vaddr < kernel::kStartKernelMap || p.p_vaddr % kPage || p.p_paddr % kPage)
        return bad("a kernel image segment starts page-aligned at or above " + hex(kernel::kStartKernelMap));
    if (p.p_filesz == 0 || p.p_filesz % kPage || p.p_memsz != p.p_filesz)
        return bad("p_filesz must be a non-zero number of pages and equal p_memsz");
    const uint64_t pfn = p.p_paddr / kPage, pages = p.p_filesz / kPage;
    const auto& runs = d_.runs;
    const auto it = util::run_at_or_before(runs, pfn, &PageRun::first_pfn);
    if (it == runs.end()) return bad("its pages are not in the dump");
    if (pfn - it->first_pfn >= it->count || pages > it->count - (pfn - it->first_pfn))
        return bad("its pages are not one run of present pfns");
    const uint64_t want = it->file_offset + (pfn - it->first_pfn) * kPage;
    if (p.p_offset != want) bad("p_offset " + hex(p.p_offset) + " is not the slot of pfn " + hex(pfn) + " (" + hex(want) + ")");
}

void Checker::check_section(const char* name, uint64_t offset, uint64_t size, uint32_t type, uint64_t entsize) {
    const Section* s = d_.elf.find(name);
    if (!s) {
        add("section-placement", "section headers", d_.elf.ehdr.e_shoff, std::string("there is no ") + name + " section");
        return;
    }
    const auto& h = s->shdr;
    if (h.sh_offset != offset || h.sh_size != size)
        add("section-placement", s->structure(), s->header_offset,
            "points at " + hex(h.sh_offset) + " (+" + hex(h.sh_size) + "), expected " + hex(offset) + " (+" +
                hex(size) + ")");
    else if (h.sh_type != type || h.sh_entsize != entsize)
        add("section-placement", s->structure(), s->header_offset,
            "sh_type " + std::to_string(h.sh_type) + " sh_entsize " + std::to_string(h.sh_entsize) +
                ", expected " + std::to_string(type) + " and " + std::to_string(entsize));
}

// xen-dump-core(5) "Sections"/xen-dump-core(5) "Layout": the sections point into the notes, the pages and the table.
void Checker::check_sections_v1() {
    const auto& n = d_.notes.notes;
    static constexpr uint32_t kXenTypes[4] = {format::kNoteDumpcoreNone, format::kNoteDumpcoreHeader,
                                              format::kNoteDumpcoreXenVersion, format::kNoteDumpcoreFormatVersion};
    bool xen_first = n.size() >= 4;
    for (size_t i = 0; xen_first && i < 4; ++i) xen_first = n[i].name == format::kNameXen && n[i].type == kXenTypes[i];
    if (!xen_first)
        add("section-placement", "note segment", d_.notes_offset,
            "the segment does not start with the four Xen notes that .note.Xen covers");
    else
        check_section(".note.Xen", d_.notes_offset, n[3].end_offset - d_.notes_offset, SHT_NOTE, 0);
    if (const Note* pr = d_.notes.find(format::kNameXenCore, format::kNtXenPrstatus))
        check_section(".xen_prstatus", pr->desc_offset, pr->desc.size(), SHT_PROGBITS, format::kVcpuSlotSize);
    if (const Note* si = d_.notes.find(format::kNameXenCore, format::kNtXenSharedInfo))
        check_section(".xen_shared_info", si->desc_offset, si->desc.size(), SHT_PROGBITS, format::kSharedInfoSize);

    const Section* ps = d_.elf.find(".xen_pages");
    const uint64_t notes_end = d_.notes_offset + d_.notes_size;
    if (d_.pages_offset % kPage != 0 || d_.pages_offset < notes_end)
        add("section-placement", ps->structure(), ps->header_offset,
            "sh_offset " + hex(d_.pages_offset) + " must be page-aligned and after the note segment (ends at " +
                hex(notes_end) + ")");
    const Section* ts = d_.elf.find(".note.xen_p2m");
    const uint64_t pages_end = d_.pages_offset + d_.pages_size;
    // xen-dump-core(5) "The PFN->GMFN table"/xen-dump-core(5) "Layout": the note follows the pages and its descriptor is page-aligned,
    // so its header sits at the end of the padding page after the page data.
    if (ts->shdr.sh_offset < pages_end || d_.table_offset % kPage != 0 || d_.table_offset - pages_end > kPage)
        add("section-placement", ts->structure(), ts->header_offset,
            "the table note at " + hex(ts->shdr.sh_offset) + " must follow the pages (end " + hex(pages_end) +
                ") with its descriptor (at " + hex(d_.table_offset) + ") on the next page boundary");
    if (d_.type == format::GuestType::pv)
        check_section(".xen_p2m", d_.table_offset, d_.table_size, SHT_PROGBITS, sizeof(PageEntry));
    else
        check_pfn_array();
    if (const Section* tr = d_.elf.find(".note.xen_trailer"); tr && tr->shdr.sh_type != SHT_NOTE)
        add("section-placement", tr->structure(), tr->header_offset, "sh_type is not SHT_NOTE");
}

// xen-dump-core(5) "Sections": v1 has exactly the sections of the table, each once. A section
// whose name was changed hides what it holds from a reader that looks it up
// by name (a renamed .note.xen_trailer hides the digests), so every other
// name is reported. Xen's own files have no such list, but a v1 section in
// one is a v1 dump whose program headers were taken away.
void Checker::check_section_names() {
    static constexpr std::string_view kV1[] = {".shstrtab",  ".note.Xen",     ".xen_prstatus",
                                               ".xen_shared_info", ".xen_pages", ".note.xen_p2m",
                                               ".xen_p2m",   ".xen_pfn",      ".note.xen_trailer"};
    static constexpr std::string_view kV1Only[] = {".note.xen_p2m", ".note.xen_trailer"};
    const auto& secs = d_.elf.sections;
    std::unordered_map<std::string_view, size_t> first;  // name -> index: linear in the sections
    for (size_t i = 1; i < secs.size(); ++i) {
        const Section& s = secs[i];
        if (auto [it, fresh] = first.try_emplace(s.name, i); !fresh)
            add("section-names", s.structure(), s.header_offset,
                "a second section named " + quote_name(s.name) + " (the first is section [" +
                    std::to_string(it->second) + "]): a reader finds only the first");
        const auto known = [&s](const auto& list) { return std::find(std::begin(list), std::end(list), s.name) != std::end(list); };
        if (d_.format == FileFormat::v1 && !known(kV1))
            add("section-names", "section [" + std::to_string(i) + "]", s.header_offset,
                "name " + quote_name(s.name) + " is not a section of the format: a renamed section hides what it holds");
        else if (d_.format == FileFormat::xen_elf && known(kV1Only))
            add("format-detect", s.structure(), s.header_offset,
                "a v1 section in a file without program headers (a v1 dump whose program headers are gone?)");
    }
}

// xen-dump-core(5) "Trailer notes": v1 has two trailer layouts, told apart
// by the file itself. The specification's first (a padding note nowhere):
// NT_XEN_DIGEST and NT_XEN_UNREADABLE, each when written, in that order,
// exactly filling the section, and no section when both are absent. Today's
// reserved room (the last note is a padding note): the digest note, then
// room for an NT_XEN_UNREADABLE of every page, holding the real one and a
// padding note. Either way the trailer follows the table (and .xen_pfn) and
// .shstrtab follows the trailer ("Layout"), so no bytes lie between them
// that no section names. What is not accepted is a file that contradicts
// itself: trailer bytes without their section (renamed or left out), a
// trailer section sized for digests that holds none, a note shaped like a
// digest note under another name or type, notes out of this order. Those
// may be a digest note hidden so that the file looks as if written without
// digests, whose pages nothing checks: reported, whatever the options.
void Checker::check_trailer() {
    const uint64_t n = d_.table_raw_count;  // < file size / 16: the sums below cannot overflow
    const uint64_t want_offset = d_.table_offset + d_.table_size + (d_.type == format::GuestType::pv ? 0 : 8 * n);
    const Section* tr = d_.elf.find(".note.xen_trailer");
    const Section* names = d_.elf.find(".shstrtab");
    if (!tr) {
        if (names && names->shdr.sh_offset == want_offset) return;  // the first layout, neither note written
        add("trailer-placement", "section headers", d_.elf.ehdr.e_shoff,
            "there is no .note.xen_trailer section, yet .shstrtab is at " +
                (names ? hex(names->shdr.sh_offset) : std::string("no offset (there is none)")) +
                ", not right after the table (" + hex(want_offset) +
                "): the bytes where a trailer stands have no section, so the digests (and the list of unreadable "
                "pages) cannot be found");
        return;
    }
    const auto& h = tr->shdr;
    const auto& notes = d_.trailer.notes;
    const bool reserved_room =
        !notes.empty() && notes.back().name == format::kNameXenCore && notes.back().type == format::kNtXenPadding;
    const uint64_t digest_size = d_.digest ? d_.digest->end_offset - d_.digest->offset : 0;
    const uint64_t reserved = 24 + 8 + 8 * n + 24;
    if (h.sh_offset != want_offset || (reserved_room && h.sh_size != reserved + digest_size)) {
        std::string why = "points at " + hex(h.sh_offset) + " (+" + hex(h.sh_size) + "), expected " + hex(want_offset);
        if (reserved_room) {
            const uint64_t chunks = (n + format::kDigestChunkPages - 1) / format::kDigestChunkPages;
            const uint64_t spec_digest_size = 24 + sizeof(format::DigestDescHead) + 16 * (chunks + 2);
            why += " (+" + hex(reserved + digest_size) + ": it ends with a padding note, so " +
                   (d_.digest ? "the digest note, " : std::string("no digest note, ")) + "then room for " +
                   std::to_string(n) + " unreadable pfns and a padding note)";
            if (!d_.digest && h.sh_size == reserved + spec_digest_size)
                why += "; it has the size of a trailer with digests, but no NT_XEN_DIGEST note";
        } else {
            why += ", right after the table";
        }
        add("trailer-placement", tr->structure(), tr->header_offset, why);
    }
    if (d_.trailer.error) return;  // reported at open; the notes after it are unknown
    if (!names || h.sh_offset + h.sh_size != names->shdr.sh_offset)
        add("trailer-placement", tr->structure(), tr->header_offset,
            "the trailer ends at " + hex(h.sh_offset + h.sh_size) + " but .shstrtab starts at " +
                (names ? hex(names->shdr.sh_offset) : std::string("no offset (there is none)")) +
                ": .shstrtab follows the trailer, and bytes between them that no section names may be a note cut "
                "off the trailer");
    std::vector<uint64_t> reported;  // notes already named
    for (const Note& note : notes) {
        if (&note == d_.digest || note.desc_size < sizeof(format::DigestDescHead)) continue;
        format::DigestDescHead head{};
        d_.file->read_exact(note.desc_offset, std::as_writable_bytes(std::span(&head, 1)), tr->structure());
        if (head.algorithm != format::kDigestXxh3_128 || head.chunk_pages == 0) continue;
        const uint64_t chunks = (n + head.chunk_pages - 1) / head.chunk_pages;
        if (note.desc_size != sizeof head + 16 * (chunks + 2)) continue;
        add("trailer-notes", tr->structure(), note.offset,
            "note " + quote_name(note.name) + " type " + std::to_string(note.type) + " at " + hex(note.offset) +
                " is shaped like an NT_XEN_DIGEST note (algorithm 1, " + std::to_string(head.chunk_pages) +
                " pages a chunk, " + std::to_string(chunks + 2) +
                " digests): a digest note whose name or type was changed is not recognised as one");
        reported.push_back(note.offset);
    }
    size_t i = 0;
    auto next_is = [&](uint32_t type) {
        const bool yes = i < notes.size() && notes[i].name == format::kNameXenCore && notes[i].type == type;
        if (yes) ++i;
        return yes;
    };
    next_is(format::kNtXenDigest);
    next_is(format::kNtXenUnreadable);
    if (reserved_room) next_is(format::kNtXenPadding);
    if (i < notes.size() && std::find(reported.begin(), reported.end(), notes[i].offset) == reported.end())
        add("trailer-notes", tr->structure(), notes[i].offset,
            "note " + quote_name(notes[i].name) + " type " + std::to_string(notes[i].type) + " at " +
                hex(notes[i].offset) +
                " is not what a trailer holds here: NT_XEN_DIGEST, NT_XEN_UNREADABLE (\"XEN CORE\" types 12, 13), "
                "each at most once, in this order, then, in the reserved-room layout, one padding note (type 14), "
                "last; a digest note whose name or type was changed is not recognised as one");
}

// xen-dump-core(5) "Page data": HVM/PVH keep Xen's .xen_pfn array, the table's pfns in order.
void Checker::check_pfn_array() {
    const Section* s = d_.elf.find(".xen_pfn");
    const uint64_t n = d_.nr_entries();
    if (!s || s->shdr.sh_size != n * 8 || !s->in_file) {
        add("section-placement", s ? s->structure() : "section headers", s ? s->header_offset : d_.elf.ehdr.e_shoff,
            s ? "sh_size " + hex(s->shdr.sh_size) + " is not 8 bytes per table entry" : "there is no .xen_pfn section");
        return;
    }
    // Both arrays a window at a time.
    std::vector<uint64_t> pfns(static_cast<size_t>(std::min<uint64_t>(n, TableOnDisk::kWindow)));
    d_.table.scan([&](uint64_t i, const PageEntry& e) {
        const uint64_t k = i % TableOnDisk::kWindow;
        if (k == 0) {
            const uint64_t count = std::min<uint64_t>(pfns.size(), n - i);
            d_.file->read_exact(s->shdr.sh_offset + i * 8, std::as_writable_bytes(std::span(pfns).first(count)),
                                s->structure());
        }
        if (pfns[k] != e.pfn) {
            add("pfn-array", s->structure(), s->shdr.sh_offset + i * 8,
                "entry " + std::to_string(i) + " is pfn " + hex(pfns[k]) + ", the table says " + hex(e.pfn));
            return false;
        }
        return true;
    });
}

void Checker::check_vcpus() {
    const uint64_t want = d_.header.xch_nr_vcpus;
    if (d_.vcpus.size() == want) {
        if (auto v = d_.domain.get(keys::kVcpus)) {
            size_t listed = v->empty() ? 0 : 1 + static_cast<size_t>(std::count(v->begin(), v->end(), ','));
            if (listed != want) {
                const Note* dn = d_.notes.find(format::kNameXenCore, format::kNtXenDomain);
                add("vcpu-count", "NT_XEN_DOMAIN note", dn->offset,
                    "VCPUS=" + *v + " lists " + std::to_string(listed) + " vcpus, the header says " + std::to_string(want));
            }
        }
        return;
    }
    if (d_.format == FileFormat::v1) {
        const Note* pr = d_.notes.find(format::kNameXenCore, format::kNtXenPrstatus);
        add("vcpu-count", "NT_XEN_PRSTATUS note", pr ? pr->offset : d_.notes_offset,
            "holds " + std::to_string(d_.vcpus.size()) + " vcpu slots, the header says " + std::to_string(want));
    } else {
        const Section* s = d_.elf.find(".xen_prstatus");
        add("vcpu-count", s ? s->structure() : "section headers", s ? s->header_offset : d_.elf.ehdr.e_shoff,
            "holds " + std::to_string(d_.vcpus.size()) + " vcpu contexts, the header says " + std::to_string(want));
    }
}

}  // namespace

std::vector<Finding> run_checks(const DumpReader::Impl& d, const VerifyOptions&) { return Checker(d).run(); }

Finding digests_absent(const DumpReader::Impl& d) {
    if (d.format == FileFormat::kdump)
        return {"digests-absent", "note area", d.notes_offset,
                "there is no NT_XEN_DIGEST note in the note area (written without digests?): the pages, notes and "
                "table cannot be checked"};
    if (d.format == FileFormat::xen_elf)
        return {"digests-absent", "section headers", d.elf.ehdr.e_shoff,
                "an xl dump-core file has no digests: its pages, notes and table cannot be checked"};
    const Section* tr = d.elf.find(".note.xen_trailer");
    return {"digests-absent", tr ? tr->structure() : "section headers", tr ? tr->header_offset : d.elf.ehdr.e_shoff,
            "there is no NT_XEN_DIGEST note in the trailer (written without digests?): the pages, notes and table "
            "cannot be checked"};
}

}  // namespace xendump::reader
