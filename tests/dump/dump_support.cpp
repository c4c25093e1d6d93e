#include "dump_support.hpp"

#include <fstream>

#include "xendump/error.hpp"

namespace xendump::test::dump {

json pv_domain(uint32_t domid, unsigned width, const std::string& p2m_format, uint64_t p2m_size,
               json extents) {
    return json{{"domid", domid},
                {"name", "guest" + std::to_string(domid)},
                {"uuid", [&] { char b[64]; std::snprintf(b, sizeof b, "0d5e9a3c-1f2b-4c6d-8e9f-%012x", domid); return std::string(b); }()},
                {"type", "pv"},
                {"guest_width", width},
                {"vcpus", 3},
                {"p2m_size", p2m_size},
                {"p2m_format", p2m_format},
                {"extents", std::move(extents)},
                {"memory", {{"fill", "pattern"}}},
                {"state", "running"}};
}

json hvm_domain(uint32_t domid, const std::string& type, uint64_t p2m_size, json extents) {
    json d = pv_domain(domid, 8, "tree", p2m_size, std::move(extents));
    d["type"] = type;
    d.erase("guest_width");
    d.erase("p2m_format");
    d["vcpus"] = 2;
    return d;
}

std::unique_ptr<sim::Host> fixture_ram_host(const std::filesystem::path& image, uint32_t domid) {
    RunResult r = run({"zstd", "-q", "-f", "-d", "-o", image.string(),
                       (shared_dir() / "fixtures" / "linux-6.1-x86_64-128m.raw.zst").string()});
    if (r.exit_code != 0) throw std::runtime_error("zstd: " + r.err);
    json d = hvm_domain(domid, "hvm", kFixtureRamPages, json::array({json::array({0, 0x800000, kFixtureRamPages})}));
    d["memory"] = json{{"image", image.string()}};
    return std::make_unique<sim::Host>(host_spec({d}));
}

json host_spec(std::vector<json> domains) {
    return json{{"xen_version", "4.17.0"}, {"domains", std::move(domains)}};
}

std::map<uint64_t, uint64_t> expected_pages(const json& domain, const std::set<uint64_t>& removed) {
    bool pv = domain.at("type") == "pv";
    std::map<uint64_t, uint64_t> out;
    for (const auto& e : domain.at("extents")) {
        uint64_t pfn = e[0], mfn = e[1], count = e[2];
        for (uint64_t i = 0; i < count; ++i) {
            uint64_t p = pfn + i;
            // Like Xen's xg_core_x86.c, translated guests are never probed in
            // the VGA hole or the MMIO window below 4 GiB.
            bool device_hole = !pv && ((p >= 0xA0 && p < 0xC0) || (p >= 0xF0000 && p < 0x100000));
            if (!removed.count(p) && !device_hole) out[p] = pv ? mfn + i : p;
        }
    }
    return out;
}

void check_dump_against_host(const std::filesystem::path& file, sim::Host& host, uint32_t domid,
                             const std::map<uint64_t, uint64_t>& expected, bool pv) {
    DumpReader r = DumpReader::open(file);
    auto findings = r.verify();
    for (const auto& f : findings) ADD_FAILURE() << "verify: " << f.check << ": " << f.message;
    ASSERT_EQ(r.nr_pages(), expected.size());
    auto entries = r.entries();
    size_t i = 0;
    for (const auto& [pfn, frame] : expected) {
        ASSERT_EQ(entries[i].pfn, pfn) << "table entry " << i;
        ASSERT_EQ(entries[i].gmfn, frame) << "table entry " << i;
        ++i;
    }
    // Every page equals what the hypervisor maps for its frame, read back both
    // by pfn and (PV) by gmfn.
    std::vector<uint64_t> frames;
    std::vector<uint64_t> pfns;
    for (const auto& [pfn, frame] : expected) {
        pfns.push_back(pfn);
        frames.push_back(frame);
    }
    std::vector<std::byte> page(4096), page2(4096);
    const size_t batch = 4096;
    size_t mismatches = 0;
    for (size_t first = 0; first < frames.size(); first += batch) {
        size_t n = std::min(batch, frames.size() - first);
        auto m = host.hv->map_foreign(domid, std::span<const uint64_t>(frames.data() + first, n));
        for (size_t k = 0; k < n; ++k) {
            ASSERT_EQ(m->error(k), 0) << "the simulator cannot map frame " << frames[first + k];
            ASSERT_TRUE(r.read_page_by_pfn(pfns[first + k], page)) << "pfn " << pfns[first + k];
            if (std::memcmp(page.data(), m->page(k), 4096) != 0 && ++mismatches < 5)
                ADD_FAILURE() << "pfn " << pfns[first + k] << ": page differs from the guest";
            if (pv && (first + k) % 97 == 0) {
                ASSERT_TRUE(r.read_page_by_gmfn(frames[first + k], page2));
                EXPECT_EQ(0, std::memcmp(page.data(), page2.data(), 4096)) << "gmfn " << frames[first + k];
            }
        }
    }
    EXPECT_EQ(mismatches, 0u);
    // Holes: the pfns between present runs, and one past the end.
    uint64_t prev = 0;
    size_t holes_checked = 0;
    for (const auto& [pfn, frame] : expected) {
        if (pfn > prev + 1 && holes_checked < 64) {
            EXPECT_FALSE(r.read_page_by_pfn(pfn - 1, page)) << "hole pfn " << pfn - 1 << " was found";
            ++holes_checked;
        }
        prev = pfn;
    }
    EXPECT_FALSE(r.read_page_by_pfn(prev + 1, page));
    // vcpu contexts equal the hypervisor's.
    auto info = host.hv->domain_info(domid);
    ASSERT_TRUE(info);
    auto vcpus = r.vcpus();
    size_t slot = 0;
    for (uint32_t v = 0; v <= info->max_vcpu_id; ++v) {
        auto ctx = host.hv->vcpu_context(domid, v);
        if (!ctx) continue;
        ASSERT_LT(slot, vcpus.size());
        EXPECT_EQ(vcpus[slot].id, v);
        EXPECT_TRUE(vcpus[slot].bytes == *ctx) << "vcpu " << v << " context differs";
        ++slot;
    }
    EXPECT_EQ(slot, vcpus.size());
}

void check_with_libkdumpfile(const std::filesystem::path& file, sim::Host& host, uint32_t domid,
                             const std::map<uint64_t, uint64_t>& expected, const std::string& type,
                             const std::vector<uint64_t>& holes) {
    TempDir tmp;
    std::ofstream ex(tmp / "expect");
    std::ofstream pages(tmp / "pages", std::ios::binary);
    ex << "type " << type << "\n";
    // Every 7th page keeps the child's work small while covering every run.
    size_t k = 0;
    for (const auto& [pfn, frame] : expected) {
        if (k++ % 7 != 0) continue;
        auto f = sim::read_frame(*host.hv, domid, frame);
        ASSERT_EQ(f.error, 0);
        ex << "page " << pfn << " " << frame << "\n";
        pages.write(reinterpret_cast<const char*>(f.bytes.data()), 4096);
    }
    for (uint64_t h : holes) ex << "hole " << h << "\n";
    ex.close();
    pages.close();
    auto r = run({"/usr/bin/python3", (source_root() / "tests/interop/libkdumpfile_read.py").string(),
                  file.string(), (tmp / "expect").string(), (tmp / "pages").string()});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

}  // namespace xendump::test::dump
