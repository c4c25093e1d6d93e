// Guest memory of the simulated host: fills, zero ranges, the PV p2m decoded
// from guest memory exactly as a dump tool walks it, overrides, map errors.
#include <algorithm>
#include <fstream>

#include "sim_test_util.hpp"

namespace xendump::test::sim {
namespace {

using nlohmann::json;

json pv_domain(uint32_t domid, unsigned width, const std::string& format, json extents, uint64_t p2m_size) {
    return {{"domid", domid},       {"name", "g" + std::to_string(domid)}, {"type", "pv"},
            {"guest_width", width}, {"p2m_size", p2m_size},                {"p2m_format", format},
            {"extents", extents},   {"vcpus", 2}};
}

TEST(SimMemory, PatternPagesMatchSplitmix) {
    Host h(json{{"domains", {{{"domid", 3}, {"type", "hvm"}, {"extents", {{0, 0x5000, 64}}}}}}});
    for (uint64_t pfn : {0, 1, 17, 63}) {
        Frame f = read_frame(*h.hv, 3, pfn);
        ASSERT_EQ(f.error, 0);
        for (unsigned i = 0; i < 512; ++i)
            ASSERT_EQ(word(f.bytes.data(), i * 8), expected_word(3, pfn, i)) << "pfn " << pfn << " word " << i;
    }
}

TEST(SimMemory, ImageFillAndZeroRanges) {
    TempDir img_dir;
    std::vector<char> img(3 * 4096 + 100);
    for (size_t i = 0; i < img.size(); ++i) img[i] = static_cast<char>(i * 7 + 1);
    std::ofstream(img_dir / "mem.img", std::ios::binary).write(img.data(), static_cast<std::streamsize>(img.size()));
    Host h(json{{"domains",
             {{{"domid", 4},
               {"type", "pvh"},
               {"extents", {{0, 0x9000, 8}}},
               {"memory", {{"image", (img_dir / "mem.img").string()}}},
               {"zero_ranges", {{1, 1}}}}}}});
    Frame p0 = read_frame(*h.hv, 4, 0);
    ASSERT_EQ(p0.error, 0);
    EXPECT_EQ(std::memcmp(p0.bytes.data(), img.data(), 4096), 0);
    Frame p1 = read_frame(*h.hv, 4, 1);  // zero range over image content
    EXPECT_EQ(p1.bytes, std::vector<std::byte>(4096, std::byte{0}));
    Frame p3 = read_frame(*h.hv, 4, 3);  // 100 bytes of image, then zeros
    EXPECT_EQ(std::memcmp(p3.bytes.data(), img.data() + 3 * 4096, 100), 0);
    EXPECT_EQ(p3.bytes[100], std::byte{0});
    Frame p6 = read_frame(*h.hv, 4, 6);  // beyond the image
    EXPECT_EQ(p6.bytes, std::vector<std::byte>(4096, std::byte{0}));
}

// Zero ranges may overlap, nest, touch or stand alone: a page reads as zero
// exactly when some range holds it (pattern pages elsewhere).
TEST(SimMemory, OverlappingZeroRangesReadAsTheirUnion) {
    const std::vector<std::pair<uint64_t, uint64_t>> ranges{{2, 10}, {4, 2}, {8, 6}, {14, 2}, {20, 1}, {30, 5}};
    json zr = json::array();
    for (auto [pfn, count] : ranges) zr.push_back({pfn, count});
    Host h(json{{"domains", {{{"domid", 5}, {"type", "hvm"}, {"extents", {{0, 0x7000, 40}}}, {"zero_ranges", zr}}}}});
    for (uint64_t pfn = 0; pfn < 40; ++pfn) {
        const bool zero = std::any_of(ranges.begin(), ranges.end(),
                                      [&](auto r) { return pfn >= r.first && pfn < r.first + r.second; });
        Frame f = read_frame(*h.hv, 5, pfn);
        ASSERT_EQ(f.error, 0);
        EXPECT_EQ(f.bytes == std::vector<std::byte>(4096, std::byte{0}), zero) << "pfn " << pfn;
    }
}

// A page held whole in the memory image is mapped in place, as Xen maps a
// guest's frame without copying it: two mappings of it show the same
// memory, and a change to the image is seen through a mapping made before
// it. A page only partly in the image is copied (and zero-filled).
TEST(SimMemory, ImagePagesAreMappedInPlace) {
    TempDir img_dir;
    const auto path = img_dir / "mem.img";
    std::vector<char> img(2 * 4096 + 100, 'a');
    std::ofstream(path, std::ios::binary).write(img.data(), static_cast<std::streamsize>(img.size()));
    Host h(json{{"domains",
             {{{"domid", 4}, {"type", "hvm"}, {"extents", {{0, 0x9000, 4}}}, {"memory", {{"image", path.string()}}}}}}});
    const std::vector<uint64_t> gfns{0, 1, 2};
    auto a = h.hv->map_foreign(4, gfns);
    auto b = h.hv->map_foreign(4, gfns);
    EXPECT_EQ(a->page(1), b->page(1));  // in place
    EXPECT_NE(a->page(2), b->page(2));  // 100 bytes of image: copied
    EXPECT_EQ(a->page(2)[100], std::byte{0});
    {
        std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
        f.seekp(4096 + 10);
        f.put('z');
    }
    EXPECT_EQ(a->page(1)[10], std::byte{'z'});
    EXPECT_EQ(a->page(0)[10], std::byte{'a'});
}

TEST(SimMemory, RelativeImagePathIsRelativeToSpec) {
    TempDir t;
    std::vector<char> img(4096, 'x');
    std::ofstream(t / "rel.img", std::ios::binary).write(img.data(), 4096);
    std::ofstream(t / "spec.json") << json{{"domains", {{{"domid", 1}, {"type", "hvm"}, {"p2m_size", 4}, {"memory", {{"image", "rel.img"}}}}}}}.dump();
    auto r = run({"xen-dump-sim", "create", (t / "host").string(), (t / "spec.json").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto hv = open_hypervisor("sim:" + (t / "host").string());
    Frame f = read_frame(*hv, 1, 0);
    EXPECT_EQ(f.bytes[0], std::byte{'x'});
}

struct P2mCase {
    unsigned width;
    std::string format;
};

class SimP2m : public ::testing::TestWithParam<P2mCase> {};

TEST_P(SimP2m, DecodesToExactlyTheExtents) {
    const auto& c = GetParam();
    // Holes inside, a hole spanning whole p2m pages, and a tail hole.
    const uint64_t e = 4096 / c.width;
    json extents = {{0, 0x10000, 160}, {256, 0x20000, 3 * e}, {8 * e + 5, 0x40000, 2 * e}};
    json dom = pv_domain(9, c.width, c.format, extents, 12 * e + 17);
    Host h(json{{"domains", {dom}}});
    ASSERT_EQ(h.hv->guest_width(9), c.width);
    ArchSharedInfo a = read_arch_shared_info(*h.hv, 9);
    EXPECT_EQ(a.max_pfn, 12 * e + 17);
    const uint64_t invalid = c.width == 8 ? ~uint64_t{0} : 0xffffffffULL;
    auto want = expected_p2m(dom, c.width);
    if (c.format != "linear") {
        EXPECT_NE(a.frame_list_list, invalid);
        EXPECT_EQ(walk_tree(*h.hv, 9, a), want);
    } else {
        EXPECT_EQ(a.frame_list_list, invalid);
    }
    if (c.format != "tree") {
        EXPECT_NE(a.p2m_cr3, 0u);
        EXPECT_EQ(a.p2m_vaddr, c.width == 8 ? 0xffffc90000000000ULL : 0xf0000000ULL);
        EXPECT_EQ(walk_linear(*h.hv, 9, a), want);
        // ctrlreg[3] of vcpu 0 is the linear list's root.
        auto ctx = h.hv->vcpu_context(9, 0);
        ASSERT_TRUE(ctx);
        ASSERT_EQ(ctx->size(), c.width == 8 ? 5168u : 2800u);
        EXPECT_EQ(word(ctx->data(), c.width == 8 ? 5008 : 2728, c.width), a.p2m_cr3);
    } else {
        EXPECT_EQ(a.p2m_cr3, 0u);
    }
    auto ctx1 = h.hv->vcpu_context(9, 1);
    ASSERT_TRUE(ctx1);
    const bool wide = c.width == 8;
    EXPECT_EQ(word(ctx1->data(), 512, c.width) & (1u << 5), 1u << 5);  // VGCF_online
    // rip (64-bit: user_regs 520 + 128; 32-bit: 516 + 32): the simulator's kernel text address.
    EXPECT_EQ(word(ctx1->data(), wide ? 648 : 548, c.width),
              (wide ? 0xffffffff81000000ULL : 0xc1000000ULL) + (9u << 16) + (1u << 4));
    EXPECT_FALSE(h.hv->vcpu_context(9, 2));
    EXPECT_EQ(h.hv->maximum_gpfn(9), 12 * e + 16);

    // p2m_pfns (info) are present pfns whose pages are no longer pattern.
    auto r = run({"xen-dump-sim", "info", h.dir.string(), "9", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json info = json::parse(r.out);
    ASSERT_FALSE(info["p2m_pfns"].empty());
    for (auto& p : info["p2m_pfns"]) {
        uint64_t pfn = p.get<uint64_t>();
        ASSERT_NE(want[pfn], invalid);
        Frame f = read_frame(*h.hv, 9, want[pfn]);
        ASSERT_EQ(f.error, 0);
        EXPECT_NE(word(f.bytes.data(), 0), expected_word(9, pfn, 0));
    }
    EXPECT_EQ(info["shared_info_mfn"].get<uint64_t>(), h.hv->domain_info(9)->shared_info_frame);
}

INSTANTIATE_TEST_SUITE_P(Formats, SimP2m,
                         ::testing::Values(P2mCase{8, "tree"}, P2mCase{8, "linear"}, P2mCase{8, "both"},
                                           P2mCase{4, "tree"}, P2mCase{4, "linear"}, P2mCase{4, "both"}),
                         [](const auto& info) { return info.param.format + std::to_string(info.param.width * 8); });

TEST(SimMemory, P2mPagesAtAndPatternElsewhere) {
    json dom = pv_domain(5, 8, "tree", {{0, 0x1000, 2048}}, 2048);
    dom["p2m_pages_at"] = 100;
    Host h(json{{"domains", {dom}}});
    auto r = run({"xen-dump-sim", "info", h.dir.string(), "5", "--json"});
    json info = json::parse(r.out);
    // 4 p2m pages + 1 frame list + 1 root, from pfn 100 on.
    EXPECT_EQ(info["p2m_pfns"], json({100, 101, 102, 103, 104, 105}));
    Frame other = read_frame(*h.hv, 5, 0x1000 + 99);
    EXPECT_EQ(word(other.bytes.data(), 8), expected_word(5, 99, 1));
}

TEST(SimMemory, OverridesLand) {
    json dom = pv_domain(6, 8, "tree", {{0, 0x3000, 1024}}, 1024);
    dom["p2m_overrides"] = {{3, 0x777777}, {1000, 0x3000}};
    dom["shared_info_overrides"] = {{"max_pfn", 5000}, {"p2m_generation", 3}, {"p2m_vaddr", 0x1234000}};
    Host h(json{{"domains", {dom}}});
    ArchSharedInfo a = read_arch_shared_info(*h.hv, 6);
    EXPECT_EQ(a.max_pfn, 5000u);
    EXPECT_EQ(a.p2m_generation, 3u);
    EXPECT_EQ(a.p2m_vaddr, 0x1234000u);
    a.max_pfn = 1024;  // walk the real size
    auto p2m = walk_tree(*h.hv, 6, a);
    auto want = expected_p2m(dom, 8);
    want[3] = 0x777777;
    want[1000] = 0x3000;
    EXPECT_EQ(p2m, want);
}

TEST(SimMemory, MapErrorsPerFrame) {
    Host h(json{{"domains",
             {pv_domain(1, 8, "tree", {{0, 0x1000, 512}}, 512),
              pv_domain(2, 8, "tree", {{0, 0x2000, 512}}, 512),
              {{"domid", 3}, {"type", "hvm"}, {"p2m_size", 100}, {"extents", {{0, 0x8000, 10}, {50, 0x8100, 10}}}}}}});
    std::vector<uint64_t> frames = {0x1000, 0x2000, 0x1001, 0xfffffff, 0x1000 + 511};
    auto m = h.hv->map_foreign(1, frames);
    ASSERT_EQ(m->count(), 5u);
    EXPECT_EQ(m->error(0), 0);
    EXPECT_NE(m->error(1), 0);  // domain 2's frame
    EXPECT_EQ(m->error(2), 0);
    EXPECT_NE(m->error(3), 0);  // nobody's
    EXPECT_EQ(m->error(4), 0);
    EXPECT_EQ(word(m->page(2), 0), expected_word(1, 1, 0));

    std::vector<uint64_t> gfns = {0, 9, 10, 49, 50, 59, 60, 99, 100, 0x8000};
    auto g = h.hv->map_foreign(3, gfns);
    std::vector<bool> ok;
    for (size_t i = 0; i < gfns.size(); ++i) ok.push_back(g->error(i) == 0);
    EXPECT_EQ(ok, std::vector<bool>({true, true, false, false, true, true, false, false, false, false}));
    EXPECT_EQ(word(g->page(4), 16), expected_word(3, 50, 2));
    EXPECT_EQ(h.hv->maximum_gpfn(3), 99u);
}

TEST(SimMemory, MapCostIsHonoured) {
    json dom = {{"domid", 1}, {"type", "hvm"}, {"p2m_size", 16}, {"map_cost", {{"per_call_us", 2000}, {"per_page_ns", 0}}}};
    Host h(json{{"domains", {dom}}});
    std::vector<uint64_t> f = {0, 1};
    auto start = std::chrono::steady_clock::now();
    h.hv->map_foreign(1, f);
    // A lower bound only: the cost must have been paid.
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::microseconds(2000));
}

// Page types (XEN_DOMCTL_getpageframeinfo3) say what map_foreign would:
// present where a gfn maps, absent where it fails (unpopulated, ballooned,
// beyond the p2m), without mapping anything.
TEST(SimMemory, GfnTypesAgreeWithMapping) {
    Host h(json{{"domains", {{{"domid", 3}, {"type", "hvm"}, {"p2m_size", 100},
                              {"extents", {{0, 0x8000, 10}, {50, 0x8100, 10}}}}}}});
    auto r = run({"xen-dump-sim", "balloon", h.dir.string(), "3", "52", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::vector<uint64_t> gfns;
    for (uint64_t g = 0; g < 100; ++g) gfns.push_back(g);
    gfns.push_back(0x8000);
    const std::vector<GfnType> types = h.hv->gfn_types(3, gfns);
    ASSERT_EQ(types.size(), gfns.size());
    auto m = h.hv->map_foreign(3, gfns);
    size_t present = 0;
    for (size_t i = 0; i < gfns.size(); ++i) {
        EXPECT_EQ(types[i] == GfnType::present, m->error(i) == 0) << "gfn " << gfns[i];
        present += types[i] == GfnType::present;
    }
    EXPECT_EQ(present, 18u);  // 20 populated, 2 ballooned
    EXPECT_EQ(types[52], GfnType::absent);
}

// map_cost for page types: the per-call cost for every 1024 gfns (a
// hypercall each, as on Xen), a tenth of the per-page cost a gfn.
TEST(SimMemory, GfnTypesPayTheirMapCost) {
    json dom = {{"domid", 1}, {"type", "hvm"}, {"p2m_size", 4096},
                {"map_cost", {{"per_call_us", 2000}, {"per_page_ns", 10000}}}};
    Host h(json{{"domains", {dom}}});
    std::vector<uint64_t> gfns(2048);
    for (uint64_t g = 0; g < gfns.size(); ++g) gfns[g] = g;
    auto start = std::chrono::steady_clock::now();
    h.hv->gfn_types(1, gfns);
    // Two calls of 1024: 2 x 2 ms, and 2048 x 1 us.
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::microseconds(4000 + 2048));
}

}  // namespace
}  // namespace xendump::test::sim
