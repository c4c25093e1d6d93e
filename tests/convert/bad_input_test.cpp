// One named case per kind of damaged legacy input: each must be refused with
// one clear message naming the file, the field and the offset.
#include <gtest/gtest.h>

#include <cstring>

#include "legacy/layout.hpp"
#include "legacy/xc_core.hpp"
#include "legacy_gen.hpp"
#include "xendump/error.hpp"

namespace xendump::legacy {
namespace {

namespace gen = test::legacy_gen;

std::vector<std::byte> good_file(unsigned width = 8) {
    auto g = gen::make_guest({.width = width, .nr_pfns = 300, .seed = 21});
    return gen::make_file(g, {.variant = gen::Variant::pv_page_list, .tool_width = width});
}

void set_u32(std::vector<std::byte>& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
uint32_t get_u32(const std::vector<std::byte>& b, size_t at) {
    uint32_t v;
    std::memcpy(&v, b.data() + at, 4);
    return v;
}

// Parses and decides; returns the Error (fails the test when accepted).
Error refusal(const std::vector<std::byte>& bytes) {
    MemoryByteSource src(bytes, "bad.core");
    try {
        auto f = parse_xc_core(src);
        decide_layout(src, f, {});
    } catch (const Error& e) {
        EXPECT_EQ(e.object(), "bad.core");
        EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
        return e;
    }
    ADD_FAILURE() << "damaged input accepted";
    return Error("accepted");
}

void expect_mentions(const Error& e, const std::string& text, std::optional<uint64_t> offset) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    if (offset) {
        EXPECT_EQ(e.offset(), offset) << e.what();
    }
}

TEST(BadInput, ShorterThanHeader) {
    auto b = good_file();
    b.resize(13);
    expect_mentions(refusal(b), "24-byte xc_core header", 0);
}

TEST(BadInput, Garbage) {
    std::vector<std::byte> b(8192);
    for (size_t i = 0; i < b.size(); ++i) b[i] = std::byte(static_cast<uint8_t>(i * 131 + 7));
    expect_mentions(refusal(b), "xch_magic", 0);
}

TEST(BadInput, ZeroVcpus) {
    auto b = good_file();
    set_u32(b, header_field::nr_vcpus, 0);
    expect_mentions(refusal(b), "xch_nr_vcpus", header_field::nr_vcpus);
}

TEST(BadInput, ContextOfWrongSize) {
    auto b = good_file();
    set_u32(b, header_field::index_offset, get_u32(b, header_field::index_offset) - 8);
    expect_mentions(refusal(b), "2800 (32-bit tools) or 5168", header_field::index_offset);
}

TEST(BadInput, WidthsDisagree) {
    // 5168-byte contexts (64-bit tools) but room for 4-byte entries only.
    auto g = gen::make_guest({.width = 8, .nr_pfns = 3000, .seed = 22});
    auto b = gen::make_file(g, {.variant = gen::Variant::pv_page_list, .tool_width = 8, .entry_size = 4});
    expect_mentions(refusal(b), "disagree", header_field::pages_offset);
}

TEST(BadInput, PagesOffsetPastEnd) {
    auto b = good_file();
    set_u32(b, header_field::pages_offset, 0x7FFFF000);
    expect_mentions(refusal(b), "xch_pages_offset", header_field::pages_offset);
}

TEST(BadInput, IndexOffsetPastEnd) {
    auto b = good_file();
    set_u32(b, header_field::index_offset, 0xFFFFFF00);
    expect_mentions(refusal(b), "xch_index_offset", header_field::index_offset);
}

TEST(BadInput, TruncatedPages) {
    auto b = good_file();
    uint32_t pages_off = get_u32(b, header_field::pages_offset);
    b.resize(b.size() - 4096 * 10 - 100);
    uint64_t whole = (b.size() - pages_off) / 4096;
    expect_mentions(refusal(b), "truncated", pages_off + whole * 4096);
}

TEST(BadInput, PageCountOverflows) {
    auto b = good_file();
    set_u32(b, header_field::nr_pages, 0xFFFFFFFF);
    // The index of 2^32-1 entries cannot end at xch_pages_offset.
    expect_mentions(refusal(b), "xch_pages_offset", header_field::pages_offset);
}

TEST(BadInput, IndexNotAPermutation) {
    auto b = good_file();
    uint32_t index_off = get_u32(b, header_field::index_offset);
    std::memcpy(b.data() + index_off + 8 * 9, b.data() + index_off + 8 * 3, 8);
    expect_mentions(refusal(b), "not a permutation", index_off + 8 * 9);
}

TEST(BadInput, OffsetsReversedButNotOcamlShape) {
    auto b = good_file();
    set_u32(b, header_field::ctxt_offset, 0x5000);
    set_u32(b, header_field::index_offset, 0x100);
    expect_mentions(refusal(b), "xch_index_offset", header_field::index_offset);
}

TEST(BadInput, PagesOffsetNotAligned) {
    auto b = good_file(4);
    set_u32(b, header_field::pages_offset, get_u32(b, header_field::pages_offset) + 4);
    expect_mentions(refusal(b), "xch_pages_offset", header_field::pages_offset);
}

}  // namespace
}  // namespace xendump::legacy
