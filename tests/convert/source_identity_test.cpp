// SOURCE_ID= (issue 16.1): what identifies the file an output was converted
// from. It covers the size, the modification time and every byte but the
// pages, reads no page, and refuses ELF files whose sections would make it
// read the file many times over.
#include <gtest/gtest.h>
#include <elf.h>

#include <cstring>

#include "legacy/conversion.hpp"
#include "legacy/source_identity.hpp"
#include "legacy_gen.hpp"
#include "test_support.hpp"
#include "xendump/error.hpp"
#include "xendump/keyvalues.hpp"
#include "xendump/reader.hpp"
#include "xl_elf_gen.hpp"

namespace xendump::legacy {
namespace {

namespace fs = std::filesystem;
namespace gen = test::legacy_gen;
namespace xl = test::xl_elf_gen;

std::vector<std::byte> legacy_bytes(uint64_t seed) {
    auto g = gen::make_guest({.width = 8, .nr_pfns = 300, .seed = seed});
    return gen::make_file(g, {.variant = gen::Variant::pv_page_list, .tool_width = 8});
}

std::vector<std::byte> xl_bytes() {
    xl::XlSpec s{.seed = 9};
    for (uint64_t pfn = 0; pfn < 200; ++pfn) s.pfns.push_back(pfn);
    return xl::make_xl_core(s);
}

// The digest of `bytes` with the byte at `offset` flipped.
std::string digest_with_byte_flipped(const test::TempDir& dir, std::vector<std::byte> bytes, uint64_t offset) {
    bytes.at(offset) ^= std::byte{0x40};
    gen::write_bytes(dir / "f", bytes);
    return identify_source(dir / "f").digest;
}

struct Range {
    uint64_t offset = 0, size = 0;
};

Range elf_section(const std::vector<std::byte>& bytes, const std::string& name) {
    Elf64_Ehdr eh;
    std::memcpy(&eh, bytes.data(), sizeof eh);
    std::vector<Elf64_Shdr> sh(eh.e_shnum);
    std::memcpy(sh.data(), bytes.data() + eh.e_shoff, sh.size() * sizeof(Elf64_Shdr));
    const char* names = reinterpret_cast<const char*>(bytes.data() + sh[eh.e_shstrndx].sh_offset);
    for (const auto& s : sh)
        if (name == names + s.sh_name) return {s.sh_offset, s.sh_size};
    ADD_FAILURE() << "no section " << name;
    return {};
}

TEST(SourceIdentity, ValueRoundTripsAndNamesWhatDiffers) {
    SourceIdentity id{.size = 8192, .mtime_sec = 1'600'000'000, .mtime_nsec = 5, .digest = "xxh3-128:00ff"};
    EXPECT_EQ(id.value(), "size=8192;mtime=1600000000.000000005;digest=xxh3-128:00ff");
    EXPECT_EQ(SourceIdentity::parse(id.value()), id);
    EXPECT_EQ(SourceIdentity::parse(id.value() + ";later=field"), id) << "fields of later versions are ignored";
    for (const char* bad : {"", "size=1", "size=x;mtime=1.000000000;digest=d", "size=1;mtime=1.5;digest=d",
                            "size=1;mtime=1.000000000", "size=1;mtime=1.000000000;digest=d;junk"})
        EXPECT_FALSE(SourceIdentity::parse(bad)) << bad;
    SourceIdentity other = id;
    EXPECT_EQ(id.difference_from(other), "");
    other.size = 4096;
    EXPECT_EQ(id.difference_from(other), "size 8192, recorded 4096");
    other = id;
    other.mtime_nsec = 6;
    EXPECT_EQ(id.difference_from(other), "modification time 1600000000.000000005, recorded 1600000000.000000006");
    other = id;
    other.digest = "xxh3-128:0100";
    EXPECT_EQ(id.difference_from(other), "digest of all but the pages xxh3-128:00ff, recorded xxh3-128:0100");
}

TEST(SourceIdentity, XcCoreCoversHeaderContextsAndIndexButNoPage) {
    test::TempDir dir;
    const auto bytes = legacy_bytes(60);
    gen::write_bytes(dir / "f", bytes);
    const SourceIdentity id = identify_source(dir / "f");
    EXPECT_EQ(id.size, bytes.size());
    EXPECT_TRUE(id.digest.starts_with("xxh3-128:")) << id.digest;
    EXPECT_EQ(id.digest.size(), 9u + 32u);
    uint32_t pages_offset;
    std::memcpy(&pages_offset, bytes.data() + 20, 4);
    EXPECT_EQ(digest_with_byte_flipped(dir, bytes, bytes.size() - 1), id.digest) << "a page is not read";
    EXPECT_EQ(digest_with_byte_flipped(dir, bytes, pages_offset), id.digest) << "a page is not read";
    for (uint64_t at : {uint64_t{4}, uint64_t{24 + 100}, uint64_t{pages_offset - 8}})
        EXPECT_NE(digest_with_byte_flipped(dir, bytes, at), id.digest) << "byte " << at;
    EXPECT_NE(identify_source(dir / "f").digest, identify_source([&] {
                  gen::write_bytes(dir / "g", legacy_bytes(61));
                  return dir / "g";
              }()).digest);
}

TEST(SourceIdentity, XenElfCoversEverySectionButThePages) {
    test::TempDir dir;
    const auto bytes = xl_bytes();
    gen::write_bytes(dir / "f", bytes);
    const std::string digest = identify_source(dir / "f").digest;
    const Range pages = elf_section(bytes, ".xen_pages"), p2m = elf_section(bytes, ".xen_p2m"),
                prstatus = elf_section(bytes, ".xen_prstatus");
    EXPECT_EQ(digest_with_byte_flipped(dir, bytes, pages.offset + 5), digest);
    EXPECT_EQ(digest_with_byte_flipped(dir, bytes, pages.offset + pages.size - 1), digest);
    EXPECT_NE(digest_with_byte_flipped(dir, bytes, p2m.offset + 3), digest);
    EXPECT_NE(digest_with_byte_flipped(dir, bytes, prstatus.offset + 100), digest);
    EXPECT_NE(digest_with_byte_flipped(dir, bytes, sizeof(Elf64_Ehdr) + 8), digest) << "a section header";
}

// 65535 sections each claiming the whole file would hash it 65535 times.
TEST(SourceIdentity, OverlappingSectionsAreRefusedNotReadOverAndOver) {
    test::TempDir dir;
    constexpr uint16_t kSections = 65535;
    std::vector<std::byte> bytes(sizeof(Elf64_Ehdr) + kSections * sizeof(Elf64_Shdr));
    Elf64_Ehdr eh = test::core_elf_header(EM_X86_64);
    eh.e_shoff = sizeof eh;
    eh.e_shnum = kSections;
    eh.e_shstrndx = SHN_UNDEF;
    std::memcpy(bytes.data(), &eh, sizeof eh);
    for (size_t i = 1; i < kSections; ++i) {
        Elf64_Shdr sh{};
        sh.sh_type = SHT_PROGBITS;
        sh.sh_offset = 0;
        sh.sh_size = bytes.size();
        std::memcpy(bytes.data() + sizeof eh + i * sizeof sh, &sh, sizeof sh);
    }
    gen::write_bytes(dir / "f", bytes);
    try {
        identify_source(dir / "f");
        FAIL() << "accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("sections overlap"), std::string::npos) << e.what();
        EXPECT_TRUE(e.offset().has_value());
    }
}

TEST(SourceIdentity, ConvertedOutputRecordsItsSource) {
    test::TempDir dir;
    gen::write_bytes(dir / "a.core", legacy_bytes(62));
    gen::write_bytes(dir / "b.core", xl_bytes());
    for (const char* name : {"a.core", "b.core"}) {
        convert_file(dir / name, dir / (std::string(name) + ".v1"), {});
        auto recorded = DumpReader::open(dir / (std::string(name) + ".v1")).domain().get(keys::kSourceId);
        ASSERT_TRUE(recorded) << name;
        EXPECT_EQ(*recorded, identify_source(dir / name).value()) << name;
    }
}

// A source that changes while it is converted would be recorded with an
// identity that is not what the output holds: the output is not published.
TEST(SourceIdentity, SourceChangedDuringConversionIsNotPublished) {
    test::TempDir dir;
    const auto bytes = legacy_bytes(63);
    gen::write_bytes(dir / "a.core", bytes);
    ConvertOptions co;
    bool changed = false;
    co.write.on_progress = [&](const WriteProgress&) {
        if (changed) return;
        changed = true;
        auto grown = bytes;
        grown.resize(grown.size() + 4096);
        gen::write_bytes(dir / "a.core", grown);
    };
    co.write.check_before_publish = [](const fs::path&, const VerifyOptions&) {};
    try {
        convert_file(dir / "a.core", dir / "a.v1", co);
        FAIL() << "published";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("the source changed while it was converted (size"), std::string::npos)
            << e.what();
    }
    EXPECT_TRUE(changed);
    EXPECT_FALSE(fs::exists(dir / "a.v1"));
}

}  // namespace
}  // namespace xendump::legacy
