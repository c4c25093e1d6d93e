// Issue 32 item 6: one count of a compact dump's pages everywhere. At every
// dump level 0..31, for an HVM and a PV guest of the simulated host (both the
// real fixture RAM), `xen-dumpd --estimate --dump-level N` says what the
// compact dump written at level N holds, and `xen-dumpctl info`, `xen-dumpctl
// list --json` and the dump's sidecar count the same: kept pages = the pages
// of the file's second bitmap, zero pages included, and zero pages = those of
// them stored as the file's one shared zero page. info shows how the file was
// written (format, compression, dump level) as list does, for compact and v1
// files.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "guest_ram.hpp"
#include "service_harness.hpp"
#include "sidecar.hpp"
#include "test_support.hpp"

namespace xendump::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr uint64_t kPages = (128ULL << 20) / 4096;
constexpr uint32_t kHvm = 3, kPv = 4;

// The fixture RAM as an HVM guest and as a 64-bit PV guest whose machine
// frames are its pfns (the kernel's page tables, written for pfns, then
// resolve through the p2m), each with an image of its own (the simulator
// stores a PV guest's p2m pages in its highest pfns).
struct KeptHost {
    TempDir tmp;
    fs::path host = tmp / "host", dumps = tmp / "dumps", config = tmp / "xen-dumpd.conf";

    KeptHost() {
        const std::string ram = crashed_guest_ram();
        json domains = json::array();
        for (const auto& [domid, name, type, mfn] :
             {std::tuple{kHvm, "hvm", "hvm", uint64_t{0x800000}}, std::tuple{kPv, "pv", "pv", uint64_t{0}}}) {
            const fs::path image = tmp / (std::string(name) + ".raw");
            std::ofstream(image, std::ios::binary).write(ram.data(), static_cast<std::streamsize>(ram.size()));
            json d = {{"domid", domid}, {"name", name}, {"uuid", "0d5e9a3c-1f2b-4c6d-8e9f-00000000000" + std::to_string(domid)},
                      {"type", type}, {"vcpus", 1}, {"p2m_size", kPages},
                      {"extents", json::array({json::array({0, mfn, kPages})})},
                      {"memory", {{"image", image.string()}}}, {"state", "running"}};
            if (std::string(type) == "pv") {
                d["guest_width"] = 8;
                d["p2m_format"] = "tree";
            }
            domains.push_back(d);
        }
        const fs::path spec = tmp / "host.spec.json";
        std::ofstream(spec) << json{{"xen_version", "4.17.0"}, {"domains", domains}}.dump(2);
        RunResult c = run({"xen-dump-sim", "create", host.string(), spec.string()});
        if (c.exit_code != 0) throw std::runtime_error("xen-dump-sim create: " + c.err);
        fs::create_directory(dumps);
        std::ofstream(config) << "[Dump]\nKeepFree=0\n";
    }

    RunResult dumpd(const std::string& domain, const std::vector<std::string>& extra) const {
        std::vector<std::string> argv{"xen-dumpd", "--domain", domain, "--host", "sim:" + host.string(),
                                      "--socket", (tmp / "no.sock").string(), "--config", config.string(),
                                      "--dump-dir", dumps.string()};
        argv.insert(argv.end(), extra.begin(), extra.end());
        return run(argv);
    }
    RunResult ctl(std::vector<std::string> args) const {
        args.insert(args.begin(), "xen-dumpctl");
        args.insert(args.end(), {"--config", config.string(), "--dump-dir", dumps.string()});
        return run(args);
    }
    // The entry of `dump` in list --json.
    json listed(const fs::path& dump) const {
        RunResult l = ctl({"list", "--json=short"});
        EXPECT_EQ(l.exit_code, 0) << l.err;
        for (const auto& e : json::parse(l.out))
            if (e.at("path") == dump.string()) return e;
        ADD_FAILURE() << dump << " is not listed:\n" << l.out;
        return json::object();
    }
};

KeptHost& kept_host() {
    static KeptHost h;
    return h;
}

// The row of `level` in an estimate's JSON; null when it has none.
json level_row(const json& estimate, unsigned level) {
    for (const auto& row : estimate.at("levels"))
        if (row.at("level") == level) return row;
    return nullptr;
}

// j[key], or "(no KEY)" when j has no such key (a failure then shows it).
json field(const json& j, const char* key) { return j.contains(key) ? j.at(key) : json("(no " + std::string(key) + ")"); }

json read_json(const fs::path& p) {
    std::ifstream in(p);
    return json::parse(in);
}

