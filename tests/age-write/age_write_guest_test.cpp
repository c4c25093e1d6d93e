// Issue 33 item 2: dumps of simulated PV, PVH and HVM guests written
// encrypted to a recipient made by age-keygen, v1 and compact with each
// compression: `age -d` gives back exactly the file written without
// encryption, and a marker in the guest's memory is in the plain file but
// never in clear in any file of the output or temporary directory, during
// the dump (scanned at every batch) and after. A recipient that does not
// parse stops the dump before anything is written.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>

#include "age_write_helpers.hpp"
#include "dump_support.hpp"
#include "xendump/dumper.hpp"
#include "xendump/error.hpp"
#include "xendump/keyvalues.hpp"
#include "xendump/reader.hpp"

namespace xendump::test::agewrite {
namespace {

namespace fs = std::filesystem;
using dump::json;

const std::string kMarker = "XENDUMP-AGE-WRITE-MARKER-7f3a9c";
constexpr uint64_t kImagePages = 2048;

// The guests' memory: zero pages, text (compressible), random pages; the
// marker in a page of text (101) and a random one (102), which every
// compact mode stores raw (it looks random), so the plain file shows it.
void write_image(const fs::path& p) {
    std::vector<char> page(4096);
    std::ofstream out(p, std::ios::binary);
    for (uint64_t i = 0; i < kImagePages; ++i) {
        if (i % 4 == 0) {
            std::fill(page.begin(), page.end(), 0);
        } else if (i % 4 == 1) {
            std::string text;
            while (text.size() < page.size()) text += "page " + std::to_string(i) + ": the quick brown fox jumps\n";
            std::memcpy(page.data(), text.data(), page.size());
        } else {
            std::mt19937 rng(static_cast<uint32_t>(i));
            for (auto& c : page) c = static_cast<char>(rng());
        }
        if (i == 101) std::memcpy(page.data() + 100, kMarker.data(), kMarker.size());
        if (i == 102) std::memcpy(page.data() + 2000, kMarker.data(), kMarker.size());
        out.write(page.data(), static_cast<std::streamsize>(page.size()));
    }
}

json guest(const std::string& type, const fs::path& image) {
    json d;
    if (type == "pv")
        d = dump::pv_domain(7, 8, "tree", 4200,
                            json::array({json::array({0, 0x100000, 1024}), json::array({1100, 0x102000, 948})}));
    else if (type == "pv_unordered")  // frames that do not rise with the pfns: descriptors in rank order
        d = dump::pv_domain(7, 8, "tree", 4200,
                            json::array({json::array({0, 0x300000, 700}), json::array({700, 0x100000, 1348})}));
    else if (type == "hvm")
        d = dump::hvm_domain(12, "hvm", 0x1000,
                             json::array({json::array({0, 0x400000, 0xA0}), json::array({0xC0, 0x4000C0, 1800})}));
    else
        d = dump::hvm_domain(13, "pvh", 0x1000, json::array({json::array({0, 0x500000, 0x800})}));
    d["memory"] = {{"image", image.string()}};
    return d;
}

struct Case {
    std::string type;
    bool kdump = false;
    Compression compression = Compression::zstd;
};
std::string case_name(const Case& c) {
    return c.type + "_" + (c.kdump ? "kdump_" + std::string(to_string(c.compression)) : std::string("v1"));
}

std::vector<Case> cases() {
    std::vector<Case> out;
    for (std::string type : {"pv", "pvh", "hvm"}) {
        out.push_back({type, false});
        for (Compression c : {Compression::zstd, Compression::lz4, Compression::lzo, Compression::zlib, Compression::none})
            out.push_back({type, true, c});
    }
    out.push_back({"pv_unordered", true, Compression::zstd});
    return out;
}

struct Guest {
    TempDir dir;
    fs::path image = dir / "ram.img", out = dir / "out", tmp = dir / "tmp";
    std::unique_ptr<sim::Host> host;
    uint32_t domid = 0;

