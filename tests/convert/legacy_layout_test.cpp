// Parsing and layout decision of legacy xc_core files, every variant and both
// tool widths, straight from memory (no writer involved).
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "legacy/layout.hpp"
#include "legacy/xc_core.hpp"
#include "legacy_gen.hpp"
#include "test_support.hpp"
#include "xendump/error.hpp"

namespace xendump::legacy {
namespace {

namespace gen = test::legacy_gen;

struct Parsed {
    std::vector<std::byte> bytes;
    std::unique_ptr<MemoryByteSource> src;
    XcCoreFile file;
};

Parsed parse(std::vector<std::byte> bytes) {
    Parsed p;
    p.bytes = std::move(bytes);
    p.src = std::make_unique<MemoryByteSource>(p.bytes, "mem.core");
    p.file = parse_xc_core(*p.src);
    return p;
}

// Every entry's pfn, gmfn and page equal the guest's.
void expect_matches_guest(const Parsed& p, const LegacyLayout& l, const gen::Guest& g, bool gmfn_is_mfn) {
    ASSERT_EQ(l.entries.size(), g.present());
    for (size_t i = 0; i < l.entries.size(); ++i) {
        uint64_t pfn = l.entries[i].pfn;
        ASSERT_LT(pfn, g.mfn_of_pfn.size());
        ASSERT_NE(g.mfn_of_pfn[pfn], gen::kNoMfn) << "pfn " << pfn;
        if (i) {
            ASSERT_LT(l.entries[i - 1].pfn, pfn);
        }
        EXPECT_EQ(l.entries[i].gmfn, gmfn_is_mfn ? g.mfn_of_pfn[pfn] : pfn);
        std::vector<std::byte> page(4096);
        p.src->read(p.file.page_offset(l.slots[i]), page, "test");
        ASSERT_EQ(page, g.page_of_pfn[pfn]) << "pfn " << pfn;
    }
}

class Widths : public ::testing::TestWithParam<unsigned> {};

TEST_P(Widths, PvPageListFoundByP2mTree) {
    unsigned w = GetParam();
    auto g = gen::make_guest({.width = w, .nr_pfns = 1500, .seed = w, .hole_pfns = {5, 600, 601}});
    auto p = parse(gen::make_file(g, {.variant = gen::Variant::pv_page_list, .tool_width = w}));
    EXPECT_EQ(p.file.context_size, w == 8 ? 5168u : 2800u);
    EXPECT_EQ(p.file.entry_size, w);
    auto l = decide_layout(*p.src, p.file, {});
    EXPECT_FALSE(l.inferred);
    EXPECT_EQ(l.type, format::GuestType::pv);
    EXPECT_NE(l.layout.find("pv-page-list;decided-by=p2m-tree"), std::string::npos) << l.layout;
    expect_matches_guest(p, l, g, true);
}

// Large enough that the page shapes are classified on two threads (each
// half of the slots); the tree's pages fall in both halves.
TEST_P(Widths, PvPageListFoundByP2mTreeInALargeFile) {
    unsigned w = GetParam();
    auto g = gen::make_guest({.width = w, .nr_pfns = 9000, .seed = 3 + w, .hole_pfns = {0, 4500, 8999}});
    auto p = parse(gen::make_file(g, {.variant = gen::Variant::pv_page_list, .tool_width = w}));
    ASSERT_GE(p.file.index.size(), 4096u * 2);
    auto l = decide_layout(*p.src, p.file, {});
    EXPECT_FALSE(l.inferred);
    EXPECT_NE(l.layout.find("pv-page-list;decided-by=p2m-tree"), std::string::npos) << l.layout;
    expect_matches_guest(p, l, g, true);
}

// The guest's page-list dump, its layout found by the tree, every page right.
void expect_page_list_found_by_tree(const gen::Guest& g, unsigned w) {
    auto p = parse(gen::make_file(g, {.variant = gen::Variant::pv_page_list, .tool_width = w}));
    auto l = decide_layout(*p.src, p.file, {});
    EXPECT_FALSE(l.inferred);
    EXPECT_NE(l.layout.find("pv-page-list;decided-by=p2m-tree"), std::string::npos) << l.layout;
    expect_matches_guest(p, l, g, true);
}

// A ballooned-out leaf-sized range: xenolinux's contiguous p2m array keeps
// a page of nothing but ~0 for it, which the frame list still names.
TEST_P(Widths, PvPageListWithAnAllInvalidLeafOfItsOwn) {
    unsigned w = GetParam();
    uint64_t per_leaf = 4096 / w;
    auto g = gen::make_guest({.width = w, .nr_pfns = 4 * per_leaf + 100, .seed = 20 + w, .hole_pfns = {7},
                              .ballooned_leaves = {1, 2}});
    ASSERT_EQ(g.missing_leaf_mfn, gen::kNoMfn);
    ASSERT_EQ(g.present(), 2 * per_leaf + 100 - 1);
    expect_page_list_found_by_tree(g, w);
}

// pvops points every missing leaf at one shared all-~0 page (p2m_missing):
// its MFN appears once per missing leaf in the frame lists.
TEST_P(Widths, PvPageListWithASharedMissingLeaf) {
    unsigned w = GetParam();
    uint64_t per_leaf = 4096 / w;
    auto g = gen::make_guest({.width = w, .nr_pfns = 5 * per_leaf + 3, .seed = 30 + w,
                              .ballooned_leaves = {0, 2, 3}, .shared_missing_leaf = true});
    ASSERT_NE(g.missing_leaf_mfn, gen::kNoMfn);
    ASSERT_EQ(g.present(), 2 * per_leaf + 3);
    expect_page_list_found_by_tree(g, w);
}

TEST_P(Widths, PvPageListBySystemMapWalk) {
    unsigned w = GetParam();
    test::TempDir dir;
    auto g = gen::make_guest({.width = w, .nr_pfns = 900, .seed = 3, .p2m_tree = false, .page_tables = true});
    auto p = parse(gen::make_file(g, {.variant = gen::Variant::pv_page_list, .tool_width = w, .nr_vcpus = 2}));
    EXPECT_THROW(decide_layout(*p.src, p.file, {}), Error);
    auto map = dir / "System.map";
    std::string text = gen::system_map_text(g);
    gen::write_bytes(map, std::vector<std::byte>(reinterpret_cast<const std::byte*>(text.data()),
                                                 reinterpret_cast<const std::byte*>(text.data() + text.size())));
    auto l = decide_layout(*p.src, p.file, {.system_map = map.string()});
    EXPECT_NE(l.layout.find("decided-by=system-map"), std::string::npos) << l.layout;
    expect_matches_guest(p, l, g, true);
}

TEST_P(Widths, PvPfnOrderWithHoles) {
    unsigned w = GetParam();
    auto g = gen::make_guest({.width = w, .nr_pfns = 800, .seed = 5, .hole_pfns = {0, 1, 400}, .p2m_tree = false});
    auto p = parse(gen::make_file(g, {.variant = gen::Variant::pv_pfn_order, .tool_width = w}));
    auto l = decide_layout(*p.src, p.file, {});
    EXPECT_EQ(l.layout, "pv-pfn-order;decided-by=index-holes");
    expect_matches_guest(p, l, g, true);
}

TEST_P(Widths, PvPfnOrderConfirmedByTree) {
    unsigned w = GetParam();
    auto g = gen::make_guest({.width = w, .nr_pfns = 800, .seed = 6, .hole_pfns = {300}});
    auto p = parse(gen::make_file(g, {.variant = gen::Variant::pv_pfn_order, .tool_width = w}));
    auto l = decide_layout(*p.src, p.file, {});
    EXPECT_NE(l.layout.find("pv-pfn-order;decided-by=p2m-tree"), std::string::npos) << l.layout;
    expect_matches_guest(p, l, g, true);
}

TEST_P(Widths, HvmPfnOrderByVcpuFlag) {
    unsigned w = GetParam();
    auto g = gen::make_guest({.width = w, .nr_pfns = 640, .seed = 8, .hole_pfns = {0xA0, 0xA1}, .p2m_tree = false});
    auto p = parse(gen::make_file(g, {.variant = gen::Variant::hvm_pfn_order, .tool_width = w}));
    auto l = decide_layout(*p.src, p.file, {});
    EXPECT_EQ(l.type, format::GuestType::hvm);
    EXPECT_EQ(l.layout, "hvm-pfn-order;decided-by=vcpu0-hvm-flag");
    expect_matches_guest(p, l, g, false);
}

TEST_P(Widths, HvmPageListRefusedUnlessInferred) {
    unsigned w = GetParam();
    auto g = gen::make_guest({.width = w, .nr_pfns = 300, .seed = 9, .p2m_tree = false});
    auto p = parse(gen::make_file(g, {.variant = gen::Variant::hvm_page_list, .tool_width = w}));
    try {
        decide_layout(*p.src, p.file, {});
        FAIL() << "accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--allow-inferred-layout"), std::string::npos) << e.what();
    }
    auto l = decide_layout(*p.src, p.file, {.allow_inferred = true});
    EXPECT_TRUE(l.inferred);
    EXPECT_EQ(l.layout, "hvm-page-list;decided-by=inferred:slot-order");
    expect_matches_guest(p, l, g, false);
}