void every_level_counts_the_same(const std::string& guest) {
    KeptHost& h = kept_host();
    uint64_t zeros_seen = 0, fewest_kept = ~uint64_t{0};
    // The levels of the plain estimate's table first (31 first of all), then
    // each other level through --dump-level N.
    RunResult plain = h.dumpd(guest, {"--estimate", "--json=short"});
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    const json table = json::parse(plain.out);
    const uint64_t total = table.at("total_pages").get<uint64_t>();
    std::vector<unsigned> levels{31};
    for (unsigned level = 0; level < 31; ++level)
        if (!level_row(table, level).is_null()) levels.push_back(level);
    for (unsigned level = 0; level < 31; ++level)
        if (level_row(table, level).is_null()) levels.push_back(level);
    for (unsigned level : levels) {
        SCOPED_TRACE(guest + " at level " + std::to_string(level));
        json row = level_row(table, level);
        if (row.is_null()) {
            RunResult e = h.dumpd(guest, {"--estimate", "--dump-level", std::to_string(level), "--json=short"});
            ASSERT_EQ(e.exit_code, 0) << e.err;
            row = level_row(json::parse(e.out), level);
            ASSERT_FALSE(row.is_null()) << e.out;
        }
        const uint64_t kept = row.at("kept_pages").get<uint64_t>();
        const json zero = field(row, "zero_pages");
        if (zero.is_number()) {
            EXPECT_LE(zero.get<uint64_t>(), kept);
            EXPECT_EQ(row.at("kept_bytes").get<uint64_t>(), (kept - zero.get<uint64_t>()) * 4096);
            zeros_seen = std::max(zeros_seen, zero.get<uint64_t>());
        } else {
            ADD_FAILURE() << "the estimate's row has no zero_pages: " << row.dump();
        }

        RunResult d = h.dumpd(guest, {"-q", "--format", "kdump", "--compress", "lz4", "--dump-level",
                                      std::to_string(level)});
        ASSERT_EQ(d.exit_code, 0) << d.err;
        const fs::path dump = d.out.substr(0, d.out.find('\n'));
        ASSERT_TRUE(fs::exists(dump)) << d.out;

        RunResult i = h.ctl({"info", "--json=short", dump.string()});
        ASSERT_EQ(i.exit_code, 0) << i.err;
        const json info = json::parse(i.out);
        EXPECT_EQ(info.at("nr_pages"), kept);
        EXPECT_EQ(field(info, "zero_pages"), zero);

        const json listed = h.listed(dump);
        EXPECT_EQ(field(listed, "pages"), kept);
        EXPECT_EQ(field(listed, "zero_pages"), zero);

        const json sidecar = read_json(daemon::sidecar_path(dump));
        EXPECT_EQ(field(sidecar, "pages"), kept);
        EXPECT_EQ(field(sidecar, "zero_pages"), zero);

        // How it was written, the same in each: the level applied.
        EXPECT_EQ(field(info, "dump_level"), field(row, "applied_level"));
        for (const char* key : {"format", "compression", "dump_level"})
            EXPECT_EQ(field(info, key), field(listed, key)) << key;
        EXPECT_EQ(field(info, "format"), "kdump");
        EXPECT_EQ(field(info, "compression"), "lz4");
        EXPECT_EQ(field(sidecar, "dump_level"), field(info, "dump_level"));
        RunResult text = h.ctl({"info", dump.string()});
        ASSERT_EQ(text.exit_code, 0) << text.err;
        const std::string format_line = "\nFormat:       kdump/lz4/d" + field(listed, "dump_level").dump() + " (";
        EXPECT_NE(text.out.find(format_line), std::string::npos) << text.out;

        fewest_kept = std::min(fewest_kept, kept);
        fs::remove(dump);
        fs::remove(daemon::sidecar_path(dump));
        fs::remove(daemon::dmesg_path(dump));
    }
    // The guest has zero pages, and the levels leave pages out.
    EXPECT_GT(zeros_seen, 0u);
    EXPECT_LT(fewest_kept, total);
    EXPECT_EQ(sim_state(kept_host().host, guest == "hvm" ? kHvm : kPv), "running");
    std::cout << "[ measured ] " << guest << ": " << total << " pages, level 31 keeps " << fewest_kept << "\n";
}

TEST(KeptPages, HvmGuestEstimateInfoListAndSidecarCountTheSameAtEveryLevel) { every_level_counts_the_same("hvm"); }

TEST(KeptPages, PvGuestEstimateInfoListAndSidecarCountTheSameAtEveryLevel) { every_level_counts_the_same("pv"); }

// A v1 file: info names its format as list does (no compression, no dump
// level, no zero pages: every page is stored in its own place).
TEST(KeptPages, InfoOfAV1FileNamesItsFormatAsListDoes) {
    KeptHost& h = kept_host();
    RunResult d = h.dumpd("hvm", {"-q"});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    const fs::path dump = d.out.substr(0, d.out.find('\n'));
    RunResult i = h.ctl({"info", "--json=short", dump.string()});
    ASSERT_EQ(i.exit_code, 0) << i.err;
    const json info = json::parse(i.out), listed = h.listed(dump);
    for (const char* key : {"format", "compression", "dump_level", "zero_pages"})
        EXPECT_EQ(field(info, key), field(listed, key)) << key;
    EXPECT_EQ(info.at("format"), "v1");
    EXPECT_TRUE(field(info, "compression").is_null());
    EXPECT_TRUE(field(info, "zero_pages").is_null());
    EXPECT_EQ(info.at("nr_pages"), listed.at("pages"));
    RunResult text = h.ctl({"info", dump.string()});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("\nFormat:       v1 (xen-dump-core)\n"), std::string::npos) << text.out;
    EXPECT_EQ(text.out.find("\nZero pages:"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace xendump::test
