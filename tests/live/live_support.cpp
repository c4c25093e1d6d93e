#include "live_support.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <stdexcept>

#include <gtest/gtest.h>

#include "xendump/reader.hpp"

namespace xendump::test::live {

json guest(uint32_t domid, const std::string& type, uint64_t pages, uint64_t rate, const std::string& pattern,
           uint64_t seed) {
    char uuid[64];
    std::snprintf(uuid, sizeof uuid, "5a1e0000-1f2b-4c6d-8e9f-%012x", domid);
    json d{{"domid", domid},
           {"name", "live" + std::to_string(domid)},
           {"uuid", uuid},
           {"type", type},
           {"vcpus", 2},
           {"p2m_size", pages},
           {"memory", {{"fill", "pattern"}}},
           {"state", "running"}};
    if (type == "pv") {
        d["guest_width"] = 8;
        d["p2m_format"] = "tree";
    }
    if (rate) d["writer"] = {{"rate", rate}, {"pattern", pattern}, {"first_pfn", 16}, {"pages", pages - 16}, {"seed", seed}};
    return d;
}

json host_spec(std::vector<json> domains, bool shadow_paging) {
    return json{{"xen_version", "4.17.0"}, {"shadow_paging", shadow_paging}, {"domains", std::move(domains)}};
}

xendump::sim::WriterSpec writer_of(const json& domain) {
    xendump::sim::WriterSpec w;
    const json& j = domain.at("writer");
    w.rate = j.at("rate");
    w.pattern = *xendump::sim::writer_pattern_from_name(j.at("pattern"));
    w.first_pfn = j.at("first_pfn");
    w.pages = j.at("pages");
    w.seed = j.at("seed");
    return w;
}

std::set<uint64_t> p2m_pfns(const test::sim::Host& host, uint32_t domid) {
    const json info = sim_info(host, domid);
    return info.at("p2m_pfns").get<std::set<uint64_t>>();
}

Instant check_instant(const std::filesystem::path& dump, const xendump::sim::WriterSpec& w,
                      const std::set<uint64_t>& skip) {
    return check_instant(DumpReader::open(dump), w, skip);
}

Instant check_instant(const DumpReader& r, const xendump::sim::WriterSpec& w, const std::set<uint64_t>& skip) {
    Instant out;
    // What the image holds: 0 for a page the writer never wrote.
    std::map<uint64_t, uint64_t> seen;
    std::vector<std::byte> page(4096);
    for (uint64_t i = 0; i < w.pages; ++i) {
        const uint64_t pfn = w.first_pfn + i;
        if (skip.count(pfn) || !r.read_page_by_pfn(pfn, page)) continue;  // not in the dump (HVM's VGA hole)
        ++out.pages_checked;
        uint64_t gen = 0;
        if (auto stamp = xendump::sim::read_written_stamp(page)) {
            EXPECT_EQ(stamp->pfn, pfn) << "a written page in another pfn's slot";
            gen = stamp->generation;
            ++out.written;
        }
        seen[i] = gen;
        out.instant = std::max(out.instant, gen);
    }
    // The writer's state at that instant: the last write to each page
    // before write number T (writes to pfns not in the dump do not matter).
    std::vector<uint64_t> last(w.pages, 0);
    for (uint64_t k = 0; k < out.instant; ++k) last[xendump::sim::writer_target(w, k)] = k + 1;
    for (const auto& [i, gen] : seen)
        if (gen != last[i]) ++out.torn;
    return out;
}

void expect_live_record(const DumpReader& dump, const DumpResult& r) {
    ASSERT_TRUE(r.live);
    EXPECT_TRUE(r.live->precopy);
    EXPECT_GT(r.live->pages_recopied, 0u);
    const KeyValues& kv = dump.domain();
    EXPECT_EQ(kv.get(keys::kLive).value_or(""), "precopy");
    EXPECT_EQ(kv.get(keys::kPaused).value_or(""), "0");
    EXPECT_EQ(kv.get(keys::kLiveRounds).value_or(""), std::to_string(r.live->rounds));
    EXPECT_EQ(kv.get(keys::kPagesRecopied).value_or(""), std::to_string(r.live->pages_recopied));
    EXPECT_EQ(kv.get(keys::kPauseUsec).value_or(""), std::to_string(r.live->pause_usec));
}

uint64_t pages_differing(const std::filesystem::path& a_file, const std::filesystem::path& b_file) {
    DumpReader a = DumpReader::open(a_file), b = DumpReader::open(b_file);
    if (a.nr_pages() != b.nr_pages()) {
        ADD_FAILURE() << a.nr_pages() << " pages against " << b.nr_pages();
        return UINT64_MAX;
    }
    std::vector<std::byte> pa(4096), pb(4096);
    uint64_t differ = 0;
    for (uint64_t i = 0; i < a.nr_pages(); ++i) {
        if (a.entry(i).pfn != b.entry(i).pfn || a.entry(i).gmfn != b.entry(i).gmfn) {
            ADD_FAILURE() << "entry " << i << ": pfn " << a.entry(i).pfn << " against " << b.entry(i).pfn;
            return UINT64_MAX;
        }
        a.read_pages(i, 1, pa);
        b.read_pages(i, 1, pb);
        if (pa != pb) ++differ;
    }
    return differ;
}

json sim_info(const test::sim::Host& host, uint32_t domid) {
    RunResult r = run({"xen-dump-sim", "info", host.dir.string(), std::to_string(domid), "--json"});
    if (r.exit_code != 0) throw std::runtime_error("xen-dump-sim info: " + r.err);
    return json::parse(r.out);
}

PipeToFile::PipeToFile(const std::filesystem::path& file, std::function<void()> every, uint64_t every_bytes) {
    if (::pipe(fds_) != 0) throw std::runtime_error("pipe");
    thread_ = std::thread([this, file, every = std::move(every), every_bytes] {
        std::ofstream out(file, std::ios::binary);
        char buf[65536];
        uint64_t since = 0;
        for (ssize_t n; (n = ::read(fds_[0], buf, sizeof buf)) > 0;) {
            out.write(buf, n);
            since += static_cast<uint64_t>(n);
            if (every && since >= every_bytes) {
                every();
                since = 0;
            }
        }
    });
}

void PipeToFile::close() {
    if (fds_[1] >= 0) ::close(fds_[1]);
    fds_[1] = -1;
    if (thread_.joinable()) thread_.join();
}

PipeToFile::~PipeToFile() {
    close();
    ::close(fds_[0]);
}

}  // namespace xendump::test::live
