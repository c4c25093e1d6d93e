// Files made to mislead or exhaust a reader (issue 16): digests hidden so that
// verify would pass a corrupt page (16.5), counts that claim more than the
// file holds (16.8), and files that are not regular files (16.9).
#include <gtest/gtest.h>

#include <elf.h>
#include <sys/stat.h>

#include <cstring>

#include "../convert/xl_elf_gen.hpp"
#include "spec_writer.hpp"
#include "findings.hpp"
#include "hand_built_dump.hpp"
#include "hostile_files.hpp"
#include "reader/check_error.hpp"
#include "test_support.hpp"
#include "xendump/error.hpp"
#include "xendump/reader.hpp"

namespace xendump::test {
namespace {

bool has_check(const std::vector<Finding>& fs, const std::string& check) {
    for (const auto& f : fs)
        if (f.check == check) return true;
    return false;
}

// ---- 16.5: hidden digests -------------------------------------------------

class HiddenDigests : public ::testing::Test {
protected:
    void SetUp() override {
        spec_.entries = sample_entries(600, true);  // three digest chunks
        dump_ = build_hand_dump(spec_);
        // Every case also corrupts a page: with the digests found, verify
        // would report it; hidden, nothing else does.
        dump_.bytes[dump_.pages_offset + 256 * 4096 + 9] ^= std::byte{0x20};
    }
    std::vector<Finding> verify(const VerifyOptions& o = {}) {
        auto p = dir_ / "d.core";
        dump_.write(p);
        return DumpReader::verify_file(p, o);
    }
    uint64_t trailer_header() const { return dump_.section_header.at(".note.xen_trailer"); }

