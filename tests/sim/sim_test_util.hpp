// Helpers of the sim suite: build a host from an inline spec, read frames
// through the hypervisor interface, and walk a PV guest's p2m the way a dump
// tool does (independently of the simulator's builder).
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "xendump/hypervisor.hpp"

namespace xendump::test::sim {

inline uint64_t splitmix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

inline uint64_t expected_word(uint32_t domid, uint64_t pfn, unsigned i) {
    return splitmix((uint64_t{domid} << 52) ^ (pfn << 9) ^ i);
}

inline uint64_t word(const std::byte* page, size_t offset, unsigned size = 8) {
    if (size == 4) {
        uint32_t v;
        std::memcpy(&v, page + offset, 4);
        return v;
    }
    uint64_t v;
    std::memcpy(&v, page + offset, 8);
    return v;
}

// A host in a fresh TempDir, created from `spec` by the xen-dump-sim tool.
struct Host {
    TempDir tmp;
    std::filesystem::path dir;
    std::unique_ptr<Hypervisor> hv;

    explicit Host(const nlohmann::json& spec) {
        std::filesystem::path spec_file = tmp / "spec.json";
        std::ofstream(spec_file) << spec.dump(2);
        dir = tmp / "host";
        RunResult r = run({"xen-dump-sim", "create", dir.string(), spec_file.string()});
        if (r.exit_code != 0) throw std::runtime_error("create failed: " + r.err);
        hv = open_hypervisor("sim:" + dir.string());
    }
    std::string host() const { return "sim:" + dir.string(); }
};

// One frame's contents, or its errno.
struct Frame {
    int error = 0;
    std::vector<std::byte> bytes;
};

inline Frame read_frame(Hypervisor& hv, uint32_t domid, uint64_t frame) {
    uint64_t f[1] = {frame};
    auto m = hv.map_foreign(domid, f);
    Frame out;
    out.error = m->error(0);
    if (!out.error) out.bytes.assign(m->page(0), m->page(0) + 4096);
    return out;
}

struct ArchSharedInfo {
    uint64_t max_pfn, frame_list_list, nmi_reason, p2m_cr3, p2m_vaddr, p2m_generation;
};

inline ArchSharedInfo read_arch_shared_info(Hypervisor& hv, uint32_t domid) {
    auto info = hv.domain_info(domid);
    unsigned w = hv.guest_width(domid);
    Frame f = read_frame(hv, domid, info->shared_info_frame);
    EXPECT_EQ(f.error, 0);
    size_t base = w == 8 ? 3088 : 2316;
    auto field = [&](unsigned i) { return word(f.bytes.data(), base + i * w, w); };
    return {field(0), field(1), field(2), field(3), field(4), field(5)};
}

// The p2m through the 3-level tree: root -> frame lists -> p2m pages.
inline std::vector<uint64_t> walk_tree(Hypervisor& hv, uint32_t domid, const ArchSharedInfo& a) {
    unsigned w = hv.guest_width(domid);
    uint64_t e = 4096 / w;
    uint64_t pages = (a.max_pfn + e - 1) / e;
    Frame root = read_frame(hv, domid, a.frame_list_list);
    EXPECT_EQ(root.error, 0);
    std::vector<uint64_t> p2m;
    for (uint64_t k = 0; k * e < pages; ++k) {
        Frame fl = read_frame(hv, domid, word(root.bytes.data(), k * w, w));
        EXPECT_EQ(fl.error, 0) << "frame list " << k;
        for (uint64_t j = k * e; j < std::min(pages, (k + 1) * e); ++j) {
            Frame p = read_frame(hv, domid, word(fl.bytes.data(), (j - k * e) * w, w));
            EXPECT_EQ(p.error, 0) << "p2m page " << j;
            for (uint64_t i = 0; i < e && p2m.size() < a.max_pfn; ++i) p2m.push_back(word(p.bytes.data(), i * w, w));
        }
    }
    return p2m;
}

// The p2m through the linear list: page tables from p2m_cr3 map p2m_vaddr.
inline std::vector<uint64_t> walk_linear(Hypervisor& hv, uint32_t domid, const ArchSharedInfo& a) {
    unsigned w = hv.guest_width(domid);
    uint64_t e = 4096 / w;
    uint64_t pages = (a.max_pfn + e - 1) / e;
    uint64_t top = w == 8 ? a.p2m_cr3 >> 12 : static_cast<uint32_t>((a.p2m_cr3 >> 12) | (a.p2m_cr3 << 20));
    int levels = w == 8 ? 4 : 3;
    std::vector<uint64_t> p2m;
    for (uint64_t j = 0; j < pages; ++j) {
        uint64_t va = a.p2m_vaddr + j * 4096;
        uint64_t mfn = top;
        for (int level = levels; level >= 1; --level) {
            Frame t = read_frame(hv, domid, mfn);
            EXPECT_EQ(t.error, 0) << "table at level " << level;
            if (t.error) return {};
            unsigned shift = 12 + 9 * (level - 1);
            uint64_t index = (va >> shift) & (level == 3 && levels == 3 ? 3 : 511);
            uint64_t pte = word(t.bytes.data(), index * 8);
            EXPECT_TRUE(pte & 1) << "not present: level " << level << " va " << va;
            mfn = (pte & 0x000ffffffffff000ULL) >> 12;
        }
        Frame p = read_frame(hv, domid, mfn);
        EXPECT_EQ(p.error, 0);
        for (uint64_t i = 0; i < e && p2m.size() < a.max_pfn; ++i) p2m.push_back(word(p.bytes.data(), i * w, w));
    }
    return p2m;
}

// What the p2m must say: extents present, the rest ~0 at guest width.
inline std::vector<uint64_t> expected_p2m(const nlohmann::json& dom, unsigned width) {
    uint64_t invalid = width == 8 ? ~uint64_t{0} : 0xffffffffULL;
    std::vector<uint64_t> p2m(dom["p2m_size"].get<uint64_t>(), invalid);
    for (auto& ex : dom["extents"])
        for (uint64_t i = 0; i < ex[2].get<uint64_t>(); ++i) p2m[ex[0].get<uint64_t>() + i] = ex[1].get<uint64_t>() + i;
    return p2m;
}

}  // namespace xendump::test::sim