    explicit Guest(const std::string& type) {
        write_image(image);
        fs::create_directory(out);
        fs::create_directory(tmp);
        const json d = guest(type, image);
        domid = d.at("domid");
        host = std::make_unique<sim::Host>(dump::host_spec({d}));
        // The unnamed temporary files of the writers go here, to be scanned.
        ::setenv("TMPDIR", tmp.c_str(), 1);
    }
    ~Guest() { ::unsetenv("TMPDIR"); }

    DumpResult dump(const Case& c, const fs::path& path, std::vector<std::string> recipients, bool scan,
                    unsigned threads = 1) {
        DumpOptions opt;
        opt.write.threads = threads;
        opt.kdump = c.kdump;
        opt.compression = c.compression;
        opt.write.recipients = std::move(recipients);
        if (scan)
            opt.write.on_progress = [this](const WriteProgress&) {
                ++scans;
                for (const std::string& f : files_with_marker({out, tmp}, kMarker)) in_clear.push_back(f);
            };
        return dump_domain_to_file(*host->hv, domid, path, opt);
    }
    unsigned scans = 0;
    std::vector<std::string> in_clear;  // files seen with the marker while an encrypted dump was written
};

std::string time_of(const fs::path& p) { return DumpReader::open(p).domain().get(keys::kTime).value_or(""); }

class AgeWriteGuest : public ::testing::TestWithParam<Case> {};

TEST_P(AgeWriteGuest, DecryptsToThePlainFile) {
    const Case& c = GetParam();
    Guest g(c.type);
    const AgeKey key = age_keygen(g.dir.path());
    const fs::path plain = g.dir / "plain", enc = g.out / "dump.age", back = g.dir / "back";
    std::vector<std::byte> plain_bytes, decrypted;
    // The files record when they were written (TIME=, to the second): the
    // two are compared when written within one second.
    for (int attempt = 0; attempt < 4; ++attempt) {
        fs::remove(plain);
        fs::remove(enc);
        g.dump(c, plain, {}, false);
        const DumpResult r = g.dump(c, enc, {key.recipient}, true);
        EXPECT_EQ(r.file_size, fs::file_size(enc));
        decrypted = age_decrypt(key, enc, back);
        plain_bytes = slurp(plain);
        {
            std::ofstream(back, std::ios::binary)
                .write(reinterpret_cast<const char*>(decrypted.data()), static_cast<std::streamsize>(decrypted.size()));
        }
        if (time_of(back) == time_of(plain)) break;
    }
    ASSERT_FALSE(plain_bytes.empty());
    EXPECT_EQ(decrypted.size(), plain_bytes.size());
    EXPECT_TRUE(decrypted == plain_bytes) << "age -d of the encrypted dump differs from the plain dump";
    // The marker: in the plain file (so this test can see it), never in the encrypted one.
    EXPECT_TRUE(contains(plain_bytes, kMarker));
    EXPECT_TRUE(starts_with_age_magic(enc));
    EXPECT_FALSE(contains(slurp(enc), kMarker));
    EXPECT_GT(g.scans, 0u);
    EXPECT_TRUE(g.in_clear.empty()) << "in clear during the dump: " << g.in_clear.front();
    EXPECT_TRUE(files_with_marker({g.out, g.tmp}, kMarker).empty());
}

INSTANTIATE_TEST_SUITE_P(Guests, AgeWriteGuest, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return case_name(info.param); });

// Chunks sealed on several threads (the pass's --threads): a guest's dump
// written with 1 and with 4 threads gives files of the same size that
// `age -d` turns into the same bytes, v1 and compact (a PV guest whose
// frames do not rise with its pfns, which fills descriptors out of order,
// included).
TEST(AgeWrite, OneAndFourThreadsDecryptToTheSameFile) {
    for (const Case& c : {Case{"pv", false}, Case{"pv", true, Compression::zstd}, Case{"pv_unordered", true, Compression::zstd},
                          Case{"hvm", true, Compression::none}}) {
        SCOPED_TRACE(case_name(c));
        Guest g(c.type);
        const AgeKey key = age_keygen(g.dir.path());
        const fs::path one = g.out / "one.age", four = g.out / "four.age";
        const fs::path back_one = g.dir / "one", back_four = g.dir / "four";
        std::vector<std::byte> by_one, by_four;
        uint64_t size_one = 0, size_four = 0;
        for (int attempt = 0; attempt < 4; ++attempt) {  // TIME= to the second, as above
            fs::remove(one);
            fs::remove(four);
            size_one = g.dump(c, one, {key.recipient}, false, 1).file_size;
            size_four = g.dump(c, four, {key.recipient}, false, 4).file_size;
            by_one = age_decrypt(key, one, g.dir / "scratch");
            by_four = age_decrypt(key, four, g.dir / "scratch");
            std::ofstream(back_one, std::ios::binary)
                .write(reinterpret_cast<const char*>(by_one.data()), static_cast<std::streamsize>(by_one.size()));
            std::ofstream(back_four, std::ios::binary)
                .write(reinterpret_cast<const char*>(by_four.data()), static_cast<std::streamsize>(by_four.size()));
            if (time_of(back_one) == time_of(back_four)) break;
        }
        EXPECT_EQ(size_one, fs::file_size(one));
        EXPECT_EQ(size_four, fs::file_size(four));
        EXPECT_EQ(size_one, size_four);
        ASSERT_FALSE(by_one.empty());
        EXPECT_TRUE(contains(by_one, kMarker) || c.kdump);  // a v1 file holds the page as it is
        EXPECT_EQ(by_one.size(), by_four.size());
        EXPECT_TRUE(by_one == by_four) << "the dumps sealed on 1 and on 4 threads decrypt to different bytes";
    }
}

TEST(AgeWrite, EveryRecipientDecrypts) {
    Guest g("pvh");
    const AgeKey a = age_keygen(g.dir.path(), "a.txt"), b = age_keygen(g.dir.path(), "b.txt");
    const fs::path enc = g.out / "dump.age";
    g.dump({"pvh", true, Compression::zstd}, enc, {a.recipient, b.recipient}, false);
    const auto by_a = age_decrypt(a, enc, g.dir / "back");
    const auto by_b = age_decrypt(b, enc, g.dir / "back");
    EXPECT_FALSE(by_a.empty());
    EXPECT_TRUE(by_a == by_b);
    EXPECT_TRUE(contains(by_a, kMarker));
}

TEST(AgeWrite, StreamedToAPipe) {
    Guest g("pv");
    const AgeKey key = age_keygen(g.dir.path());
    DumpOptions opt;
    opt.write.recipients = {key.recipient};
    const auto got = through_pipe([&](int fd) { dump_domain_to_fd(*g.host->hv, g.domid, fd, false, opt); });
    {
        std::ofstream(g.dir / "piped.age", std::ios::binary)
            .write(reinterpret_cast<const char*>(got.data()), static_cast<std::streamsize>(got.size()));
    }
    EXPECT_FALSE(contains(got, kMarker));
    const auto plain = age_decrypt(key, g.dir / "piped.age", g.dir / "back");
    EXPECT_TRUE(contains(plain, kMarker));
}

TEST(AgeWrite, ARecipientThatDoesNotParseStopsTheDump) {
    Guest g("hvm");
    const AgeKey key = age_keygen(g.dir.path());
    const fs::path enc = g.out / "dump.age";
    for (const std::string bad : {"age1qqqq", "ssh-rsa AAAAB3NzaC1yc2E", "", "AGE-SECRET-KEY-1QQQ"}) {
        SCOPED_TRACE(bad);
        try {
            g.dump({"hvm", false}, enc, {key.recipient, bad}, false);
            ADD_FAILURE() << "a dump to a bad recipient was written";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("recipient 2 of 2"), std::string::npos) << e.what();
            // The text is not repeated (it may have come from a private file).
            if (bad.size() > 8) {
                EXPECT_EQ(std::string(e.what()).find(bad), std::string::npos) << e.what();
            }
        }
        EXPECT_FALSE(fs::exists(enc));
        EXPECT_TRUE(fs::is_empty(g.out));
    }
}

}  // namespace
}  // namespace xendump::test::agewrite
