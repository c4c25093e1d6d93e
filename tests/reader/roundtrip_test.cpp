// Round trips through the library's writer: what write_dump_file() stores,
// the reader finds again, page by page, and the verifier accepts.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <fstream>

#include "findings.hpp"
#include "hand_built_dump.hpp"
#include "pipeline/read_behind.hpp"
#include "test_support.hpp"
#include "xendump/fd.hpp"
#include "xendump/reader.hpp"
#include "xendump/writer.hpp"

namespace xendump::test {
namespace {

DumpSpec make_spec(format::GuestType type, unsigned nr_vcpus) {
    DumpSpec s;
    s.type = type;
    s.domain.set(keys::kDomid, "12");
    s.domain.set(keys::kName, "roundtrip");
    s.domain.set(keys::kUuid, "12345678-1234-1234-1234-123456789abc");
    s.domain.set(keys::kReason, "request");
    s.domain.set(keys::kType, std::string(format::to_string(type)));
    for (unsigned v = 0; v < nr_vcpus; ++v) {
        VcpuContext c;
        c.id = v * 3;
        c.bytes.assign(format::kVcpuContextSize64, std::byte(0x10 + v));
        s.vcpus.push_back(std::move(c));
    }
    s.xen_version.major_version = 4;
    s.xen_version.minor_version = 17;
    if (type == format::GuestType::pv) s.shared_info = std::vector<std::byte>(4096, std::byte{0x33});
    return s;
}

void round_trip(format::GuestType type, uint64_t nr, bool digests) {
    TempDir dir;
    auto entries = sample_entries(nr, type == format::GuestType::pv);
    PatternPageSource src(entries, 42);
    src.zero_pfns = {entries[5].pfn};
    auto spec = make_spec(type, 3);
    WriteOptions wo;
    wo.digests = digests;
    auto path = dir / "rt.core";
    auto wr = write_dump_file(path, spec, src, wo);

    auto r = DumpReader::open(path);
    EXPECT_EQ(r.format(), FileFormat::v1);
    EXPECT_EQ(r.type(), type);
    EXPECT_EQ(r.file_size(), wr.file_size);
    ASSERT_EQ(r.nr_pages(), entries.size());
    EXPECT_EQ(r.runs().size(), wr.nr_runs);
    EXPECT_EQ(r.has_digests(), digests);
    std::vector<std::byte> page(4096), want(4096);
    for (const auto& e : entries) {
        if (e.pfn == entries[5].pfn)
            std::fill(want.begin(), want.end(), std::byte{0});
        else
            fill_pattern_page(42, e.pfn, want.data());
        ASSERT_TRUE(r.read_page_by_pfn(e.pfn, page)) << e.pfn;
        ASSERT_EQ(page, want) << "pfn " << e.pfn;
        ASSERT_TRUE(r.read_page_by_gmfn(e.gmfn, page)) << e.gmfn;
        ASSERT_EQ(page, want) << "gmfn " << e.gmfn;
    }
    EXPECT_FALSE(r.read_page_by_pfn(entries[nr / 3].pfn - 1, page));  // a hole
    auto vcpus = r.vcpus();
    ASSERT_EQ(vcpus.size(), spec.vcpus.size());
    for (size_t i = 0; i < vcpus.size(); ++i) {
        EXPECT_EQ(vcpus[i].id, spec.vcpus[i].id);
        EXPECT_EQ(vcpus[i].bytes, spec.vcpus[i].bytes);
    }
    for (const auto& [k, v] : spec.domain.items()) EXPECT_EQ(r.domain().get(k), v) << k;
    EXPECT_EQ(r.domain().get(keys::kNrPages), std::to_string(nr));
    EXPECT_EQ(r.shared_info().has_value(), type == format::GuestType::pv);
    VerifyOptions vo;
    vo.allow_no_digests = !digests;
    auto fs = r.verify(vo);
    EXPECT_TRUE(fs.empty()) << describe(fs);
    if (!digests) {  // a file without digests passes only when that is allowed
        auto strict = r.verify();
        ASSERT_EQ(strict.size(), 1u) << describe(strict);
        EXPECT_EQ(strict[0].check, "digests-absent");
    }
}

TEST(RoundTrip, PvWithDigests) { round_trip(format::GuestType::pv, 700, true); }
TEST(RoundTrip, PvWithoutDigests) { round_trip(format::GuestType::pv, 300, false); }
TEST(RoundTrip, HvmWithDigests) { round_trip(format::GuestType::hvm, 520, true); }
TEST(RoundTrip, PvhWithDigests) { round_trip(format::GuestType::pvh, 257, true); }

TEST(RoundTrip, UnreadablePagesAreListed) {
    TempDir dir;
    auto entries = sample_entries(100, true);
    PatternPageSource src(entries, 3);
    src.unreadable_pfns = {entries[7].pfn, entries[60].pfn};
    auto spec = make_spec(format::GuestType::pv, 1);
    write_dump_file(dir / "u.core", spec, src);
    auto r = DumpReader::open(dir / "u.core");
    EXPECT_EQ(r.unreadable_pfns(), src.unreadable_pfns);
    EXPECT_TRUE(r.verify().empty());
}

void read_whole(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> buf(1 << 20);
    while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0) {
    }
}

TEST(RoundTrip, VerifyDroppingBehindChecksTheSameAndLeavesNothingCached) {
    // In the build tree: TMPDIR is often tmpfs, which keeps pages whatever the advice.
    TempDir dir(XENDUMP_BUILD_ROOT);
    auto entries = sample_entries(5000, true);  // 20 MiB: more than two drop windows
    PatternPageSource src(entries, 9);
    const auto path = dir / "d.core";
    write_dump_file(path, make_spec(format::GuestType::pv, 1), src);
    const auto r = DumpReader::open(path);
    const uint64_t pages_offset = r.pages_offset(), pages_size = r.nr_pages() * 4096;
    read_whole(path);
    {
        // A filesystem that keeps clean pages whatever the advice (tmpfs)
        // cannot show the difference.
        UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
        if (cached_pages(path, pages_offset, pages_size) > 0) GTEST_SKIP() << "this filesystem keeps dropped pages";
    }
    read_whole(path);
    ASSERT_EQ(cached_pages(path, pages_offset, pages_size), pages_size / 4096);

    VerifyOptions keep;
    EXPECT_TRUE(r.verify(keep).empty());
    EXPECT_EQ(cached_pages(path, pages_offset, pages_size), pages_size / 4096);
    VerifyOptions drop;
    drop.drop_behind = true;
    // Behind the reading, not only at the end: past 17 MiB, the first two
    // 8 MiB windows are gone (their first 4 MiB, clear of folios that
    // straddle a window's edge), while the pages ahead are still cached.
    bool looked = false;
    drop.on_progress = [&](uint64_t done, uint64_t) {
        if (looked || done < (17u << 20)) return;
        looked = true;
        EXPECT_EQ(cached_pages(path, pages_offset, 4u << 20), 0u);
        EXPECT_GT(cached_pages(path, pages_offset + (18u << 20), 1u << 20), 0u);
    };
    EXPECT_TRUE(r.verify(drop).empty());
    EXPECT_TRUE(looked);
    EXPECT_EQ(cached_pages(path, pages_offset, pages_size), 0u);
    drop.on_progress = nullptr;

    // Still a full check: one flipped byte in the last page is found.
    {
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(pages_offset + pages_size - 100));
        f.put('\x5a');
    }
    const auto findings = r.verify(drop);
    ASSERT_EQ(findings.size(), 1u);
    EXPECT_EQ(findings[0].check, "digest-mismatch");
}

