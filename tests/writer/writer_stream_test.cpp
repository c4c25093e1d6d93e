// Streaming properties of the writer: pipe output equals file output, holes,
// progress, observer, cancellation and the copy_file_range path.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "dump_check.hpp"
#include "pipeline/zero_copy_source.hpp"
#include "writer/write_v1.hpp"
#include "xendump/fd.hpp"
#include "xendump/error.hpp"
#include "xendump/kdump.hpp"
#include "xendump/reader.hpp"
#include "xendump/writer.hpp"

namespace xendump::test {
namespace {

using format::GuestType;

// Streams a dump through a real pipe to a reader thread.
std::vector<std::byte> write_through_pipe(const DumpSpec& spec, PageSource& source, WriteOptions opt = {}) {
    return through_pipe([&](int fd) { write_dump(fd, false, spec, source, opt); });
}

class PipeEqualsFile : public ::testing::TestWithParam<GuestType> {};

TEST_P(PipeEqualsFile, SameBytes) {
    TempDir dir;
    const GuestType type = GetParam();
    const DumpSpec spec = make_spec(type, 8, 2);
    const auto pfns = pfns_with_holes(2600);
    PatternPageSource source(entries_for(pfns, type), 3);
    source.zero_pfns = {pfns[1], pfns[2], pfns[3], pfns[1000], pfns[2599]};
    source.unreadable_pfns = {pfns[5], pfns[1500]};

    const auto piped = write_through_pipe(spec, source);
    write_dump_file(dir / "sparse", spec, source);
    WriteOptions dense;
    dense.sparse = false;
    write_dump_file(dir / "dense", spec, source, dense);
    const auto sparse_bytes = slurp(dir / "sparse");
    ASSERT_EQ(piped.size(), sparse_bytes.size());
    EXPECT_TRUE(piped == sparse_bytes) << "pipe output differs from sparse file output";
    EXPECT_TRUE(piped == slurp(dir / "dense")) << "pipe output differs from dense file output";
    check_dump(dir / "sparse", spec, source);
}

INSTANTIATE_TEST_SUITE_P(Types, PipeEqualsFile, ::testing::Values(GuestType::pv, GuestType::hvm, GuestType::pvh),
                         [](const auto& info) { return std::string(format::to_string(info.param)); });

TEST(WriterStream, ZeroPagesBecomeHoles) {
    TempDir dir;
    const DumpSpec spec = make_spec(GuestType::hvm, 8, 1);
    std::vector<uint64_t> pfns;
    for (uint64_t i = 0; i < 4096; ++i) pfns.push_back(i);
    PatternPageSource source(entries_for(pfns, GuestType::hvm));
    source.zero_pfns.assign(pfns.begin() + 16, pfns.end());  // 16 data pages, 4080 zero pages
    const auto r = write_dump_file(dir / "d", spec, source);
    struct stat st {};
    ASSERT_EQ(::stat((dir / "d").c_str(), &st), 0);
    const uint64_t allocated = static_cast<uint64_t>(st.st_blocks) * 512;
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), r.file_size);
    EXPECT_LT(allocated, r.file_size / 2) << "zero pages were written out";
    check_dump(dir / "d", spec, source);

    WriteOptions dense;
    dense.sparse = false;
    write_dump_file(dir / "dense", spec, source, dense);
    ASSERT_EQ(::stat((dir / "dense").c_str(), &st), 0);
    EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, pfns.size() * 4096) << "sparse=false left holes";
}

// A source that lends its pages (as a foreign mapping does) instead of
// copying them: each page in its own allocation, so no two are adjacent and
// the writer must not assume one buffer; unreadable pages lent as null.
class LendingSource final : public ZeroCopySource {
public:
    explicit LendingSource(PatternPageSource& inner) : inner_(inner) {}
    std::span<const PageEntry> entries() const override { return inner_.entries(); }
    void read_pages(size_t, size_t, std::span<std::byte>, std::span<uint8_t>) override {
        ADD_FAILURE() << "read_pages called although the source lends";
    }
    size_t preferred_batch() const override { return 300; }
    std::unique_ptr<LentPages> lend_pages(size_t first, size_t count) override {
        auto lent = std::make_unique<Lent>();
        for (size_t i = 0; i < count; ++i) {
            std::vector<std::byte> page(4096);
            uint8_t unreadable = 0;
            inner_.read_pages(first + i, 1, page, std::span(&unreadable, 1));
            lent->pages.push_back(unreadable ? std::vector<std::byte>{} : std::move(page));
        }
        ++lends;
        return lent;
    }
    size_t lends = 0;

private:
    struct Lent final : LentPages {
        std::vector<std::vector<std::byte>> pages;
        const std::byte* page(size_t i) const override { return pages[i].empty() ? nullptr : pages[i].data(); }
    };
    PatternPageSource& inner_;
};

