// The chunk digests of NT_XEN_DIGEST held a window at a time (issue 19,
// writer/digest_table.hpp): a seekable output gets each window in its
// planned place at once, a pipe's windows go to an unlinked temporary file;
// the bytes are those of a table held whole, and verify still checks them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "dump_check.hpp"
#include "elfcore/digest_table.hpp"
#include "io/sink.hpp"
#include "pipeline/pipeline.hpp"
#include "writer/v1_encoder.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/reader.hpp"
#include "xendump/writer.hpp"

namespace xendump::test {
namespace {

using format::GuestType;

constexpr size_t kSmallWindow = 5;  // digests: a guest of a few MiB crosses windows

struct Written {
    size_t resident = 0;  // the encoder's digest bytes in memory after the pass
    bool spilled = false;
};

// The v1 encoder with a digest window of `window` through the pipeline into
// `fd` (a file when `seekable`, else a pipe), as write_dump does.
Written write_windowed(int fd, bool seekable, const DumpSpec& spec, PatternPageSource& source, size_t window) {
    writer::V1Encoder encoder(spec, source, true, false, "windowed", window);
    io::Sink sink(fd, seekable, true, "windowed");
    pipeline::run({source, nullptr, {}, encoder}, sink, WriteOptions{});
    return {encoder.chunk_digests().resident_bytes(), encoder.chunk_digests().spilled()};
}

// NT_XEN_DIGEST's bytes, descriptor offset first.
ParsedNote digest_note(const std::filesystem::path& path) {
    ParsedDump d(path);
    const Elf64_Shdr* trailer = d.section(".note.xen_trailer");
    if (!trailer) throw std::runtime_error("no .note.xen_trailer section");
    for (ParsedNote& n : d.notes(trailer->sh_offset, trailer->sh_size))
        if (n.type == format::kNtXenDigest) return n;
    throw std::runtime_error("no NT_XEN_DIGEST");
}

void flip_bit(const std::filesystem::path& path, uint64_t offset) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    const char c = static_cast<char>(f.get());
    f.seekp(static_cast<std::streamoff>(offset));
    f.put(static_cast<char>(c ^ 0x10));
}

class DigestWindows : public ::testing::TestWithParam<GuestType> {};

// More than one window of digests (12 chunks, windows of 5): a pipe and a
// file give the bytes of the table held whole, trailer included.
TEST_P(DigestWindows, PipeAndFileGiveTheSameTrailerAsATableHeldWhole) {
    TempDir dir, spill;
    ScopedEnv tmpdir("TMPDIR", spill.path());
    const GuestType type = GetParam();
    const DumpSpec spec = make_spec(type, 8, 2);
    const auto pfns = pfns_with_holes(11 * 256 + 17);
    PatternPageSource source(entries_for(pfns, type), 7);
    for (uint64_t i = 512; i < 768; ++i) source.zero_pfns.push_back(pfns[i]);  // a whole zero chunk
    source.unreadable_pfns = {pfns[3], pfns[2000]};

    write_dump_file(dir / "whole", spec, source);  // default window: one window holds all 12
    const auto piped = through_pipe([&](int fd) {
        const Written w = write_windowed(fd, false, spec, source, kSmallWindow);
        EXPECT_TRUE(w.spilled) << "a pipe's windows go to a temporary file";
        EXPECT_LE(w.resident, kSmallWindow * 16);
    });
    {
        UniqueFd fd(::open((dir / "placed").c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
        ASSERT_TRUE(fd);
        const Written w = write_windowed(fd.get(), true, spec, source, kSmallWindow);
        EXPECT_FALSE(w.spilled) << "a file's windows go to their place in it";
        EXPECT_LE(w.resident, kSmallWindow * 16);
    }
    EXPECT_TRUE(std::filesystem::is_empty(spill.path())) << "the spill file has no name";

    const ParsedNote whole = digest_note(dir / "whole");
    ASSERT_EQ(whole.desc.size(), 8 + 16 * (12 + 2));
    EXPECT_TRUE(digest_note(dir / "placed").desc == whole.desc) << "digests placed in windows differ";
    const auto whole_bytes = slurp(dir / "whole");
    EXPECT_TRUE(slurp(dir / "placed") == whole_bytes) << "the file written in windows differs";
    ASSERT_EQ(piped.size(), whole_bytes.size());
    EXPECT_TRUE(piped == whole_bytes) << "the pipe's bytes (digests spilled) differ";
    check_dump(dir / "placed", spec, source);
    EXPECT_TRUE(DumpReader::verify_file(dir / "placed").empty());

    // A flipped bit in a page of chunk 7 (its digest in the second window,
    // written ahead) and in the stored digest of chunk 2: verify finds both.
    const uint64_t pages = DumpReader::open(dir / "placed").pages_offset();
    flip_bit(dir / "placed", pages + (7 * 256 + 9) * 4096 + 5);
    flip_bit(dir / "placed", whole.desc_offset + 8 + 16 * 2 + 3);
    const auto found = DumpReader::verify_file(dir / "placed");
    ASSERT_EQ(found.size(), 2u);
    EXPECT_EQ(found[0].check, "digest-mismatch");
    EXPECT_EQ(found[0].offset, pages + 2 * 256 * 4096);
    EXPECT_EQ(found[1].check, "digest-mismatch");
    EXPECT_EQ(found[1].offset, pages + 7 * 256 * 4096);
}

INSTANTIATE_TEST_SUITE_P(Types, DigestWindows, ::testing::Values(GuestType::pv, GuestType::hvm),
                         [](const auto& info) { return std::string(format::to_string(info.param)); });

// The default window is what the library writes with: a guest of more than
// one window of chunks (4 GiB and more) holds one window of digests, on a
// file and on a pipe, and the table it writes is every digest in order.
TEST(DigestTable, HoldsOneWindowWhateverTheNumberOfChunks) {
    TempDir dir, spill;
    ScopedEnv tmpdir("TMPDIR", spill.path());
    const uint64_t n = 3 * elfcore::DigestTable::kWindow + 123;  // 3 windows and a bit: a 12 GiB guest's chunks
    auto digest = [](uint64_t k) {
        XXH128_canonical_t d{};
        std::memcpy(d.digest, &k, sizeof k);
        d.digest[15] = 0x5a;
        return d;
    };
    std::vector<std::byte> want;
    for (uint64_t k = 0; k < n; ++k) {
        const auto d = digest(k);
        want.insert(want.end(), reinterpret_cast<const std::byte*>(d.digest),
                    reinterpret_cast<const std::byte*>(d.digest) + 16);
    }
    // Placed: at offset 100 of a file, after 100 bytes written in order.
    UniqueFd fd(::open((dir / "f").c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd);
    {
        io::Sink sink(fd.get(), true, false, "f");
        elfcore::DigestTable table("f");
        table.place_in(sink, 100);
        for (uint64_t k = 0; k < n; ++k) {
            table.add(digest(k));
            ASSERT_LE(table.resident_bytes(), elfcore::DigestTable::kWindow * 16) << "after " << k;
        }
        EXPECT_EQ(table.size(), n);
        const std::vector<std::byte> front(100, std::byte{1});
        sink.write(front);
        table.write_to(sink);
        EXPECT_EQ(sink.offset(), 100 + 16 * n);
        EXPECT_FALSE(table.spilled());
    }
    auto file = slurp(dir / "f");
    ASSERT_EQ(file.size(), 100 + want.size());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), file.begin() + 100));
    // Spilled: through a pipe.
    const auto piped = through_pipe([&](int pfd) {
        io::Sink sink(pfd, false, false, "pipe");
        elfcore::DigestTable table("pipe");
        for (uint64_t k = 0; k < n; ++k) table.add(digest(k));
        EXPECT_LE(table.resident_bytes(), elfcore::DigestTable::kWindow * 16);
        EXPECT_TRUE(table.spilled());
        table.write_to(sink);
    });
    EXPECT_TRUE(piped == want);
    EXPECT_TRUE(std::filesystem::is_empty(spill.path()));
}

// What the placed table relies on: io::Sink writes ahead only where the
// stream has not been, and only on a seekable output; the stream passes
// over those bytes (skip_written) and never over bytes it was not given.
TEST(DigestTable, TheSinkWritesAheadOnlyWhereTheStreamHasNotBeen) {
    TempDir dir;
    auto bytes = [](const std::string& s) { return std::as_bytes(std::span(s)); };
    UniqueFd fd(::open((dir / "f").c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd);
    {
        io::Sink sink(fd.get(), true, true, "f");
        sink.write(bytes("aaaaaaaaaa"));
        EXPECT_THROW(sink.write_ahead(5, bytes("x")), Error);  // behind the position
        EXPECT_THROW(sink.skip_written(1), Error);              // nothing ahead
        sink.write_ahead(20, bytes("WX"));
        EXPECT_THROW(sink.write_ahead(30, bytes("q")), Error);  // not after the last
        sink.write_ahead(22, bytes("YZ"));
        sink.write(bytes("bbbbbbbbbb"));
        EXPECT_THROW(sink.skip_written(5), Error);  // more than was written ahead
        sink.skip_written(4);
        sink.write(bytes("c"));
        sink.finish();
    }
    const auto got = slurp(dir / "f");
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(got.data()), got.size()), "aaaaaaaaaabbbbbbbbbbWXYZc");
    const auto piped = through_pipe([&](int pfd) {
        io::Sink sink(pfd, false, false, "pipe");
        EXPECT_THROW(sink.write_ahead(0, bytes("x")), Error);
    });
    EXPECT_TRUE(piped.empty());
}

// A temporary directory that cannot take the spill: a clear error naming it.
TEST(DigestTable, ASpillDirectoryThatCannotBeWrittenIsNamed) {
    TempDir dir;
    ScopedEnv tmpdir("TMPDIR", dir / "missing");
    elfcore::DigestTable table("out", 2);
    table.add(XXH128_canonical_t{});
    try {
        table.add(XXH128_canonical_t{});
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find((dir / "missing").string()), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace xendump::test