    TempDir dir_;
    HandBuildSpec spec_;
    HandBuiltDump dump_;
};

TEST_F(HiddenDigests, CorruptPageWithDigestsIsFound) {
    EXPECT_TRUE(has_finding(verify(), "digest-mismatch", dump_.pages_offset + 256 * 4096));
}

TEST_F(HiddenDigests, TrailerSectionRenamed) {
    // ".note.xen_trailer" -> ".note.xen_trailes": the lookup by name fails.
    dump_.bytes[dump_.section_name.at(".note.xen_trailer") + 16] ^= std::byte{1};
    for (bool allow : {false, true}) {
        VerifyOptions o;
        o.allow_no_digests = allow;
        auto fs = verify(o);
        EXPECT_TRUE(has_finding(fs, "trailer-placement", dump_.shoff)) << allow;
        EXPECT_TRUE(has_finding(fs, "section-names", trailer_header())) << allow;
        EXPECT_EQ(has_check(fs, "digests-absent"), !allow) << describe(fs);
    }
}

TEST_F(HiddenDigests, TrailerSectionNamedLikeAnother) {
    // sh_name pointing at ".note.xen_p2m": a second section of that name.
    const uint64_t name_field = trailer_header() + offsetof(Elf64_Shdr, sh_name);
    dump_.put<uint32_t>(name_field, dump_.get<uint32_t>(dump_.section_header.at(".note.xen_p2m")));
    auto fs = verify();
    EXPECT_TRUE(has_finding(fs, "section-names", trailer_header()));
    EXPECT_TRUE(has_finding(fs, "trailer-placement", dump_.shoff));
}

TEST_F(HiddenDigests, TrailerSectionMissing) {
    // The trailer is the last section header: one fewer, and it is gone.
    dump_.put<uint16_t>(offsetof(Elf64_Ehdr, e_shnum), dump_.get<uint16_t>(offsetof(Elf64_Ehdr, e_shnum)) - 1);
    VerifyOptions o;
    o.allow_no_digests = true;
    EXPECT_TRUE(has_finding(verify(o), "trailer-placement", dump_.shoff));
}

TEST_F(HiddenDigests, TrailerSectionType) {
    dump_.put<uint32_t>(trailer_header() + offsetof(Elf64_Shdr, sh_type), SHT_PROGBITS);
    EXPECT_TRUE(has_finding(verify(), "section-placement", trailer_header()));
}

TEST_F(HiddenDigests, DigestNoteTypeChanged) {
    for (uint32_t type : {format::kNtXenDigest ^ 0x10u, format::kNtXenDigest ^ 0x2u /* 14: padding */}) {
        SetUp();
        dump_.put<uint32_t>(dump_.digest_note_offset + 8, type);
        VerifyOptions o;
        o.allow_no_digests = true;
        auto fs = verify(o);
        EXPECT_TRUE(has_check(fs, "trailer-notes")) << type << describe(fs);
        for (const auto& f : fs) {
            if (f.check == "trailer-notes") {
                EXPECT_TRUE(f.offset == dump_.digest_note_offset || f.offset == dump_.unreadable_note_offset)
                    << describe(fs);
            }
        }
    }
}

TEST_F(HiddenDigests, DigestNoteTypeUnreadable) {
    // Type 13: its "count" (algorithm, chunk_pages) is more than it holds.
    dump_.put<uint32_t>(dump_.digest_note_offset + 8, format::kNtXenUnreadable);
    VerifyOptions o;
    o.allow_no_digests = true;
    EXPECT_FALSE(verify(o).empty());
}

TEST_F(HiddenDigests, DigestNoteNameChanged) {
    dump_.bytes[dump_.digest_note_offset + 12 + 7] ^= std::byte{1};  // "XEN CORE" -> "XEN CORD"
    VerifyOptions o;
    o.allow_no_digests = true;
    EXPECT_TRUE(has_finding(verify(o), "trailer-notes", dump_.digest_note_offset));
    VerifyOptions skip;  // the trailer's structure is checked even when the digests are not
    skip.digests = false;
    EXPECT_TRUE(has_finding(verify(skip), "trailer-notes", dump_.digest_note_offset));
}

TEST_F(HiddenDigests, DigestNoteMergedIntoPadding) {
    // One padding note over the whole trailer: every note parses, none is a
    // digest, but the trailer is larger than a trailer without digests.
    const uint64_t trailer_size = dump_.get<uint64_t>(trailer_header() + offsetof(Elf64_Shdr, sh_size));
    dump_.put<uint32_t>(dump_.digest_note_offset + 4, static_cast<uint32_t>(trailer_size - 24));
    dump_.put<uint32_t>(dump_.digest_note_offset + 8, format::kNtXenPadding);
    VerifyOptions o;
    o.allow_no_digests = true;
    auto fs = verify(o);
    EXPECT_TRUE(has_finding(fs, "trailer-placement", trailer_header()));
    EXPECT_FALSE(has_check(fs, "trailer-notes")) << describe(fs);
}

TEST_F(HiddenDigests, DigestCountMismatch) {
    // chunk_pages 128: five chunks for 600 pages, the note holds three.
    dump_.put<uint32_t>(dump_.digest_note_offset + 24 + 4, 128);
    EXPECT_TRUE(has_finding(verify(), "digest-format", dump_.digest_note_offset));
}

TEST_F(HiddenDigests, NoDigestsFailsUnlessAllowed) {
    spec_.digests = false;
    dump_ = build_hand_dump(spec_);
    auto fs = verify();
    ASSERT_EQ(fs.size(), 1u) << describe(fs);
    EXPECT_TRUE(has_finding(fs, "digests-absent", trailer_header()));
    VerifyOptions allow;
    allow.allow_no_digests = true;
    EXPECT_TRUE(verify(allow).empty()) << describe(verify(allow));
    VerifyOptions skip;
    skip.digests = false;
    EXPECT_TRUE(verify(skip).empty());
    auto p = dir_ / "d.core";
    auto rep = DumpReader::verify_file_report(p, allow);
    EXPECT_EQ(rep.digests, DigestCheck::absent);
    EXPECT_EQ(DumpReader::verify_file_report(p, skip).digests, DigestCheck::skipped);
}

TEST_F(HiddenDigests, NoDigestsHvm) {
    spec_.digests = false;
    spec_.type = format::GuestType::hvm;
    spec_.entries = sample_entries(600, false);
    dump_ = build_hand_dump(spec_);
    VerifyOptions allow;
    allow.allow_no_digests = true;
    EXPECT_TRUE(verify(allow).empty()) << describe(verify(allow));
    EXPECT_TRUE(has_finding(verify(), "digests-absent", trailer_header()));
}

// A file converted with --no-digests: the converter's own check accepts it
// (it wrote none), xen-dumpctl verify fails it unless --allow-no-digests.
TEST(NoDigests, ConvertedWithoutDigests) {
    TempDir dir;
    xl_elf_gen::XlSpec spec;
    spec.pfns = {0, 1, 2, 7};
    const auto in = dir / "xl.core", out = dir / "xl.v1.core";
    write_bytes(in, xl_elf_gen::make_xl_core(spec));
    auto c = run({"xen-dump-convert", "--no-digests", "-o", out.string(), in.string()});
    ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
    auto v = run({"xen-dumpctl", "verify", "--quiet", out.string()});
    EXPECT_EQ(v.exit_code, 1) << v.out << v.err;
    EXPECT_NE(v.out.find(out.string() + ": digests-absent: "), std::string::npos) << v.out;
    v = run({"xen-dumpctl", "verify", "--quiet", "--allow-no-digests", out.string()});
    EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
    // The default (digests written) still verifies with no option at all.
    c = run({"xen-dump-convert", "-o", (dir / "d.v1.core").string(), in.string()});
    ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
    EXPECT_EQ(run({"xen-dumpctl", "verify", "--quiet", (dir / "d.v1.core").string()}).exit_code, 0);
}

// ---- 32.4: the first specification's trailer, made to contradict itself ----
//
// A file in the trailer layout of the specification as first published
// (NT_XEN_DIGEST, NT_XEN_UNREADABLE, no padding note: spec_writer, an
// independent writer) verifies; every case first checks that, with a page
// corrupted, the digests find it, then changes one thing that would hide the
// digests and expects verify to name it.

class FirstSpecTrailer : public ::testing::Test {
protected:
    void write(uint64_t pages, bool unreadable) {
        spec_.trailer = compat::Trailer::first_spec;
        spec_.entries = compat::sample_entries(pages, compat::Guest::pv64);
        if (unreadable) spec_.unreadable = {spec_.entries[1].pfn};
        w_ = compat::write_spec_file(spec_, path_);
        // Page 0 (pfn 0x10: a pattern) changed: only the digests can tell.
        compat::patch_value<uint8_t>(path_, w_.pages_offset + 9, 0xee);
        const auto fs = verify();
        ASSERT_EQ(fs.size(), 1u) << describe(fs);
        ASSERT_TRUE(has_finding(fs, "digest-mismatch", w_.pages_offset));
    }
    std::vector<Finding> verify(bool allow_no_digests = false) {
        VerifyOptions o;
        o.allow_no_digests = allow_no_digests;
        return DumpReader::verify_file(path_, o);
    }
    uint64_t trailer_header() const { return w_.section_header.at(".note.xen_trailer"); }