TEST_P(Widths, OcamlDamagedRefusedUnlessInferred) {
    unsigned w = GetParam();
    auto g = gen::make_guest({.width = w, .nr_pfns = 200, .seed = 10, .p2m_tree = false});
    auto p = parse(gen::make_file(g, {.variant = gen::Variant::ocaml_damaged, .tool_width = w, .nr_vcpus = 3}));
    EXPECT_EQ(p.file.damage, Damage::ocaml_swapped_no_index);
    try {
        decide_layout(*p.src, p.file, {});
        FAIL() << "accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("OCaml"), std::string::npos) << e.what();
    }
    auto l = decide_layout(*p.src, p.file, {.allow_inferred = true});
    EXPECT_TRUE(l.inferred);
    ASSERT_EQ(l.entries.size(), 200u);
    std::vector<std::byte> page(4096);
    p.src->read(p.file.page_offset(l.slots[17]), page, "test");
    EXPECT_EQ(page, g.page_of_pfn[l.entries[17].pfn]);
}

TEST_P(Widths, PageListWithoutTreeRefusedWithAdvice) {
    unsigned w = GetParam();
    auto g = gen::make_guest({.width = w, .nr_pfns = 400, .seed = 11, .p2m_tree = false});
    auto p = parse(gen::make_file(g, {.variant = gen::Variant::pv_page_list, .tool_width = w}));
    try {
        decide_layout(*p.src, p.file, {});
        FAIL() << "accepted";
    } catch (const Error& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("shape search"), std::string::npos) << m;
        EXPECT_NE(m.find("--system-map"), std::string::npos) << m;
        EXPECT_NE(m.find("--allow-inferred-layout"), std::string::npos) << m;
    }
    auto l = decide_layout(*p.src, p.file, {.allow_inferred = true});
    EXPECT_TRUE(l.inferred);
    EXPECT_EQ(l.layout, "pv-page-list;decided-by=inferred:slot-order");
}