TEST(WriterStream, LentPagesGiveTheSameFileAsCopiedOnes) {
    TempDir dir;
    const DumpSpec spec = make_spec(GuestType::pv, 8, 2);
    const auto pfns = pfns_with_holes(3000);
    PatternPageSource copied(entries_for(pfns, GuestType::pv));
    copied.unreadable_pfns = {pfns[7], pfns[2000]};
    copied.zero_pfns.assign(pfns.begin() + 300, pfns.begin() + 1100);  // whole digest chunks of zeros
    LendingSource lending(copied);
    const auto a = write_dump_file(dir / "copied", spec, copied);
    const auto b = write_dump_file(dir / "lent", spec, lending);
    EXPECT_GT(lending.lends, 0u);
    EXPECT_EQ(a.unreadable_pfns, b.unreadable_pfns);
    EXPECT_EQ(slurp(dir / "copied"), slurp(dir / "lent"));
    check_dump(dir / "lent", spec, copied);
}

// An observer of the pipeline (pipeline/observer.hpp) calling `f` for
// every kept page, as the guest-kernel scanners see them.
class ObserverOf final : public pipeline::PageObserver {
public:
    explicit ObserverOf(std::function<void(uint64_t, std::span<const std::byte>)> f) : f_(std::move(f)) {}
    void observe(const pipeline::PageBatch& b) override {
        for (size_t i = 0; i < b.count; ++i)
            if (b.keep[i]) f_(b.pfn(i), b.bytes(i));
    }

private:
    std::function<void(uint64_t, std::span<const std::byte>)> f_;
};

