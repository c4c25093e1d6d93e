// DumpReader::open: decides v1 or xen_elf from the bytes, then loads the
// notes, the PFN->GMFN table and the page data location. Problems that make
// the file unusable throw CheckError; the rest become findings for verify().
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "age/age.hpp"
#include "io/random_access.hpp"
#include "store/object_reader.hpp"
#include "reader/check_error.hpp"
#include "reader/checked.hpp"
#include "reader/reader_impl.hpp"
#include "util/runs.hpp"
#include "kdump/kdump_file.hpp"

namespace xendump {

using namespace reader;

namespace {

// The note segment is read whole at open (xen-dump-core(5) "Notes": kilobytes in practice).
constexpr uint64_t kMaxNoteSegment = 256ull << 20;
// The trailer holds NT_XEN_DIGEST, NT_XEN_UNREADABLE and (the reserved-room
// layout, xen-dump-core(5) "Trailer notes") one padding note.
constexpr size_t kMaxTrailerNotes = 16;
constexpr uint64_t kAllOnes = ~uint64_t{0};

class Loader {
public:
    explicit Loader(DumpReader::Impl& d) : d_(d) {}

    void load();
    void load_kdump();

private:
    [[noreturn]] void fail(const char* check, const std::string& structure, uint64_t offset,
                           const std::string& msg) const {
        throw CheckError(Finding{check, structure, offset, msg}, d_.file_name());
    }
    const Section& required_section(const char* name) const;
    NoteList read_note_bytes(uint64_t offset, uint64_t size, const std::string& structure) const;
    void load_header(const Note* note, const std::string& where);
    void load_v1();
    void load_v1_notes();
    void load_xen_elf();
    void load_v1_table();
    void load_table_array(const Section& s, bool pairs);
    void load_pages();
    void load_vcpus_v1();
    void load_vcpus_xen_elf();
    void load_trailer();
    void load_unreadable(const Note* note);
    void build_runs();
    bool runs_from_loads();

