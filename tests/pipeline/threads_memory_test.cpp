// Issue 19: a dump's passes use up to 64 threads (xen-dumpd --threads,
// Threads=, xen-dump-convert --threads), and neither the bytes written nor
// the memory depend on the number. xen-dumpd dumps a simulated guest with
// --threads 1, 2, 7 and 64, as a v1 file (digests) and as a compact file
// (zstd), and xen-dump-convert converts its v1 dump to a compact file with
// the same threads: the conversions are the same bytes, and every run stays
// under the 128 MiB guarantee (peak RSS from wait4), inside a memory cgroup
// limited to 256 MiB when one can be made (tests/support/memory_cgroup.hpp).
// The guest is large enough that 66 batches of 4 MiB in flight, what 64
// threads took before the in-flight budget (pipeline.hpp, plan_batches),
// would not fit under the guarantee.
//
// A second guest of compressible pages (an image whose pages range from
// text-like to random) checks that the compressed pages are the same bytes
// whatever the threads: the pattern guest's pages are random and stored raw.
#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "memory_cgroup.hpp"
#include "test_support.hpp"

namespace xendump::test {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kLimit = 256 * kMiB;  // the cgroup's limit
constexpr long kMaxRssKib = 128 * 1024;  // the guarantee
constexpr uint64_t kPatternPages = (384 * kMiB) / 4096;
constexpr uint64_t kImagePages = (24 * kMiB) / 4096;
const unsigned kThreads[] = {1, 2, 7, 64};

// Whether files a and b hold the same bytes.
bool same_bytes(const std::filesystem::path& a, const std::filesystem::path& b) {
    std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
    if (!fa || !fb) return false;
    std::vector<char> ba(1 << 20), bb(1 << 20);
    for (;;) {
        fa.read(ba.data(), static_cast<std::streamsize>(ba.size()));
        fb.read(bb.data(), static_cast<std::streamsize>(bb.size()));
        if (fa.gcount() != fb.gcount()) return false;
        if (!std::equal(ba.begin(), ba.begin() + fa.gcount(), bb.begin())) return false;
        if (fa.gcount() == 0) return true;
    }
}

// Pages from text-like to random: page p has (p % 9) * 512 bytes of noise
// after a run of repeated words naming p; every 13th page is zeros.
void write_image(const std::filesystem::path& path, uint64_t pages) {
    std::ofstream f(path, std::ios::binary);
    std::vector<char> page(4096);
    uint64_t x = 0x9e3779b97f4a7c15;
    for (uint64_t p = 0; p < pages; ++p) {
        std::fill(page.begin(), page.end(), 0);
        if (p % 13 != 0) {
            const size_t noise = (p % 9) * 512;
            const std::string words = "task_struct " + std::to_string(p) + " mm_struct vm_area ";
            for (size_t i = 0; i < page.size() - noise; ++i) page[i] = words[i % words.size()];
            for (size_t i = page.size() - noise; i < page.size(); ++i) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                page[i] = static_cast<char>(x);
            }
        }
        f.write(page.data(), static_cast<std::streamsize>(page.size()));
    }
}