TEST(WriterStream, ProgressAndObserverSeeEveryPageInOrder) {
    TempDir dir;
    const DumpSpec spec = make_spec(GuestType::pv, 8, 1);
    const auto pfns = pfns_with_holes(3000);
    PatternPageSource source(entries_for(pfns, GuestType::pv));
    source.unreadable_pfns = {pfns[10]};
    std::vector<uint64_t> seen;
    bool contents_ok = true;
    std::vector<WriteProgress> progress;
    WriteOptions opt;
    ObserverOf observer([&](uint64_t pfn, std::span<const std::byte> page) {
        const size_t idx = seen.size();
        seen.push_back(pfn);
        auto want = expected_page(source, idx);
        if (page.size() != want.size() || std::memcmp(page.data(), want.data(), want.size()) != 0)
            contents_ok = false;
    });
    opt.on_progress = [&](const WriteProgress& p) { progress.push_back(p); };
    UniqueFd fd(::open((dir / "d").c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd);
    pipeline::PageObserver* observers[] = {&observer};
    const auto r = writer::write_v1(fd.get(), true, "d", spec, source, opt, observers);
    EXPECT_EQ(seen, pfns);
    EXPECT_TRUE(contents_ok);
    ASSERT_GE(progress.size(), 3u);  // 3000 pages in batches of at most 1024, then the end
    for (size_t i = 1; i < progress.size(); ++i) {
        EXPECT_GE(progress[i].pages_done, progress[i - 1].pages_done);
        EXPECT_GE(progress[i].bytes_done, progress[i - 1].bytes_done);
    }
    EXPECT_EQ(progress.back().pages_done, pfns.size());
    EXPECT_EQ(progress.back().pages_total, pfns.size());
    EXPECT_EQ(progress.back().bytes_done, r.file_size);
    EXPECT_EQ(progress.front().bytes_total, r.file_size);
}

TEST(WriterStream, CancelStopsWithErrorAndLeavesNoFile) {
    TempDir dir;
    const DumpSpec spec = make_spec(GuestType::pv, 8, 1);
    PatternPageSource source(entries_for(pfns_with_holes(5000), GuestType::pv));
    std::atomic<bool> cancel{false};
    WriteOptions opt;
    opt.cancel = &cancel;
    opt.on_progress = [&](const WriteProgress&) { cancel = true; };
    try {
        write_dump_file(dir / "d", spec, source, opt);
        FAIL() << "not cancelled";
    } catch (const Error& e) {
        EXPECT_EQ(e.message(), "cancelled");
    }
    EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// Issue 32.5: WriteOptions::room is asked from the blocks the file occupies
// (holes take none), before the first byte and a step at a time, and a
// grant is never overrun; v1 and compact files alike.
struct RoomCall {
    uint64_t occupied, needed, wanted;
};

uint64_t blocks_of(const std::filesystem::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_blocks) * 512 : 0;
}

void write_either(bool kdump, const std::filesystem::path& p, const DumpSpec& spec, PageSource& src,
                  const WriteOptions& wo) {
    if (kdump) write_kdump_file(p, spec, src, KdumpOptions{Compression::none, wo});
    else write_dump_file(p, spec, src, wo);
}

TEST(WriterStream, RoomIsAskedFromTheBlocksTheFileOccupies) {
    const DumpSpec spec = make_spec(GuestType::hvm, 8, 1);
    std::vector<uint64_t> pfns;
    for (uint64_t i = 0; i < 8192; ++i) pfns.push_back(i);  // 32 MiB
    for (const bool kdump : {false, true}) {
        SCOPED_TRACE(kdump ? "kdump" : "v1");
        TempDir dir;
        // Mostly zero: 64 data pages (256 KiB), so a single small grant is enough.
        PatternPageSource sparse(entries_for(pfns, GuestType::hvm));
        sparse.zero_pfns.assign(pfns.begin() + 64, pfns.end());
        std::vector<RoomCall> calls;
        WriteOptions wo;
        wo.room = [&](uint64_t occupied, uint64_t needed, uint64_t wanted) {
            calls.push_back({occupied, needed, wanted});
            return needed;
        };
        write_either(kdump, dir / "sparse", spec, sparse, wo);
        ASSERT_FALSE(calls.empty());
        EXPECT_EQ(calls.front().occupied, 0u);  // asked before the first byte
        EXPECT_LE(calls.back().needed, 2 * kRoomStep);
        EXPECT_LT(blocks_of(dir / "sparse"), 2u << 20);
        EXPECT_LE(blocks_of(dir / "sparse"), calls.back().needed);
        for (const auto& c : calls) {
            EXPECT_LE(c.needed - c.occupied, kRoomStep);
            EXPECT_GE(c.wanted, c.needed);
        }
        // Without zero pages: asked a step at a time, never past a grant.
        PatternPageSource dense(entries_for(pfns, GuestType::hvm));
        calls.clear();
        uint64_t granted = 0;
        wo.room = [&](uint64_t occupied, uint64_t needed, uint64_t wanted) {
            EXPECT_LE(occupied, std::max<uint64_t>(granted, 1));
            calls.push_back({occupied, needed, wanted});
            return granted = needed;
        };
        write_either(kdump, dir / "dense", spec, dense, wo);
        EXPECT_GE(calls.size(), 4u);
        EXPECT_GE(calls.front().wanted, pfns.size() * 4096);  // the planned size
        EXPECT_GE(blocks_of(dir / "dense"), pfns.size() * 4096);
        EXPECT_LE(blocks_of(dir / "dense"), granted);
        EXPECT_TRUE(DumpReader::open(dir / "dense").verify().empty());
    }
}

// A grant smaller than what is needed stops the write with an error, and
// nothing is published.
TEST(WriterStream, RoomRefusedStopsTheWriteAndLeavesNoFile) {
    const DumpSpec spec = make_spec(GuestType::pv, 8, 1);
    for (const bool kdump : {false, true}) {
        SCOPED_TRACE(kdump ? "kdump" : "v1");
        TempDir dir;
        PatternPageSource source(entries_for(pfns_with_holes(8000), GuestType::pv));
        WriteOptions wo;
        unsigned asked = 0;
        wo.room = [&](uint64_t occupied, uint64_t needed, uint64_t) -> uint64_t {
            ++asked;
            return occupied >= 12 * 4096 * 256 ? needed - 1 : needed;  // about 12 MiB, then no more
        };
        try {
            write_either(kdump, dir / "d", spec, source, wo);
            FAIL() << "not stopped";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("no room on disk to go on"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find((dir / "d").string()), std::string::npos) << e.what();
        }
        EXPECT_GE(asked, 2u);
        EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
    }
}

// Pages stored contiguously in a file: the writer may copy_file_range them.
class FileBackedSource : public PatternPageSource {
public:
    FileBackedSource(std::vector<PageEntry> entries, const std::filesystem::path& file, uint64_t base)
        : PatternPageSource(std::move(entries)), base_(base) {
        std::vector<std::byte> all(base_);
        for (size_t i = 0; i < this->entries().size(); ++i) {
            auto p = expected_page(*this, i);
            all.insert(all.end(), p.begin(), p.end());
        }
        fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd_ < 0 || ::pwrite(fd_, all.data(), all.size(), 0) != static_cast<ssize_t>(all.size()))
            throw std::runtime_error("cannot write backing file");
    }
    ~FileBackedSource() override { ::close(fd_); }
    std::optional<FileRange> file_range(size_t first, size_t) const override {
        ++ranges_asked;
        return FileRange{fd_, base_ + first * 4096};
    }
    mutable std::atomic<int> ranges_asked{0};

private:
    uint64_t base_;
    int fd_ = -1;
};

TEST(WriterStream, FileRangeSourceGivesTheSameBytes) {
    TempDir dir;
    const DumpSpec spec = make_spec(GuestType::pv, 8, 1);
    const auto entries = entries_for(pfns_with_holes(2100), GuestType::pv);
    FileBackedSource ranged(entries, dir / "backing", 8192);
    PatternPageSource plain(entries);
    write_dump_file(dir / "ranged", spec, ranged);
    EXPECT_GT(ranged.ranges_asked.load(), 0);
    const auto piped = write_through_pipe(spec, plain);
    EXPECT_TRUE(piped == slurp(dir / "ranged"));
    check_dump(dir / "ranged", spec, plain);
}

}  // namespace
}  // namespace xendump::test