    TempDir dir_;
    std::filesystem::path path_ = dir_ / "first-spec.core";
    compat::SpecFile spec_;
    compat::Written w_;
};

TEST_F(FirstSpecTrailer, DigestNoteRetyped) {
    write(600, true);
    compat::patch_value<uint32_t>(path_, w_.digest_note_offset + 8, 0x1c);
    for (bool allow : {false, true}) {
        const auto fs = verify(allow);
        EXPECT_TRUE(has_finding(fs, "trailer-notes", w_.digest_note_offset)) << allow;
        EXPECT_FALSE(has_check(fs, "trailer-placement")) << describe(fs);
    }
}

TEST_F(FirstSpecTrailer, DigestNoteRenamed) {
    write(600, false);
    compat::patch_value<char>(path_, w_.digest_note_offset + 12 + 7, 'D');  // "XEN CORD"
    EXPECT_TRUE(has_finding(verify(true), "trailer-notes", w_.digest_note_offset));
}

TEST_F(FirstSpecTrailer, DigestNoteRetypedUnreadable) {
    // Type 13: its count (algorithm, chunk_pages) is more than it holds.
    write(600, false);
    compat::patch_value<uint32_t>(path_, w_.digest_note_offset + 8, 13);
    const auto fs = verify(true);
    EXPECT_TRUE(has_finding(fs, "notes-parse", w_.digest_note_offset)) << describe(fs);
    EXPECT_TRUE(has_finding(fs, "trailer-notes", w_.digest_note_offset));
}

TEST_F(FirstSpecTrailer, DigestNoteRetypedPaddingOfTheRoomsSize) {
    // Three pages: the digest note (24 + 8 + 3 x 16 bytes) is exactly as
    // large as the reserved room of a file without digests (24 + 8 + 3 x 8
    // + 24). Retyped to padding, the trailer is a well-formed reserved-room
    // trailer without digests; only the note's shape gives it away.
    write(3, false);
    ASSERT_EQ(w_.trailer_size, 24u + 8 + 8 * 3 + 24);
    compat::patch_value<uint32_t>(path_, w_.digest_note_offset + 8, 14);
    const auto fs = verify(true);
    EXPECT_TRUE(has_finding(fs, "trailer-notes", w_.digest_note_offset));
    EXPECT_FALSE(has_check(fs, "trailer-placement")) << describe(fs);
}

TEST_F(FirstSpecTrailer, DigestNoteRetypedPadding) {
    // Any other size: a padding note makes it the reserved-room layout, of the wrong size.
    write(600, true);
    compat::patch_value<uint32_t>(path_, w_.unreadable_note_offset + 8, 14);
    compat::patch_value<uint32_t>(path_, w_.digest_note_offset + 8, 14);
    const auto fs = verify(true);
    EXPECT_TRUE(has_finding(fs, "trailer-placement", trailer_header()));
    EXPECT_TRUE(has_finding(fs, "trailer-notes", w_.digest_note_offset));
}

TEST_F(FirstSpecTrailer, UnreadableNoteRetyped) {
    // The unreadable pages would read as the guest's zeros.
    write(600, true);
    compat::patch_value<uint32_t>(path_, w_.unreadable_note_offset + 8, 0x30);
    EXPECT_TRUE(has_finding(verify(), "trailer-notes", w_.unreadable_note_offset));
}

TEST_F(FirstSpecTrailer, TrailerCutShort) {
    // sh_size 0, or past the digest note: what was cut off lies between the
    // trailer and .shstrtab, named by no section.
    write(600, true);
    const uint64_t size_field = trailer_header() + offsetof(Elf64_Shdr, sh_size);
    compat::patch_value<uint64_t>(path_, size_field, 0);
    EXPECT_TRUE(has_finding(verify(true), "trailer-placement", trailer_header()));
    compat::patch_value<uint64_t>(path_, trailer_header() + offsetof(Elf64_Shdr, sh_offset), w_.unreadable_note_offset);
    compat::patch_value<uint64_t>(path_, size_field, w_.trailer_offset + w_.trailer_size - w_.unreadable_note_offset);
    EXPECT_TRUE(has_finding(verify(true), "trailer-placement", trailer_header()));
}

TEST_F(FirstSpecTrailer, TrailerSectionLeftOut) {
    // The trailer is the last section header: one fewer, and it is gone,
    // but its bytes still stand between the table and .shstrtab.
    write(600, false);
    compat::patch_value<uint16_t>(path_, offsetof(Elf64_Ehdr, e_shnum), static_cast<uint16_t>(w_.shnum - 1));
    const auto fs = verify(true);
    EXPECT_TRUE(has_finding(fs, "trailer-placement", w_.shoff)) << describe(fs);
}

TEST_F(FirstSpecTrailer, TrailerSectionRenamed) {
    write(600, false);
    compat::patch_value<char>(path_, w_.section_name.at(".note.xen_trailer") + 16, 's');  // .note.xen_trailes
    const auto fs = verify(true);
    EXPECT_TRUE(has_finding(fs, "section-names", trailer_header()));
    EXPECT_TRUE(has_finding(fs, "trailer-placement", w_.shoff));
}

TEST_F(FirstSpecTrailer, TrailerSectionDuplicated) {
    // .xen_p2m renamed .note.xen_trailer: a reader finds that one first.
    write(600, false);
    const uint64_t p2m = w_.section_header.at(".xen_p2m");
    compat::patch_value<uint32_t>(path_, p2m + offsetof(Elf64_Shdr, sh_name),
                                  compat::read_value<uint32_t>(path_, trailer_header() + offsetof(Elf64_Shdr, sh_name)));
    const auto fs = verify(true);
    EXPECT_TRUE(has_finding(fs, "section-names", trailer_header()));
    EXPECT_TRUE(has_finding(fs, "trailer-placement", p2m));
}

TEST_F(FirstSpecTrailer, TrailerNotesDoNotParse) {
    // descsz one past the section: the trailer's notes do not parse.
    write(600, false);
    compat::patch_value<uint32_t>(path_, w_.digest_note_offset + 4,
                                  static_cast<uint32_t>(w_.trailer_size - 24 + 8));
    const auto fs = verify(true);
    EXPECT_TRUE(has_check(fs, "notes-parse")) << describe(fs);
}

// ---- 16.8: counts bounded by the file -----------------------------------

TEST(Amplification, XlVcpuCountAndStride) {
    TempDir dir;
    auto b = xl_vcpu_amplification(64);
    auto p = dir / "bomb.core";
    write_bytes(p, b);
    const uint64_t entsize_at = shdr_of(b, ".xen_prstatus") + offsetof(Elf64_Shdr, sh_entsize);
    try {
        auto r = DumpReader::open(p);
        ADD_FAILURE() << "opened, with " << r.vcpus().size() << " vcpus";
    } catch (const reader::CheckError& e) {
        EXPECT_EQ(e.check(), "vcpu-count");
        EXPECT_EQ(e.offset(), entsize_at);
        EXPECT_EQ(e.object(), p.string());
    }
    auto res = run({"xen-dumpctl", "info", p.string()});
    EXPECT_EQ(res.exit_code, 1) << res.out << res.err;
    char off[32];
    std::snprintf(off, sizeof off, "0x%llx", static_cast<unsigned long long>(entsize_at));
    EXPECT_NE(res.err.find(p.string()), std::string::npos) << res.err;
    EXPECT_NE(res.err.find(off), std::string::npos) << res.err;
}

TEST(Amplification, XlVcpuCountBoundedBySection) {
    // A sane stride, 2^40 vcpus claimed: as many contexts as the section
    // holds are read, and verify says the header disagrees.
    TempDir dir;
    xl_elf_gen::XlSpec spec;
    spec.pfns = {0, 1, 2};
    auto b = xl_elf_gen::make_xl_core(spec);
    const uint64_t huge = uint64_t{1} << 40;
    std::memcpy(b.data() + xl_nr_vcpus_offset(b), &huge, 8);
    auto p = dir / "many.core";
    write_bytes(p, b);
    auto r = DumpReader::open(p);
    EXPECT_EQ(r.vcpus().size(), spec.nr_vcpus);
    VerifyOptions o;
    o.allow_no_digests = true;
    EXPECT_TRUE(has_finding(r.verify(o), "vcpu-count", shdr_of(b, ".xen_prstatus")));
}

HandBuiltDump small_dump() {
    HandBuildSpec spec;
    spec.entries = sample_entries(40, true);
    return build_hand_dump(spec);
}

TEST(Amplification, ManyEmptyNotesInTheNoteSegment) {
    // A note segment of empty 12-byte notes: bounded count, one finding.
    TempDir dir;
    auto d = small_dump();
    // The PT_NOTE moved to 840 KB of zeros appended to the file: 70000
    // empty notes (no name, no descriptor) and no Xen note among them.
    Elf64_Phdr note;
    std::memcpy(&note, d.bytes.data() + d.phoff, sizeof note);
    const uint64_t zeros_at = d.bytes.size();
    d.bytes.resize(zeros_at + 12 * 70000);
    note.p_offset = zeros_at;
    note.p_filesz = 12 * 70000;
    std::memcpy(d.bytes.data() + d.phoff, &note, sizeof note);
    auto p = dir / "notes.core";
    d.write(p);
    try {
        DumpReader::open(p);
        ADD_FAILURE() << "opened";
    } catch (const reader::CheckError& e) {
        EXPECT_EQ(e.check(), "notes-parse");
        EXPECT_NE(std::string(e.what()).find("more than 65536 notes"), std::string::npos) << e.what();
    }
}

TEST(Amplification, LongSectionNamesAreNotKept) {
    // .xen_shared_info named by a 100 KiB string: the reader keeps at most
    // 64 bytes of it (else many sections naming one long string would each
    // hold a copy), and messages show a bounded, escaped prefix.
    TempDir dir;
    auto d = small_dump();
    Elf64_Ehdr eh;
    std::memcpy(&eh, d.bytes.data(), sizeof eh);
    const uint64_t strtab_hdr = eh.e_shoff + eh.e_shstrndx * sizeof(Elf64_Shdr);
    Elf64_Shdr st;
    std::memcpy(&st, d.bytes.data() + strtab_hdr, sizeof st);
    // The name table moved to the end of the file, the long name after the
    // names it had.
    std::vector<std::byte> names(d.bytes.begin() + static_cast<ptrdiff_t>(st.sh_offset),
                                 d.bytes.begin() + static_cast<ptrdiff_t>(st.sh_offset + st.sh_size));
    const uint32_t long_name = static_cast<uint32_t>(names.size());
    names.resize(names.size() + (100 << 10), std::byte{'A'});
    names.push_back(std::byte{0});
    st.sh_offset = d.bytes.size();
    st.sh_size = names.size();
    d.bytes.insert(d.bytes.end(), names.begin(), names.end());
    std::memcpy(d.bytes.data() + strtab_hdr, &st, sizeof st);
    d.put<uint32_t>(d.section_header.at(".xen_shared_info"), long_name);
    auto p = dir / "names.core";
    d.write(p);
    std::vector<Finding> fs;
    try {
        fs = DumpReader::verify_file(p);
    } catch (const Error& e) {
        FAIL() << e.what();
    }
    ASSERT_FALSE(fs.empty());
    for (const auto& f : fs) EXPECT_LT(f.structure.size() + f.message.size(), 1024u) << f.structure;
    EXPECT_TRUE(has_check(fs, "section-names")) << describe(fs);
}

TEST(Amplification, FindingsPerCheckAreBounded) {
    // 5000 more section headers, each outside the file and unnamed: a
    // bounded list of findings (the first of each check, then a count).
    TempDir dir;
    auto d = small_dump();
    Elf64_Ehdr eh;
    std::memcpy(&eh, d.bytes.data(), sizeof eh);
    std::vector<std::byte> table(d.bytes.begin() + static_cast<ptrdiff_t>(eh.e_shoff),
                                 d.bytes.begin() + static_cast<ptrdiff_t>(eh.e_shoff + eh.e_shnum * sizeof(Elf64_Shdr)));
    Elf64_Shdr bad{};
    bad.sh_type = SHT_PROGBITS;
    bad.sh_offset = uint64_t{1} << 50;
    bad.sh_size = 4096;
    for (int i = 0; i < 5000; ++i) {
        auto* b = reinterpret_cast<const std::byte*>(&bad);
        table.insert(table.end(), b, b + sizeof bad);
    }
    eh.e_shoff = d.bytes.size();
    eh.e_shnum = static_cast<uint16_t>(eh.e_shnum + 5000);
    d.bytes.insert(d.bytes.end(), table.begin(), table.end());
    std::memcpy(d.bytes.data(), &eh, sizeof eh);
    auto p = dir / "many-sections.core";
    d.write(p);
    const auto fs = DumpReader::verify_file(p);
    EXPECT_LT(fs.size(), 200u) << fs.size();
    EXPECT_TRUE(has_check(fs, "section-range"));
    EXPECT_TRUE(has_check(fs, "section-names"));
    bool summed = false;
    for (const auto& f : fs) summed = summed || f.message.find("more findings of this check left out") != std::string::npos;
    EXPECT_TRUE(summed);
}

TEST(Amplification, NobitsSectionOutsideTheFileIsAFinding) {
    // SHT_NOBITS does not excuse a section the reader reads from being
    // outside the file: a finding naming it, not an exception from a read.
    TempDir dir;
    auto d = small_dump();
    const uint64_t h = d.section_header.at(".note.xen_p2m");
    d.put<uint32_t>(h + offsetof(Elf64_Shdr, sh_type), SHT_NOBITS);
    d.put<uint64_t>(h + offsetof(Elf64_Shdr, sh_offset), uint64_t{1} << 50);
    auto p = dir / "nobits.core";
    d.write(p);
    std::vector<Finding> fs;
    EXPECT_NO_THROW(fs = DumpReader::verify_file(p));
    EXPECT_TRUE(has_finding(fs, "section-range", h)) << describe(fs);
}

// ---- 16.9: not a regular file -------------------------------------------

TEST(NonRegularFile, FifoIsRefusedAtOnce) {
    TempDir dir;
    auto fifo = dir / "dump.core";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    // In a child with a time limit: before the fix, opening the FIFO waited
    // for a writer forever.
    for (const char* cmd : {"verify", "info", "symbol"}) {
        std::vector<std::string> argv = {"/usr/bin/timeout", "-s", "KILL", "20", build_program("xen-dumpctl").string(),
                                         cmd, fifo.string()};
        if (std::string(cmd) == "symbol") argv.push_back("init_task");
        auto r = run(argv);
        EXPECT_EQ(r.exit_code, 1) << cmd << ": " << r.out << r.err;
        EXPECT_NE((r.out + r.err).find(fifo.string()), std::string::npos) << cmd << ": " << r.out << r.err;
        EXPECT_NE((r.out + r.err).find("not a regular file (a FIFO)"), std::string::npos) << cmd << ": " << r.out << r.err;
    }
}

TEST(NonRegularFile, DirectoryAndDeviceAreRefused) {
    TempDir dir;
    for (const std::filesystem::path& p : {std::filesystem::path(dir.path()), std::filesystem::path("/dev/null")}) {
        try {
            DumpReader::open(p);
            ADD_FAILURE() << p << " opened";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
            EXPECT_EQ(e.object(), p.string());
        }
    }
}

}  // namespace
}  // namespace xendump::test