class ThreadsTo64 : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        tmp_ = new TempDir();
        why_ = new std::string();
        cgroup_ = MemoryCgroup::create(kLimit, *why_).release();
        write_image(tmp_->path() / "image.raw", kImagePages);
        const nlohmann::json spec = {
            {"domains",
             {{{"domid", 3}, {"name", "pattern"}, {"type", "hvm"}, {"vcpus", 2}, {"p2m_size", kPatternPages},
               {"memory", {{"fill", "pattern"}}}, {"zero_ranges", {{1000, 3000}, {50000, 700}}}},
              {{"domid", 4}, {"name", "text"}, {"type", "pvh"}, {"vcpus", 1}, {"p2m_size", kImagePages},
               {"memory", {{"image", (tmp_->path() / "image.raw").string()}}}}}}};
        std::ofstream(tmp_->path() / "spec.json") << spec.dump();
        RunResult c = run({"xen-dump-sim", "create", (tmp_->path() / "host").string(),
                           (tmp_->path() / "spec.json").string()});
        ASSERT_EQ(c.exit_code, 0) << c.err;
    }
    static void TearDownTestSuite() {
        delete cgroup_;
        delete why_;
        delete tmp_;
    }

    // argv under the cgroup's limit when there is one; the peak RSS printed.
    static RunResult limited(const std::vector<std::string>& argv, const std::string& what) {
        const uint64_t kills = cgroup_ ? cgroup_->oom_kills() : 0;
        RunResult r = cgroup_ ? cgroup_->run_limited(argv) : run(argv);
        std::cout << "[ measured ] " << what << ": peak RSS " << r.max_rss_kib / 1024 << " MiB"
                  << (cgroup_ ? "" : " (no memory cgroup: " + *why_ + ")") << "\n";
        if (cgroup_) {
            EXPECT_EQ(cgroup_->oom_kills(), kills) << what << " was killed by the cgroup's OOM killer";
        }
        return r;
    }
    static void expect_bounded(const RunResult& r, const std::string& what) {
        EXPECT_GT(r.max_rss_kib, 0) << what;
        EXPECT_LE(r.max_rss_kib, kMaxRssKib) << what << ": peak RSS " << r.max_rss_kib / 1024 << " MiB";
    }

    // xen-dumpd --domain `domain` into `out` with `threads` threads.
    static RunResult dump(const std::string& domain, const std::filesystem::path& out, unsigned threads,
                          const std::vector<std::string>& extra = {}) {
        std::vector<std::string> argv = {"xen-dumpd", "--domain", domain, "--host",
                                         "sim:" + (tmp_->path() / "host").string(), "-o", out.string(),
                                         "--threads", std::to_string(threads), "--quiet"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        return limited(argv, "xen-dumpd " + domain + " " + (extra.empty() ? "v1" : extra[1]) + " --threads " +
                                 std::to_string(threads));
    }

    // The v1 dump of `domain` converted to a compact (zstd) file with each
    // of kThreads: every file is the same bytes (a conversion takes the
    // time it records from its source, so runs compare byte for byte).
    static void expect_same_conversions(const std::string& domain, bool bounded) {
        const auto v1 = tmp_->path() / (domain + ".core");
        const RunResult d = dump(domain, v1, 1);
        ASSERT_EQ(d.exit_code, 0) << d.err;
        const auto first = tmp_->path() / (domain + ".1.kdump");
        for (unsigned threads : kThreads) {
            const std::string what = "xen-dump-convert " + domain + " --threads " + std::to_string(threads);
            SCOPED_TRACE(what);
            const auto out = tmp_->path() / (domain + "." + std::to_string(threads) + ".kdump");
            const RunResult r = limited({"xen-dump-convert", "--format", "kdump", "--compress", "zstd", "--threads",
                                         std::to_string(threads), "--quiet", "-o", out.string(), v1.string()},
                                        what);
            ASSERT_EQ(r.exit_code, 0) << r.err;
            if (bounded) expect_bounded(r, what);
            if (out != first) {
                EXPECT_TRUE(same_bytes(first, out)) << out << " differs from " << first;
                std::filesystem::remove(out);
            }
        }
        std::filesystem::remove(first);
        std::filesystem::remove(v1);
    }

    static inline TempDir* tmp_ = nullptr;
    static inline MemoryCgroup* cgroup_ = nullptr;
    static inline std::string* why_ = nullptr;
};

// xen-dumpd takes --threads 1 to 64 (8 at most before), and its memory
// stays under the guarantee with each, v1 (the workers classify zero pages
// and hash the digest chunks) and compact (they also compress) alike; each
// dump verifies. Its files record the time of the dump, so the bytes are
// compared on conversions below and in pipeline_test's
// Threads.GiveByteIdenticalFilesAndStreams.
TEST_F(ThreadsTo64, DumpsUnderTheBoundFrom1To64Threads) {
    for (const std::vector<std::string>& format :
         {std::vector<std::string>{}, std::vector<std::string>{"--format", "kdump", "--compress", "zstd"}})
        for (unsigned threads : kThreads) {
            const auto out = tmp_->path() / "pattern.dump";
            const RunResult r = dump("pattern", out, threads, format);
            ASSERT_EQ(r.exit_code, 0) << r.err;
            expect_bounded(r, "xen-dumpd --threads " + std::to_string(threads));
            const RunResult v = run({"xen-dumpctl", "verify", out.string()});
            EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
            std::filesystem::remove(out);
        }
}

// The pattern guest's pages are random (stored raw): the same bytes and the
// same bound from 1 to 64 threads.
TEST_F(ThreadsTo64, ConversionsSameBytesAndUnderTheBoundFrom1To64Threads) {
    expect_same_conversions("pattern", true);
}

// Pages that compress, to every degree: the compressed pages (zstd's
// retries with other parsers included) are the same bytes whatever the
// threads. The simulator maps the whole image, so the dump's memory is not
// only the dump's: no bound checked here.
TEST_F(ThreadsTo64, CompressedPagesSameBytesFrom1To64Threads) { expect_same_conversions("text", false); }

}  // namespace
}  // namespace xendump::test