INSTANTIATE_TEST_SUITE_P(ToolWidth, Widths, ::testing::Values(4u, 8u),
                         [](const auto& info) { return info.param == 4 ? std::string("tools32") : std::string("tools64"); });

TEST(LegacyParse, EightByteEntriesWith32BitToolsAccepted) {
    auto g = gen::make_guest({.width = 4, .nr_pfns = 2000, .seed = 12});
    auto p = parse(gen::make_file(g, {.variant = gen::Variant::pv_page_list, .tool_width = 4, .entry_size = 8}));
    EXPECT_EQ(p.file.context_size, 2800u);
    EXPECT_EQ(p.file.entry_size, 8u);
    auto l = decide_layout(*p.src, p.file, {});
    expect_matches_guest(p, l, g, true);
}

TEST(LegacyParse, UnroundedPagesOffsetAccepted) {
    auto g = gen::make_guest({.width = 8, .nr_pfns = 600, .seed = 13});
    auto bytes = gen::make_file(g, {.tool_width = 8, .round_pages_offset = false});
    // Only page-aligned pages are accepted: an unrounded offset must be refused clearly.
    MemoryByteSource src(bytes, "unrounded.core");
    uint32_t pages_off;
    std::memcpy(&pages_off, bytes.data() + 20, 4);
    if (pages_off % 4096 != 0) {
        EXPECT_THROW(parse_xc_core(src), Error);
    } else {
        EXPECT_NO_THROW(parse_xc_core(src));
    }
}

}  // namespace
}  // namespace xendump::legacy