// The writer reads back, from the file, the pages its write-behind drops;
// the check before publication compares those with the stored digests and
// reads from the disk only the chunks that were never dropped.
// Writes `path` with a check before publication that verifies the file
// using the pages the writer read back; returns what the check got and found.
struct CheckedFromReadBack {
    PagesReadBack read_back;
    std::vector<Finding> findings;
};
CheckedFromReadBack write_checked_from_read_back(const std::filesystem::path& path, PageSource& src) {
    CheckedFromReadBack out;
    WriteOptions wo;  // sparse: zero pages become holes
    wo.check_before_publish = [&](const std::filesystem::path& p, const VerifyOptions& vo) {
        out.read_back = *vo.pages_read_back;
        out.findings = DumpReader::open(p).verify(vo);
    };
    write_dump_file(path, make_spec(format::GuestType::pv, 1), src, wo);
    return out;
}

TEST(RoundTrip, PagesReadBackBehindTheWriterAreUsedByTheCheck) {
    TempDir dir(XENDUMP_BUILD_ROOT);  // a filesystem that drops pages on advice, usually
    constexpr uint64_t kChunk = 1u << 20;
    auto entries = sample_entries(24576, true);  // 96 MiB: more than the 72 MiB kept behind the writer
    PatternPageSource src(entries, 5);
    const auto path = dir / "rb.core";
    auto [rb, at_check] = write_checked_from_read_back(path, src);
    EXPECT_TRUE(at_check.empty()) << describe(at_check);

    const auto r = DumpReader::open(path);
    const uint64_t chunks = (r.nr_pages() * 4096 + kChunk - 1) / kChunk;
    EXPECT_EQ(rb.pages_offset, r.pages_offset());
    EXPECT_EQ(rb.chunk_bytes, kChunk);
    ASSERT_GT(rb.chunks, 8u);
    EXPECT_LT(rb.chunks, chunks);  // the last windows were never dropped

    // Which of the read-back chunks the last verify read from the file
    // (when the filesystem drops pages at all). Not chunk 0, nor the last
    // read-back chunk: within the kernel's read-ahead of the headers and of
    // the first chunk read.
    bool drops = false;
    auto drop = [&] {
        UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
        drops = cached_pages(path, r.pages_offset(), r.nr_pages() * 4096) == 0;
    };
    auto chunks_read = [&] {
        uint64_t n = 0;
        for (uint64_t k = 1; k + 1 < rb.chunks; ++k) n += cached_pages(path, r.pages_offset() + k * kChunk, kChunk) > 0;
        return n;
    };

    // Chunks taken from the read-back are not read again; the others are
    // read from the file.
    VerifyOptions vo;
    vo.pages_read_back = &rb;
    drop();
    EXPECT_TRUE(r.verify(vo).empty());
    if (drops) {
        EXPECT_EQ(chunks_read(), 0u);
    }

    // A read-back that does not fold to the stored digests is not trusted:
    // every chunk is read.
    PagesReadBack wrong = rb;
    wrong.digest_of_chunks[0] ^= std::byte{1};
    vo.pages_read_back = &wrong;
    drop();
    EXPECT_TRUE(r.verify(vo).empty());
    if (drops) {
        EXPECT_EQ(chunks_read(), rb.chunks - 2);
    }
    wrong = rb;
    --wrong.chunks;  // fewer chunks, the same fold
    vo.pages_read_back = &wrong;
    drop();
    EXPECT_TRUE(r.verify(vo).empty());
    if (drops) {
        EXPECT_EQ(chunks_read(), rb.chunks - 2);
    }

    // Chunk 3 of the file no longer matches its stored digest (as if the
    // kernel had written out other bytes than those hashed): read back from
    // the file, it does not fold to the stored digests, and the chunk is
    // found, named.
    {
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(r.pages_offset() + 3 * kChunk + 100));
        f.put('\x5a');
    }
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    pipeline::ReadBehind behind(fd.get(), rb.pages_offset, rb.pages_size, kChunk, "rb.core");
    behind.take(0, rb.pages_offset + rb.chunks * kChunk);
    const PagesReadBack of_changed = behind.result();
    EXPECT_EQ(of_changed.chunks, rb.chunks);
    vo.pages_read_back = &of_changed;
    auto findings = r.verify(vo);
    ASSERT_EQ(findings.size(), 1u) << describe(findings);
    EXPECT_EQ(findings[0].check, "digest-mismatch");
    EXPECT_EQ(findings[0].structure, "page chunk [3]");

    // What the writer read back (the bytes as they were) proves those
    // chunks: they are not read again, and what changed since is not seen.
    vo.pages_read_back = &rb;
    EXPECT_TRUE(r.verify(vo).empty());

    // Read back at another offset (another file): ignored, every chunk read.
    PagesReadBack moved = rb;
    moved.pages_offset += 4096;
    vo.pages_read_back = &moved;
    findings = r.verify(vo);
    ASSERT_EQ(findings.size(), 1u) << describe(findings);
    EXPECT_EQ(findings[0].structure, "page chunk [3]");
}

// A run of zero pages longer than the write-behind's depth is a hole past
// the end of the file while it is handed over: it reads back as zeros.
TEST(RoundTrip, ReadBackOfALongRunOfZeroPagesLeftAsAHole) {
    TempDir dir(XENDUMP_BUILD_ROOT);
    auto entries = sample_entries(24576, true);
    PatternPageSource src(entries, 6);
    for (size_t i = 1000; i < 21000; ++i) src.zero_pfns.push_back(entries[i].pfn);  // 78 MiB
    const auto path = dir / "z.core";
    const auto [rb, at_check] = write_checked_from_read_back(path, src);  // the zero run is a hole
    EXPECT_TRUE(at_check.empty()) << describe(at_check);
    EXPECT_GT(rb.chunks * 256, 1000u + 2 * 256);  // read back well into the zero run
    EXPECT_TRUE(DumpReader::open(path).verify().empty());
}

}  // namespace
}  // namespace xendump::test
