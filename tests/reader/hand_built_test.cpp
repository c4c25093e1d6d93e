// Reading v1 files built by hand from the spec (hand_built_dump.cpp), and one
// named test per conformance check: corrupt one thing, expect that check at
// that offset (xen-dump-core(5) "Conformance").
#include <gtest/gtest.h>

#include <elf.h>

#include <cstring>

#include "findings.hpp"
#include "hand_built_dump.hpp"
#include "reader/check_error.hpp"
#include "test_support.hpp"
#include "xendump/reader.hpp"

namespace xendump::test {
namespace {

class HandBuilt : public ::testing::Test {
protected:
    void SetUp() override {
        spec_.entries = sample_entries(600, true);  // three runs, three digest chunks
        dump_ = build_hand_dump(spec_);
    }
    std::filesystem::path save(const std::string& name = "dump.core") {
        auto p = dir_ / name;
        dump_.write(p);
        return p;
    }
    std::vector<Finding> verify_saved() { return DumpReader::verify_file(save()); }
    uint64_t table_entry(size_t i) const { return dump_.table_desc_offset + i * 16; }

    TempDir dir_;
    HandBuildSpec spec_;
    HandBuiltDump dump_;
};

TEST_F(HandBuilt, ReadsEveryPageByPfnAndGmfn) {
    auto r = DumpReader::open(save());
    EXPECT_EQ(r.format(), FileFormat::v1);
    EXPECT_EQ(r.type(), format::GuestType::pv);
    EXPECT_EQ(r.nr_pages(), spec_.entries.size());
    EXPECT_EQ(r.runs().size(), 3u);
    EXPECT_EQ(r.pages_offset(), dump_.pages_offset);
    EXPECT_TRUE(r.has_digests());
    std::vector<std::byte> page(4096), want(4096);
    for (size_t i = 0; i < spec_.entries.size(); ++i) {
        const auto& e = spec_.entries[i];
        fill_pattern_page(spec_.seed, e.pfn, want.data());
        ASSERT_TRUE(r.read_page_by_pfn(e.pfn, page));
        ASSERT_EQ(page, want) << "pfn " << e.pfn;
        ASSERT_TRUE(r.read_page_by_gmfn(e.gmfn, page));
        ASSERT_EQ(page, want) << "gmfn " << e.gmfn;
    }
    // Holes are "not found", never zeros.
    const uint64_t hole = spec_.entries[199].pfn + 1;
    EXPECT_EQ(spec_.entries[200].pfn, hole + 5);
    EXPECT_FALSE(r.read_page_by_pfn(hole, page));
    EXPECT_FALSE(r.index_of_pfn(spec_.entries.back().pfn + 1).has_value());
    EXPECT_FALSE(r.read_page_by_gmfn(1, page));
}

TEST_F(HandBuilt, NotesAndKeys) {
    auto r = DumpReader::open(save());
    EXPECT_EQ(r.domain().get("DOMID"), "7");
    EXPECT_EQ(r.domain().get("NAME"), "hand-built");
    auto v = r.vcpus();
    ASSERT_EQ(v.size(), 2u);
    EXPECT_EQ(v[0].id, 0u);
    EXPECT_EQ(v[1].id, 2u);
    EXPECT_EQ(v[1].bytes.size(), format::kVcpuContextSize64);
    EXPECT_EQ(v[1].bytes[0], std::byte(5168 * 13 + 1));
    ASSERT_TRUE(r.shared_info());
    EXPECT_EQ(r.shared_info()->at(0), std::byte{0x5a});
    EXPECT_EQ(r.xen_version().minor_version, 17u);
    EXPECT_TRUE(r.unreadable_pfns().empty());
}

TEST_F(HandBuilt, ValidFileVerifies) {
    auto fs = verify_saved();
    EXPECT_TRUE(fs.empty()) << describe(fs);
}

TEST_F(HandBuilt, HvmFileVerifies) {
    spec_.type = format::GuestType::hvm;
    spec_.entries = sample_entries(300, false);
    dump_ = build_hand_dump(spec_);
    auto fs = verify_saved();
    EXPECT_TRUE(fs.empty()) << describe(fs);
    auto r = DumpReader::open(save("hvm.core"));
    std::vector<std::byte> page(4096);
    EXPECT_TRUE(r.read_page_by_gmfn(spec_.entries[10].pfn, page));
}

TEST_F(HandBuilt, PageSourceGivesFileRanges) {
    auto r = DumpReader::open(save());
    auto src = r.page_source();
    ASSERT_EQ(src->entries().size(), spec_.entries.size());
    auto* zero_copy = dynamic_cast<const ZeroCopySource*>(src.get());  // pipeline/zero_copy_source.hpp
    ASSERT_TRUE(zero_copy);
    auto fr = zero_copy->file_range(10, 20);
    ASSERT_TRUE(fr);
    EXPECT_EQ(fr->offset, dump_.pages_offset + 10 * 4096);
    std::vector<std::byte> buf(2 * 4096), want(4096);
    std::vector<uint8_t> bad(2, 1);
    src->read_pages(300, 2, buf, bad);
    fill_pattern_page(spec_.seed, spec_.entries[301].pfn, want.data());
    EXPECT_EQ(std::memcmp(buf.data() + 4096, want.data(), 4096), 0);
    EXPECT_EQ(bad[0] + bad[1], 0);
    EXPECT_THROW(src->read_pages(599, 2, buf, bad), Error);
}

// --- Conformance checks, one corruption each --------------------------------

TEST_F(HandBuilt, ElfIdentBadMagic) {
    dump_.bytes[1] = std::byte{'X'};
    auto fs = verify_saved();
    EXPECT_TRUE(has_finding(fs, "elf-ident", 0));
    try {
        DumpReader::open(save("x.core"));
        FAIL() << "open accepted a bad magic";
    } catch (const Error& e) {
        EXPECT_EQ(e.offset(), 0u);
        EXPECT_NE(std::string(e.what()).find("x.core"), std::string::npos) << e.what();
    }
}

TEST_F(HandBuilt, ElfIdentNotCore) {
    dump_.put<uint16_t>(offsetof(Elf64_Ehdr, e_type), ET_EXEC);
    EXPECT_TRUE(has_finding(verify_saved(), "elf-ident", offsetof(Elf64_Ehdr, e_type)));
}

TEST_F(HandBuilt, ElfIdentTruncatedHeader) {
    dump_.bytes.resize(40);
    EXPECT_TRUE(has_finding(verify_saved(), "elf-ident", 0));
}

TEST_F(HandBuilt, PhoffRange) {
    dump_.put<uint64_t>(offsetof(Elf64_Ehdr, e_phoff), dump_.bytes.size() - 8);
    EXPECT_TRUE(has_finding(verify_saved(), "phoff-range", offsetof(Elf64_Ehdr, e_phoff)));
}

// xen-dump-core(5): a PV guest's program headers may follow the section
// header table (where the writer puts them for crash's sake), or the ELF
// header as in the first writers (this hand-built file); an HVM guest's only
// the ELF header.
void move_program_headers_to_the_end(HandBuiltDump& d, uint64_t gap = 0) {
    const auto phnum = d.get<uint16_t>(offsetof(Elf64_Ehdr, e_phnum));
    ASSERT_EQ(d.shoff + d.get<uint16_t>(offsetof(Elf64_Ehdr, e_shnum)) * sizeof(Elf64_Shdr), d.bytes.size());
    d.bytes.resize(d.bytes.size() + gap);
    const uint64_t end = d.bytes.size();
    d.bytes.insert(d.bytes.end(), d.bytes.begin() + static_cast<std::ptrdiff_t>(d.phoff),
                   d.bytes.begin() + static_cast<std::ptrdiff_t>(d.phoff + phnum * sizeof(Elf64_Phdr)));
    d.put<uint64_t>(offsetof(Elf64_Ehdr, e_phoff), end);
}

TEST_F(HandBuilt, PvProgramHeadersMayFollowTheSectionHeaders) {
    move_program_headers_to_the_end(dump_);
    auto fs = verify_saved();
    EXPECT_TRUE(fs.empty()) << describe(fs);
    dump_ = build_hand_dump(spec_);
    move_program_headers_to_the_end(dump_, 8);  // not right after the section headers
    fs = verify_saved();
    EXPECT_TRUE(has_finding(fs, "phoff-range", offsetof(Elf64_Ehdr, e_phoff))) << describe(fs);
}

TEST_F(HandBuilt, HvmProgramHeadersFollowTheElfHeaderOnly) {
    spec_.type = format::GuestType::hvm;
    spec_.entries = sample_entries(300, false);
    dump_ = build_hand_dump(spec_);
    move_program_headers_to_the_end(dump_);
    auto fs = verify_saved();
    ASSERT_TRUE(has_finding(fs, "phoff-range", offsetof(Elf64_Ehdr, e_phoff))) << describe(fs);
}

TEST_F(HandBuilt, ShoffRangeTruncatedFile) {
    dump_.bytes.resize(dump_.shoff + 100);
    EXPECT_TRUE(has_finding(verify_saved(), "shoff-range", offsetof(Elf64_Ehdr, e_shoff)));
}

TEST_F(HandBuilt, PnXnumWithSmallCount) {
    // PN_XNUM must mean "0xffff or more": sh_info holding a small count is refused.
    uint16_t phnum = dump_.get<uint16_t>(offsetof(Elf64_Ehdr, e_phnum));
    dump_.put<uint16_t>(offsetof(Elf64_Ehdr, e_phnum), PN_XNUM);
    dump_.put<uint32_t>(dump_.shoff + offsetof(Elf64_Shdr, sh_info), phnum);
    EXPECT_TRUE(has_finding(verify_saved(), "pn-xnum", dump_.shoff + offsetof(Elf64_Shdr, sh_info)));
}

TEST_F(HandBuilt, SegmentRange) {
    const uint64_t ph = dump_.phdr_offset(2);
    dump_.put<uint64_t>(ph + offsetof(Elf64_Phdr, p_offset), ~uint64_t{0} - 4095);  // would overflow
    EXPECT_TRUE(has_finding(verify_saved(), "segment-range", ph));
}

TEST_F(HandBuilt, SectionRangeOptionalSection) {
    const uint64_t sh = dump_.section_header.at(".xen_prstatus");
    dump_.put<uint64_t>(sh + offsetof(Elf64_Shdr, sh_size), dump_.bytes.size());
    EXPECT_TRUE(has_finding(verify_saved(), "section-range", sh));
}

TEST_F(HandBuilt, SectionRangePagesPastEnd) {
    const uint64_t sh = dump_.section_header.at(".xen_pages");
    dump_.put<uint64_t>(sh + offsetof(Elf64_Shdr, sh_offset), dump_.bytes.size());
    auto fs = verify_saved();
    EXPECT_TRUE(has_finding(fs, "section-range", sh));
    try {
        DumpReader::open(save("x.core"));
        FAIL();
    } catch (const reader::CheckError& e) {
        EXPECT_EQ(e.check(), "section-range");
        EXPECT_EQ(e.offset(), sh);
        EXPECT_NE(std::string(e.what()).find("is past the end of the file"), std::string::npos) << e.what();
    }
}

TEST_F(HandBuilt, NotesParseNoteOverrunsSegment) {
    const uint64_t dom = dump_.note_offset.at("domain");
    dump_.put<uint32_t>(dom + 4, 0x100000);  // descsz far past the segment
    EXPECT_TRUE(has_finding(verify_saved(), "notes-parse", dom));
}

TEST_F(HandBuilt, HeaderNotesAgree) {
    const uint64_t xen = dump_.note_offset.at("xen-header");
    dump_.put<uint64_t>(xen + 16 + offsetof(format::HeaderDesc, xch_nr_vcpus), 3);
    EXPECT_TRUE(has_finding(verify_saved(), "header-notes-agree", xen));
}

TEST_F(HandBuilt, NrPagesMismatch) {
    const uint64_t at = offsetof(format::HeaderDesc, xch_nr_pages);
    for (const char* n : {"xen-header", "core-header"})
        dump_.put<uint64_t>(dump_.note_offset.at(n) + (n[0] == 'x' ? 16 : 24) + at, spec_.entries.size() + 1);
    EXPECT_TRUE(has_finding(verify_saved(), "nr-pages-mismatch", dump_.note_offset.at("core-header") + 24 + at));
}

TEST_F(HandBuilt, FormatVersion) {
    const uint64_t fv = dump_.note_offset.at("format-version");
    dump_.put<uint64_t>(fv + 16, 2);
    EXPECT_TRUE(has_finding(verify_saved(), "format-version", fv));
}

TEST_F(HandBuilt, TableOrder) {
    auto a = dump_.get<PageEntry>(table_entry(50));
    auto b = dump_.get<PageEntry>(table_entry(51));
    dump_.put(table_entry(50), b);
    dump_.put(table_entry(51), a);
    EXPECT_TRUE(has_finding(verify_saved(), "table-order", table_entry(51)));
}

TEST_F(HandBuilt, GmfnDuplicate) {
    auto e = dump_.get<PageEntry>(table_entry(450));
    e.gmfn = spec_.entries[3].gmfn;
    dump_.put(table_entry(450), e);
    EXPECT_TRUE(has_finding(verify_saved(), "gmfn-duplicate", table_entry(450)));
}

TEST_F(HandBuilt, LoadRunsSplitRun) {
    spec_.split_first_run = true;
    dump_ = build_hand_dump(spec_);
    EXPECT_TRUE(has_finding(verify_saved(), "load-runs", dump_.phdr_offset(1)));
}

TEST_F(HandBuilt, LoadRunsShortSegment) {
    const uint64_t ph = dump_.phdr_offset(2);
    dump_.put<uint64_t>(ph + offsetof(Elf64_Phdr, p_filesz), dump_.get<uint64_t>(ph + offsetof(Elf64_Phdr, p_filesz)) - 4096);
    EXPECT_TRUE(has_finding(verify_saved(), "load-runs", ph));
}

TEST_F(HandBuilt, LoadOffsetOffByAPage) {
    const uint64_t ph = dump_.phdr_offset(3);
    dump_.put<uint64_t>(ph + offsetof(Elf64_Phdr, p_offset), dump_.get<uint64_t>(ph + offsetof(Elf64_Phdr, p_offset)) + 4096);
    EXPECT_TRUE(has_finding(verify_saved(), "load-offset", ph));
}

TEST_F(HandBuilt, PtnoteFirstSecondNote) {
    const uint64_t ph = dump_.phdr_offset(dump_.nr_loads);
    dump_.put<uint32_t>(ph + offsetof(Elf64_Phdr, p_type), PT_NOTE);
    EXPECT_TRUE(has_finding(verify_saved(), "ptnote-first", ph));
}

TEST_F(HandBuilt, SectionPlacementP2mElsewhere) {
    const uint64_t sh = dump_.section_header.at(".xen_p2m");
    dump_.put<uint64_t>(sh + offsetof(Elf64_Shdr, sh_offset), dump_.table_desc_offset + 16);
    EXPECT_TRUE(has_finding(verify_saved(), "section-placement", sh));
}

TEST_F(HandBuilt, SectionPlacementNoteXen) {
    const uint64_t sh = dump_.section_header.at(".note.Xen");
    dump_.put<uint64_t>(sh + offsetof(Elf64_Shdr, sh_size), 16);
    EXPECT_TRUE(has_finding(verify_saved(), "section-placement", sh));
}

TEST_F(HandBuilt, DigestMismatchFlippedPageByte) {
    const uint64_t at = dump_.pages_offset + 300 * 4096 + 77;  // chunk 1
    dump_.bytes[at] ^= std::byte{1};
    auto fs = verify_saved();
    EXPECT_TRUE(has_finding(fs, "digest-mismatch", dump_.pages_offset + 256 * 4096));
    EXPECT_EQ(fs.size(), 1u) << describe(fs);
    VerifyOptions no_digests;
    no_digests.digests = false;
    EXPECT_TRUE(DumpReader::verify_file(save("x.core"), no_digests).empty());
}

TEST_F(HandBuilt, DigestMismatchNoteSegment) {
    dump_.bytes[dump_.note_offset.at("prstatus") + 100] ^= std::byte{0x80};
    EXPECT_TRUE(has_finding(verify_saved(), "digest-mismatch", dump_.notes_offset));
}

TEST_F(HandBuilt, DigestFormat) {
    dump_.put<uint32_t>(dump_.digest_note_offset + 24, 99);  // algorithm
    EXPECT_TRUE(has_finding(verify_saved(), "digest-format", dump_.digest_note_offset));
}

TEST_F(HandBuilt, VcpuCount) {
    for (const char* n : {"xen-header", "core-header"})
        dump_.put<uint64_t>(dump_.note_offset.at(n) + (n[0] == 'x' ? 16 : 24) + 8, 3);
    EXPECT_TRUE(has_finding(verify_saved(), "vcpu-count", dump_.note_offset.at("prstatus")));
}

TEST_F(HandBuilt, HeaderMagic) {
    const uint64_t core = dump_.note_offset.at("core-header");
    dump_.put<uint64_t>(core + 24, 0x1234);
    EXPECT_TRUE(has_finding(verify_saved(), "header-magic", core + 24));
}

TEST_F(HandBuilt, PfnArrayHvm) {
    spec_.type = format::GuestType::hvm;
    spec_.entries = sample_entries(300, false);
    dump_ = build_hand_dump(spec_);
    dump_.put<uint64_t>(dump_.pfn_array_offset + 8 * 17, 999999);
    EXPECT_TRUE(has_finding(verify_saved(), "pfn-array", dump_.pfn_array_offset + 8 * 17));
}

TEST_F(HandBuilt, FormatDetectNotXen) {
    // A PT_NOTE without Xen notes: some other ELF core file.
    const uint64_t core = dump_.note_offset.at("core-header");
    const uint64_t dom = dump_.note_offset.at("domain");
    dump_.put<uint32_t>(core + 8, 0x77);
    dump_.put<uint32_t>(dom + 8, 0x78);
    EXPECT_TRUE(has_finding(verify_saved(), "format-detect", dump_.phoff));
}

}  // namespace
}  // namespace xendump::test