    DumpReader::Impl& d_;
};

const Section& Loader::required_section(const char* name) const {
    const Section* s = d_.elf.find(name);
    if (!s)
        fail("section-placement", "section headers", d_.elf.ehdr.e_shoff,
             std::string("there is no ") + name + " section");
    if (!s->in_file)
        fail("section-range", s->structure(), s->header_offset,
             past_end("sh_offset", s->shdr.sh_offset, "sh_size", s->shdr.sh_size, d_.file->size()));
    return *s;
}

NoteList Loader::read_note_bytes(uint64_t offset, uint64_t size, const std::string& structure) const {
    if (size > kMaxNoteSegment)
        fail("notes-parse", structure, offset,
             "notes are " + hex(size) + " bytes, more than a reader loads (" + hex(kMaxNoteSegment) + ")");
    auto bytes = d_.file->read_bytes(offset, size, structure);
    return parse_notes(bytes, offset, structure);
}

void Loader::load_header(const Note* note, const std::string& where) {
    if (!note) {
        if (d_.notes.error) throw CheckError(*d_.notes.error, d_.file_name());
        fail("notes-parse", where, d_.notes_offset, "there is no header note (DUMPCORE_HEADER / NT_XEN_HEADER)");
    }
    if (note->desc.size() < sizeof(format::HeaderDesc))
        fail("notes-parse", "header note", note->offset,
             "descriptor is " + std::to_string(note->desc.size()) + " bytes, expected 32");
    std::memcpy(&d_.header, note->desc.data(), sizeof d_.header);
    if (d_.header.xch_magic == format::kMagicPV)
        d_.type = format::GuestType::pv;
    else if (d_.header.xch_magic == format::kMagicHVM)
        d_.type = format::GuestType::hvm;
    else
        fail("header-magic", "header note", note->desc_offset,
             "xch_magic " + hex(d_.header.xch_magic) + " is neither 0xf00febed (PV) nor 0xf00febee (HVM/PVH)");
    if (d_.header.xch_page_size != format::kPageSize)
        fail("page-size", "header note", note->desc_offset + offsetof(format::HeaderDesc, xch_page_size),
             "page size " + std::to_string(d_.header.xch_page_size) + " is not 4096 (x86)");
    if (const Note* v = d_.notes.find(format::kNameXen, format::kNoteDumpcoreXenVersion))
        std::memcpy(&d_.xen_version, v->desc.data(), std::min(v->desc.size(), sizeof d_.xen_version));
    d_.guest_width = d_.elf.ehdr.e_machine == EM_386 ? 4 : 8;
}

void Loader::load() {
    // Decide from the bytes: a PT_NOTE holding "XEN CORE" notes is v1; no
    // program headers and a .note.Xen section is Xen's own format.
    const Segment* note_seg = nullptr;
    for (const auto& s : d_.elf.segments)
        if (s.phdr.p_type == PT_NOTE) {
            note_seg = &s;
            break;
        }
    if (note_seg) {
        if (!note_seg->in_file)
            fail("segment-range", note_seg->structure(), note_seg->header_offset,
                 past_end("p_offset", note_seg->phdr.p_offset, "p_filesz", note_seg->phdr.p_filesz, d_.file->size()));
        d_.note_segment = note_seg;
        d_.notes_offset = note_seg->phdr.p_offset;
        d_.notes_size = note_seg->phdr.p_filesz;
        d_.notes = read_note_bytes(d_.notes_offset, d_.notes_size, "note segment (" + note_seg->structure() + ")");
        if (d_.notes.find(format::kNameXenCore, format::kNtXenHeader) ||
            d_.notes.find(format::kNameXenCore, format::kNtXenDomain)) {
            d_.format = FileFormat::v1;
            load_v1();
            return;
        }
        if (d_.notes.error) throw CheckError(*d_.notes.error, d_.file_name());
        fail("format-detect", note_seg->structure(), note_seg->header_offset,
             "the note segment has no NT_XEN_HEADER or NT_XEN_DOMAIN note: not a Xen guest dump");
    }
    if (d_.elf.segments.empty() && d_.elf.find(".note.Xen")) {
        d_.format = FileFormat::xen_elf;
        load_xen_elf();
        return;
    }
    fail("format-detect", "ELF header", 0,
         "neither a v1 dump (PT_NOTE with Xen notes) nor an xl dump-core file (.note.Xen section)");
}

void Loader::load_v1() {
    const std::string where = "note segment (" + d_.note_segment->structure() + ")";
    load_header(d_.notes.find(format::kNameXenCore, format::kNtXenHeader), where);
    if (d_.notes.error) d_.open_findings.push_back(*d_.notes.error);
    load_v1_notes();
    load_v1_table();
    load_pages();
    load_trailer();
    if (!runs_from_loads()) build_runs();
}

// The notes a v1 note segment and a kdump note area share (xen-dump-core(5) "Notes").
void Loader::load_v1_notes() {
    if (const Note* dom = d_.notes.find(format::kNameXenCore, format::kNtXenDomain)) {
        std::string_view text(reinterpret_cast<const char*>(dom->desc.data()), dom->desc.size());
        d_.domain = KeyValues::parse(text);
    }
    if (auto t = d_.domain.get(keys::kType)) {
        try {
            d_.type = format::guest_type_from_string(*t);
        } catch (const Error&) {
            // Unknown TYPE= values leave the magic's answer; verify reports it.
        }
    }
    if (const Note* si = d_.notes.find(format::kNameXenCore, format::kNtXenSharedInfo)) d_.shared_info = si->desc;
    if (const Note* vi = d_.notes.find(format::kNameVmcoreinfo, format::kNtVmcoreinfo)) {
        std::string s(reinterpret_cast<const char*>(vi->desc.data()), vi->desc.size());
        s.erase(std::find(s.begin(), s.end(), '\0'), s.end());
        d_.vmcoreinfo = std::move(s);
    }
    load_vcpus_v1();
}

// A compact (kdump) file: the pages are those of the 2nd bitmap, the notes
// those of a v1 file (xen-dump-core(5), "The compact format"). Nothing is
// loaded that grows with the guest but the runs, as for v1 files: an HVM or
// PVH guest's table is made from the runs of the bitmap, a PV guest's is the
// NT_XEN_P2M note's descriptor, read where it lies.
void Loader::load_kdump() {
    auto k = std::make_shared<const kdump::KdumpFile>(d_.file);
    d_.kdump = k;
    d_.format = FileFormat::kdump;
    d_.notes = k->notes();
    d_.notes_offset = k->sub_header().offset_note;
    d_.notes_size = k->sub_header().size_note;
    const Note* header = d_.notes.find(format::kNameXenCore, format::kNtXenHeader);
    if (!header && !d_.notes.error)
        fail("format-detect", "note area", d_.notes_offset,
             "the kdump file's note area has no NT_XEN_HEADER note: not a Xen guest dump");
    load_header(header, "note area");
    if (d_.notes.error) d_.open_findings.push_back(*d_.notes.error);
    load_v1_notes();
    if (auto w = d_.domain.get(keys::kGuestWidth); w && *w == "4") d_.guest_width = 4;
    // The vcpus were read with the width of the header's machine; read again when 32-bit.
    if (d_.guest_width == 4) {
        d_.vcpus.clear();
        load_vcpus_v1();
    }
    const kdump::BitmapOnDisk& stored = k->stored_bitmap();
    const uint64_t n = stored.count();
    if (d_.type == format::GuestType::pv) {
        // Filed by machine frame: the table gives each pfn's frame, in pfn
        // order; its frames must be exactly the bitmap's.
        const Note* t = d_.notes.find(format::kNameXenCore, format::kNtXenP2m);
        if (!t) fail("kdump-table", "note area", d_.notes_offset, "a PV guest's kdump file has no NT_XEN_P2M note");
        if (t->desc_size != n * sizeof(PageEntry))
            fail("kdump-table", "NT_XEN_P2M note", t->offset,
                 "descsz " + std::to_string(t->desc_size) + " is not 16 bytes for each of the " + std::to_string(n) +
                     " stored pages");
        d_.table_structure = "NT_XEN_P2M note";
        d_.table_offset = t->desc_offset;
        d_.table_size = t->desc_size;
        d_.table = TableOnDisk(d_.file, d_.table_offset, n, sizeof(PageEntry), d_.table_structure);
        // One pass: pfns rise, and every frame is one the bitmap stores (with
        // as many entries as stored frames, a frame named twice leaves
        // another unnamed: verify finds that through the gmfn extents).
        uint64_t prev = 0;
        d_.table.scan([&](uint64_t i, const PageEntry& e) {
            if (i > 0 && e.pfn <= prev)
                fail("kdump-table", "NT_XEN_P2M note", d_.table_offset + i * sizeof(PageEntry),
                     "entry " + std::to_string(i) + ": pfns not strictly ascending");
            if (!stored.test(e.gmfn))
                fail("kdump-table", "NT_XEN_P2M note", d_.table_offset + i * sizeof(PageEntry),
                     "pfn " + hex(e.pfn) + "'s machine frame " + hex(e.gmfn) + " is not stored (2nd bitmap)");
            prev = e.pfn;
            return true;
        });
        build_runs();
    } else {
        // gmfn = pfn: the table is the bitmap's frames, made from its runs.
        d_.table_structure = "2nd bitmap";
        d_.table_offset = stored.offset();
        d_.table_size = stored.bytes();
        stored.scan([&](uint64_t pfn) {
            if (!d_.runs.empty() && d_.runs.back().first_pfn + d_.runs.back().count == pfn)
                ++d_.runs.back().count;
            else
                d_.runs.push_back({pfn, 1, 0, d_.runs.empty() ? 0 : d_.runs.back().first_index + d_.runs.back().count});
            return true;
        });
        const DumpReader::Impl* d = &d_;  // owns the table: lives as long
        d_.table = TableOnDisk(
            d_.file, n,
            [d](uint64_t first, std::span<PageEntry> out) {
                const auto& runs = d->runs;
                auto r = util::run_at_or_before(runs, first, &PageRun::first_index);
                for (size_t k = 0; k < out.size(); ++k) {
                    while (first + k - r->first_index >= r->count) ++r;  // the runs cover the table
                    const uint64_t pfn = r->first_pfn + (first + k - r->first_index);
                    out[k] = {pfn, pfn};
                }
            },
            d_.table_structure);
    }
    d_.table_raw_count = n;
    d_.digest = d_.notes.find(format::kNameXenCore, format::kNtXenDigest);
    load_unreadable(d_.notes.find(format::kNameXenCore, format::kNtXenUnreadable));
    for (auto& r : d_.runs) r.file_offset = 0;  // pages have no fixed offset: they are compressed
}

void Loader::load_xen_elf() {
    const Section& nx = required_section(".note.Xen");
    d_.notes_offset = nx.shdr.sh_offset;
    d_.notes_size = nx.shdr.sh_size;
    d_.notes = read_note_bytes(d_.notes_offset, d_.notes_size, nx.structure());
    load_header(d_.notes.find(format::kNameXen, format::kNoteDumpcoreHeader), nx.structure());
    if (d_.notes.error) d_.open_findings.push_back(*d_.notes.error);
    if (d_.type == format::GuestType::pv) {
        load_table_array(required_section(".xen_p2m"), true);
    } else {
        load_table_array(required_section(".xen_pfn"), false);
    }
    if (const Section* si = d_.elf.find(".xen_shared_info"); si && si->in_file)
        d_.shared_info = d_.file->read_bytes(si->shdr.sh_offset, std::min<uint64_t>(si->shdr.sh_size, format::kSharedInfoSize),
                                             si->structure());
    load_vcpus_xen_elf();
    load_pages();
    build_runs();
}

// v1 (xen-dump-core(5) "The PFN->GMFN table"): .note.xen_p2m is one note whose descriptor is the table.
void Loader::load_v1_table() {
    const Section& s = required_section(".note.xen_p2m");
    const std::string st = s.structure();
    if (s.shdr.sh_size < 12) fail("notes-parse", st, s.shdr.sh_offset, "section is too small for a note header");
    uint32_t head[3];
    d_.file->read_exact(s.shdr.sh_offset, std::as_writable_bytes(std::span(head)), st);
    if (head[0] != format::kNameXenCore.size() + 1)
        fail("notes-parse", st, s.shdr.sh_offset,
             "expected an NT_XEN_P2M note named \"XEN CORE\" (namesz 9), found namesz " + std::to_string(head[0]));
    uint64_t namesz_padded = (uint64_t{head[0]} + 3) & ~uint64_t{3};
    uint64_t desc_rel = 12 + namesz_padded;
    if (s.shdr.sh_size < desc_rel || s.shdr.sh_size - desc_rel < head[1])
        fail("notes-parse", st, s.shdr.sh_offset,
             "note (namesz " + std::to_string(head[0]) + ", descsz " + std::to_string(head[1]) +
                 ") runs past the end of its section (" + hex(s.shdr.sh_offset + s.shdr.sh_size) + ")");
    std::string name(static_cast<size_t>(head[0]), '\0');
    d_.file->read_exact(s.shdr.sh_offset + 12, std::as_writable_bytes(std::span(name)), st);
    name.erase(std::find(name.begin(), name.end(), '\0'), name.end());
    if (name != format::kNameXenCore || head[2] != format::kNtXenP2m)
        fail("notes-parse", st, s.shdr.sh_offset,
             "expected an NT_XEN_P2M note named \"XEN CORE\", found \"" + name + "\" type " + std::to_string(head[2]));
    if (head[1] % sizeof(PageEntry) != 0)
        fail("notes-parse", st, s.shdr.sh_offset,
             "NT_XEN_P2M descsz " + std::to_string(head[1]) + " is not a multiple of 16");
    d_.table_offset = s.shdr.sh_offset + desc_rel;
    d_.table_size = head[1];
    d_.table_structure = "PFN->GMFN table (" + st + ")";
    d_.table_raw_count = d_.table_size / sizeof(PageEntry);
    d_.table = TableOnDisk(d_.file, d_.table_offset, d_.table_raw_count, sizeof(PageEntry), d_.table_structure);
}

// xen_elf (doc/legacy-formats.md 2): .xen_p2m {pfn, gmfn} pairs or .xen_pfn u64 pfns;
// trailing all-ones entries pad the table and are dropped.
void Loader::load_table_array(const Section& s, bool pairs) {
    const uint64_t esize = pairs ? 16 : 8;
    if (s.shdr.sh_size % esize != 0)
        fail("section-placement", s.structure(), s.header_offset,
             "sh_size " + hex(s.shdr.sh_size) + " is not a multiple of " + std::to_string(esize));
    d_.table_offset = s.shdr.sh_offset;
    d_.table_size = s.shdr.sh_size;
    d_.table_entry_size = esize;
    d_.table_structure = "PFN->GMFN table (" + s.structure() + ")";
    const uint64_t n = s.shdr.sh_size / esize;
    d_.table_raw_count = n;
    d_.table = TableOnDisk(d_.file, d_.table_offset, n, esize, d_.table_structure);
    // Trailing all-ones entries: found from the end, one window at a time.
    uint64_t end = n;
    std::vector<PageEntry> w;
    while (end > 0) {
        const uint64_t from = end - std::min(end, TableOnDisk::kWindow);
        w.resize(static_cast<size_t>(end - from));
        d_.table.read(from, w);
        size_t k = w.size();
        while (k > 0 && w[k - 1].pfn == kAllOnes) --k;
        end = from + k;
        if (k > 0) break;
    }
    d_.table.truncate(end);
}

void Loader::load_pages() {
    const Section& s = required_section(".xen_pages");
    d_.pages_offset = s.shdr.sh_offset;
    d_.pages_size = s.shdr.sh_size;
}

std::vector<uint32_t> parse_vcpu_ids(const std::string& list) {
    std::vector<uint32_t> ids;
    size_t pos = 0;
    while (pos < list.size()) {
        size_t comma = list.find(',', pos);
        if (comma == std::string::npos) comma = list.size();
        uint32_t id = 0;
        auto [p, ec] = std::from_chars(list.data() + pos, list.data() + comma, id);
        if (ec != std::errc() || p != list.data() + comma) return {};
        ids.push_back(id);
        pos = comma + 1;
    }
    return ids;
}

// Note 9: nr_vcpus slots of 5168 bytes; a 32-bit guest uses the first 2800.
void Loader::load_vcpus_v1() {
    const Note* pr = d_.notes.find(format::kNameXenCore, format::kNtXenPrstatus);
    if (!pr) return;
    const size_t slots = pr->desc.size() / format::kVcpuSlotSize;
    std::vector<uint32_t> ids;
    if (auto v = d_.domain.get(keys::kVcpus)) ids = parse_vcpu_ids(*v);
    if (ids.size() != slots) {
        ids.clear();
        for (size_t i = 0; i < slots; ++i) ids.push_back(static_cast<uint32_t>(i));
    }
    const size_t ctx = d_.guest_width == 4 ? format::kVcpuContextSize32 : format::kVcpuContextSize64;
    for (size_t i = 0; i < slots; ++i) {
        auto first = pr->desc.begin() + static_cast<ptrdiff_t>(i * format::kVcpuSlotSize);
        d_.vcpus.push_back({ids[i], std::vector<std::byte>(first, first + static_cast<ptrdiff_t>(ctx))});
    }
}

// .xen_prstatus: header nr_vcpus contexts with stride sh_entsize; Xen does
// not record vcpu ids, so slot k is reported as vcpu k. Xen's stride is a
// whole vcpu_guest_context_any_t (5168): a smaller one is refused, as it
// would turn each byte of the section into a "vcpu" (2^40 vcpus of stride 1
// claimed by a 288 KB file). The count is bounded by the section, which is
// inside the file, before anything is read.
void Loader::load_vcpus_xen_elf() {
    const Section* s = d_.elf.find(".xen_prstatus");
    if (!s || !s->in_file) return;
    const uint64_t ctx = d_.guest_width == 4 ? format::kVcpuContextSize32 : format::kVcpuContextSize64;
    const uint64_t stride = s->shdr.sh_entsize ? s->shdr.sh_entsize : format::kVcpuSlotSize;
    if (stride < ctx)
        fail("vcpu-count", s->structure(), s->header_offset + offsetof(Elf64_Shdr, sh_entsize),
             "sh_entsize " + std::to_string(stride) + " is smaller than a vcpu context (" + std::to_string(ctx) +
                 " bytes)");
    const uint64_t count = std::min<uint64_t>(d_.header.xch_nr_vcpus, s->shdr.sh_size / stride);
    if (count == 0) return;
    // One read of the contexts' span (count - 1 strides and one context).
    const uint64_t span = (count - 1) * stride + ctx;
    const auto bytes = d_.file->read_bytes(s->shdr.sh_offset, span, s->structure());
    d_.vcpus.reserve(count);
    for (uint64_t i = 0; i < count; ++i) {
        const auto first = bytes.begin() + static_cast<ptrdiff_t>(i * stride);
        d_.vcpus.push_back({static_cast<uint32_t>(i), std::vector<std::byte>(first, first + static_cast<ptrdiff_t>(ctx))});
    }
}

void Loader::load_trailer() {
    const Section* s = d_.elf.find(".note.xen_trailer");
    if (!s || !s->in_file) return;
    // Only the unreadable list is read, at most as large as it can be for
    // this many pages; the digest note is bounded so but left where it lies
    // (16 bytes a 256-page chunk: verify reads it in windows); the reserved
    // area's padding note (8 bytes a page of zeros) and anything else stay
    // unread.
    const uint64_t pages = d_.nr_entries();
    auto limit = [pages](std::string_view name, uint32_t type) -> DescriptorRule {
        if (name != format::kNameXenCore) return 0;
        if (type == format::kNtXenDigest)
            return DescriptorRule::unread_up_to(sizeof(format::DigestDescHead) + 16 * (pages + 2));
        if (type == format::kNtXenUnreadable) return 8 + 8 * pages;
        return 0;
    };
    d_.trailer = parse_notes_in_file(*d_.file, s->shdr.sh_offset, s->shdr.sh_size, s->structure(), limit,
                                     kMaxTrailerNotes);
    if (d_.trailer.error) d_.open_findings.push_back(*d_.trailer.error);
    d_.digest = d_.trailer.find(format::kNameXenCore, format::kNtXenDigest);
    load_unreadable(d_.trailer.find(format::kNameXenCore, format::kNtXenUnreadable));
}

// NT_XEN_UNREADABLE (xen-dump-core(5) "Trailer notes"): a count, then the pfns.
void Loader::load_unreadable(const Note* u) {
    if (!u) return;
    uint64_t count = 0;
    if (u->desc.size() >= 8) std::memcpy(&count, u->desc.data(), 8);
    if (u->desc.size() < 8 || (u->desc.size() - 8) / 8 < count) {
        d_.open_findings.push_back({"notes-parse", "NT_XEN_UNREADABLE note", u->offset,
                                    "descriptor of " + std::to_string(u->desc.size()) +
                                        " bytes cannot hold its count of " + std::to_string(count) + " pfns"});
        return;
    }
    d_.unreadable.resize(count);
    if (count != 0) std::memcpy(d_.unreadable.data(), u->desc.data() + 8, count * 8);  // data() may be null
}

// One pass over the table, a window at a time.
void Loader::build_runs() { d_.runs = runs_of_table(d_); }

// v1: the runs as the PT_LOADs state them (xen-dump-core(5) "Program
// headers": one a maximal run of present pfns, in the table's order, over
// its pages' slots), when they state them consistently, so that open need
// not read the whole table: 16 bytes a page, 16 MiB for a 4 GiB guest, which
// a reader of an object in the store would fetch by ranged GETs just to
// open it. Verify still holds the PT_LOADs against the table (verify.cpp
// check_segments). False when they are not such runs: the table says.
bool Loader::runs_from_loads() {
    std::vector<PageRun> runs;
    uint64_t index = 0;
    const auto& segs = d_.elf.segments;
    for (size_t i = 0; i < segs.size(); ++i) {
        if (&segs[i] == d_.note_segment) continue;
        const auto& p = segs[i].phdr;
        if (p.p_type != PT_LOAD) return false;
        // The guest kernel's image mapping, last, over bytes of a run.
        if (p.p_vaddr != 0 && i + 1 == segs.size() && !runs.empty()) break;
        if (p.p_vaddr != 0 || p.p_paddr % format::kPageSize != 0 || p.p_filesz % format::kPageSize != 0 ||
            p.p_filesz == 0 || p.p_memsz != p.p_filesz)
            return false;
        const uint64_t first = p.p_paddr / format::kPageSize, count = p.p_filesz / format::kPageSize;
        // Ascending and maximal (a run that goes on where the last ended is not one).
        if (!runs.empty() && first <= runs.back().first_pfn + runs.back().count) return false;
        if (count > d_.table_raw_count - index || p.p_offset != d_.pages_offset + index * format::kPageSize)
            return false;
        runs.push_back({first, count, p.p_offset, index});
        index += count;
    }
    if (index != d_.table_raw_count) return false;
    d_.runs = std::move(runs);
    return true;
}

}  // namespace

std::vector<PageRun> reader::runs_of_table(const DumpReader::Impl& d) {
    std::vector<PageRun> runs;
    uint64_t prev = kAllOnes;
    d.table.scan([&](uint64_t i, const PageEntry& e) {
        if (!runs.empty() && i > 0 && prev != kAllOnes && e.pfn == prev + 1)
            ++runs.back().count;
        else
            runs.push_back({e.pfn, 1, d.pages_offset + i * format::kPageSize, i});
        prev = e.pfn;
        return true;
    });
    return runs;
}

DumpReader DumpReader::open(const std::filesystem::path& path) { return open(path, OpenOptions{}); }

// An encrypted file (xen-dump-core(5) "Encrypted dumps") is read through its
// plaintext, a flattened one through the file it carries (dump_file.hpp):
// everything below reads them as it reads a plain one.
DumpReader DumpReader::open(const std::filesystem::path& path, const OpenOptions& options) {
    // The identity files are read only for an encrypted dump.
    auto file = std::make_shared<DumpFile>(path.string(), DumpFile::identities_of(options));
    file->unflatten();  // a flattened file reads as the file it carries
    return Impl::open_file(std::move(file));
}

DumpReader DumpReader::Impl::open_file(std::shared_ptr<const reader::DumpFile> file) {
    auto impl = std::make_unique<Impl>();
    impl->path = file->path();
    impl->file = std::move(file);
    if (kdump::KdumpFile::has_signature(*impl->file) || kdump::KdumpFile::signature_near_miss(*impl->file)) {
        Loader(*impl).load_kdump();
        return DumpReader(std::move(impl));
    }
    impl->elf = read_elf_layout(*impl->file, impl->open_findings);
    Loader(*impl).load();
    return DumpReader(std::move(impl));
}

std::optional<EncryptionInfo> encryption_of(const std::filesystem::path& path) {
    const std::string name = path.string();
    std::unique_ptr<io::RandomAccess> in;
    UniqueFd fd;
    if (s3::is_url(name)) {
        // The header alone is read: small blocks (it is a few hundred bytes).
        in = s3::open_object(name, 64 << 10);
    } else {
        fd.reset(::open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
        if (!fd) throw_errno("cannot open", name);
        struct stat st{};
        if (::fstat(fd.get(), &st) != 0) throw_errno("cannot stat", name);
        // Not a regular file: not one to decrypt (open() says what it is).
        if (!S_ISREG(st.st_mode)) return std::nullopt;
        in = std::make_unique<io::FdRandomAccess>(fd.get(), static_cast<uint64_t>(st.st_size), name);
    }
    if (!starts_as_age(*in)) return std::nullopt;
    const age::FileHeader h = age::read_header(*in);
    EncryptionInfo out;
    for (const age::Stanza& s : h.header.stanzas) out.recipient_types.push_back(s.args.empty() ? std::string() : s.args[0]);
    out.file_size = h.file_size;
    out.header_size = h.header.size;
    const uint64_t payload = h.file_size - std::min(h.file_size, h.header.size + age::kPayloadNonceSize);
    out.chunks = (payload + age::kSealedChunkSize - 1) / age::kSealedChunkSize;
    return out;
}

}  // namespace xendump
