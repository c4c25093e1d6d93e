// Issue 34 item 6: makedumpfile's flattened format (io/flattened.hpp), on
// synthetic streams: the header and record heads byte for byte, the writer
// under io::Sink against a positional file (random writes, zeros, reserves
// and rewrites), the rearranger and the in-place reader against it, records
// out of order and overlapping (a later one wins, as makedumpfile -R does,
// checked with makedumpfile when installed), the reader's strided stretches,
// compact files of simulated guests, and hostile streams: each refused with
// an error naming the file (or stream) and the offset, by the reader, the
// rearranger, xen-dump-convert (a file and standard input) and xen-dumpctl.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <iostream>
#include <random>

#include "../kdump/mixed_pages.hpp"
#include "age_write_helpers.hpp"
#include "io/flattened.hpp"
#include "io/sink.hpp"
#include "reader/dump_file.hpp"
#include "reader/flattened_image.hpp"
#include "test_support.hpp"
#include "xendump/convert.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/kdump.hpp"
#include "xendump/reader.hpp"

namespace xendump::test {
namespace {

namespace fs = std::filesystem;
namespace flat = io::flat;

bool have(const std::string& program) { return run({"sh", "-c", "command -v " + program}).exit_code == 0; }

void write_file(const fs::path& p, std::span<const std::byte> bytes) {
    std::ofstream(p, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::byte> bytes_of(std::string_view s) {
    return std::vector<std::byte>(reinterpret_cast<const std::byte*>(s.data()),
                                  reinterpret_cast<const std::byte*>(s.data()) + s.size());
}

// A stream built by hand: numbers as given (any int64), in big-endian order.
struct Stream {
    std::vector<std::byte> bytes;

    Stream& header(int64_t type = flat::kType) {
        auto h = flat::Header::ours();
        const flat::BigEndian64 t = flat::BigEndian64::of(type);
        std::memcpy(h.data() + 16, t.bytes.data(), 8);
        bytes.insert(bytes.end(), h.begin(), h.end());
        return *this;
    }
    Stream& head(int64_t offset, int64_t size) {
        const flat::BigEndian64 o = flat::BigEndian64::of(offset), s = flat::BigEndian64::of(size);
        bytes.insert(bytes.end(), o.bytes.begin(), o.bytes.end());
        bytes.insert(bytes.end(), s.bytes.begin(), s.bytes.end());
        return *this;
    }
    Stream& record(int64_t offset, std::string_view data) {
        head(offset, static_cast<int64_t>(data.size()));
        return raw(data);
    }
    Stream& raw(std::string_view data) {
        const auto b = bytes_of(data);
        bytes.insert(bytes.end(), b.begin(), b.end());
        return *this;
    }
    Stream& end() { return head(flat::kEndFlag, flat::kEndFlag); }
};

// Reads `bytes` as a stream, `chunk` bytes at most per read (a pipe's short reads).
flat::ReadSome reader_of(const std::vector<std::byte>& bytes, size_t chunk = 1000) {
    auto pos = std::make_shared<size_t>(0);
    return [&bytes, pos, chunk](std::span<std::byte> out) {
        const size_t n = std::min({out.size(), bytes.size() - *pos, chunk});
        std::memcpy(out.data(), bytes.data() + *pos, n);
        *pos += n;
        return n;
    };
}

// What the rearranger makes of `stream`: the carried file's bytes.
std::vector<std::byte> rearranged(const std::vector<std::byte>& stream, const fs::path& scratch) {
    UniqueFd out(::open(scratch.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!out) throw std::runtime_error("cannot create " + scratch.string());
    flat::rearrange(reader_of(stream), "stream", out.get(), scratch.string());
    return slurp(scratch);
}

// What the in-place reader makes of the file `p`: the carried file's bytes.
std::vector<std::byte> read_in_place(const fs::path& p, size_t* stretches = nullptr) {
    reader::DumpFile f(p.string());
    EXPECT_TRUE(f.unflatten());
    if (stretches) *stretches = f.flattened()->stretches();
    std::vector<std::byte> out(static_cast<size_t>(f.size()));
    f.read_exact(0, out, "everything");
    return out;
}

// makedumpfile -R OUT < STREAM: the carried file, or nullopt when makedumpfile is not installed.
std::optional<std::vector<std::byte>> makedumpfile_rearranged(const fs::path& stream, const fs::path& out) {
    if (!have("makedumpfile")) return std::nullopt;
    fs::remove(out);
    RunResult r = run({"sh", "-c", "makedumpfile -R \"$0\" < \"$1\"", out.string(), stream.string()});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return slurp(out);
}

TEST(FlattenedFormat, HeaderAndRecordHeadsAreMakedumpfilesBigEndianStructs) {
    const auto h = flat::Header::ours();
    ASSERT_EQ(h.size(), 4096u);
    EXPECT_EQ(0, std::memcmp(h.data(), "makedumpfile\0\0\0\0", 16));
    const unsigned char one[8] = {0, 0, 0, 0, 0, 0, 0, 1};
    EXPECT_EQ(0, std::memcmp(h.data() + 16, one, 8)) << "type 1, TYPE_FLAT_HEADER";
    EXPECT_EQ(0, std::memcmp(h.data() + 24, one, 8)) << "version 1, VERSION_FLAT_HEADER";
    EXPECT_TRUE(std::all_of(h.begin() + 32, h.end(), [](std::byte b) { return b == std::byte{0}; }));
    EXPECT_TRUE(flat::has_signature(h));

    const flat::RecordHead r = flat::RecordHead::of(0x0102030405060708, 0x1000);
    const unsigned char want[16] = {1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0x10, 0};
    EXPECT_EQ(0, std::memcmp(&r, want, 16));
    const flat::RecordHead e = flat::RecordHead::end();
    const std::vector<unsigned char> ones(16, 0xff);
    EXPECT_EQ(0, std::memcmp(&e, ones.data(), 16)) << "END_FLAG_FLAT_HEADER: offset = size = -1";
    EXPECT_EQ(flat::BigEndian64::of(-2).value(), -2);
}

// Random writes, zeros, reserves and rewrites through io::Sink: into a file
// positionally, and as a flattened stream through a real pipe; the stream
// rearranged (here, in place, and by makedumpfile -R) is the file, byte for byte.
TEST(FlattenedFormat, StreamRearrangesIntoWhatAPositionalSinkWrites) {
    TempDir dir;
    for (uint64_t seed : {1, 2, 3, 4, 5}) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        std::mt19937_64 g(seed);
        struct Op {
            int kind;
            uint64_t n, at;
            std::vector<std::byte> data;
        };
        std::vector<Op> ops;
        uint64_t pos = 0;
        std::vector<std::pair<uint64_t, uint64_t>> reserved;
        for (int i = 0; i < 300; ++i) {
            Op op{static_cast<int>(g() % 10), 0, 0, {}};
            auto random_bytes = [&](uint64_t n) {
                std::vector<std::byte> b(n);
                for (auto& x : b) x = std::byte(g() % 7 == 0 ? 0 : g());
                return b;
            };
            if (op.kind <= 3) {  // bytes, some larger than a record
                op.n = g() % 25 == 0 ? 1 + g() % (9u << 20) : 1 + g() % 20000;
                op.data = random_bytes(op.n);
                pos += op.n;
            } else if (op.kind <= 5) {  // zeros: short (written) or long (a hole)
                op.n = g() % 2 ? 1 + g() % 100 : 5000 + g() % 300000;
                pos += op.n;
            } else if (op.kind == 6) {
                op.n = 1 + g() % 50000;
                reserved.push_back({pos, op.n});
                pos += op.n;
            } else if (pos > 0) {  // a rewrite: in a reserve, or anywhere written
                if (!reserved.empty() && g() % 2) {
                    const auto& [r0, rn] = reserved[g() % reserved.size()];
                    op.at = r0 + g() % rn;
                    op.n = 1 + g() % (r0 + rn - op.at);
                } else {
                    op.at = g() % pos;
                    op.n = 1 + g() % std::min<uint64_t>(pos - op.at, 70000);
                }
                op.data = random_bytes(op.n);
                op.kind = 7;
            } else {
                continue;
            }
            ops.push_back(std::move(op));
        }
        auto apply = [&](io::Sink& s) {
            for (const Op& op : ops) {
                if (op.kind <= 3) s.write(op.data);
                else if (op.kind <= 5) s.zeros(op.n);
                else if (op.kind == 6) s.reserve(op.n);
                else s.write_at(op.at, op.data);
            }
            s.finish();
        };
        const fs::path plain = dir / "plain", stream_file = dir / "stream";
        {
            UniqueFd fd(::open(plain.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
            io::Sink s(fd.get(), true, false, plain.string());
            apply(s);
        }
        uint64_t records = 0;
        const std::vector<std::byte> stream = through_pipe([&](int fd) {
            io::FlattenedOutput out(fd, false, "pipe");
            io::Sink s(out, "pipe");
            apply(s);
            records = out.records();
        });
        const std::vector<std::byte> want = slurp(plain);
        ASSERT_EQ(want.size(), pos);
        write_file(stream_file, stream);
        EXPECT_EQ(rearranged(stream, dir / "r"), want);
        size_t stretches = 0;
        EXPECT_EQ(read_in_place(stream_file, &stretches), want);
        EXPECT_LE(stretches, 2 * records) << "a record adds itself and at most the tail of one it splits";
        if (auto theirs = makedumpfile_rearranged(stream_file, dir / "m")) {
            EXPECT_EQ(*theirs, want);
        }
        // Records of 4 MiB at most: makedumpfile -R counts a record's bytes in an int.
        std::cout << "[ measured ] seed " << seed << ": " << records << " records, " << stretches
                  << " stretches for " << pos << " bytes\n";
    }
}

// Records out of order and overlapping: each goes at its offset in stream
// order, so the later one wins; what none wrote is a hole. makedumpfile -R
// (when installed) makes the same file.
TEST(FlattenedFormat, LaterRecordsWinAndGapsAreHoles) {
    TempDir dir;
    Stream s;
    s.header().record(10, "BBBBBB").record(0, "AAAA").record(12, "cc").record(8, "DDD").record(30, "E").end();
    std::string want(31, '\0');
    std::memcpy(want.data(), "AAAA", 4);
    std::memcpy(want.data() + 8, "DDDBccBB", 8);
    want[30] = 'E';
    const auto expected = bytes_of(want);
    EXPECT_EQ(rearranged(s.bytes, dir / "r"), expected);
    write_file(dir / "s", s.bytes);
    EXPECT_EQ(read_in_place(dir / "s"), expected);
    if (auto theirs = makedumpfile_rearranged(dir / "s", dir / "m")) {
        EXPECT_EQ(*theirs, expected);
    }
}

// Records of one size that follow one another for consecutive bytes (as
// makedumpfile -F writes its page data) make one stretch of the reader's
// map; a later record over their middle splits it, and every byte reads right.
TEST(FlattenedFormat, ConsecutiveRecordsOfOneSizeMakeOneStretch) {
    TempDir dir;
    Stream s;
    s.header();
    std::string want;
    for (int k = 0; k < 1000; ++k) {
        const std::string rec(16, static_cast<char>('a' + k % 26));
        s.record(static_cast<int64_t>(want.size()), rec);
        want += rec;
    }
    s.record(static_cast<int64_t>(want.size()), "tail");  // shorter: still the same stretch
    want += "tail";
    write_file(dir / "one", Stream(s).end().bytes);
    size_t stretches = 0;
    EXPECT_EQ(read_in_place(dir / "one", &stretches), bytes_of(want));
    EXPECT_EQ(stretches, 1u);

    s.record(1000, "0123456789ABCDEFGHIJ").end();  // over the middle, across record boundaries
    std::memcpy(want.data() + 1000, "0123456789ABCDEFGHIJ", 20);
    write_file(dir / "split", s.bytes);
    EXPECT_EQ(read_in_place(dir / "split", &stretches), bytes_of(want));
    EXPECT_EQ(stretches, 3u);
    // Reads of every size at every place cross the records' heads right.
    reader::DumpFile f((dir / "split").string());
    ASSERT_TRUE(f.unflatten());
    std::mt19937 g(7);
    for (int i = 0; i < 2000; ++i) {
        const size_t at = g() % want.size(), n = 1 + g() % std::min<size_t>(100, want.size() - at);
        std::vector<std::byte> got(n);
        f.read_exact(at, got, "piece");
        ASSERT_EQ(0, std::memcmp(got.data(), want.data() + at, n)) << at << "+" << n;
    }
}

// A compact file streamed (write_kdump_flattened) is the file write_kdump_file
// writes, once rearranged; DumpReader reads the stream itself, verify included.
TEST(FlattenedFormat, CompactFileStreamedIsTheFileWritten) {
    TempDir dir;
    for (bool pv : {false, true}) {
        for (Compression c : {Compression::zstd, Compression::none}) {
            SCOPED_TRACE(std::string(pv ? "pv " : "hvm ") + std::string(to_string(c)));
            std::vector<PageEntry> list;
            for (uint64_t pfn = 0; pfn < 5000; ++pfn)
                if (pfn % 900 != 3) list.push_back({pfn, pv ? 0x900000 - 7 * pfn : pfn});
            DumpSpec spec;
            spec.type = pv ? format::GuestType::pv : format::GuestType::hvm;
            spec.domain.set(keys::kDomid, "4");
            spec.domain.set(keys::kType, std::string(format::to_string(spec.type)));
            spec.vcpus.push_back({0, std::vector<std::byte>(format::kVcpuContextSize64, std::byte{1})});
            const fs::path file = dir / "file.kdump", stream = dir / "stream.flat";
            fs::remove(file);
            MixedSource a(list), b(list);
            const KdumpOptions o = kdump_options(c, 3);
            write_kdump_file(file, spec, a, o);
            WriteResult w;
            write_file(stream, through_pipe([&](int fd) { w = write_kdump_flattened(fd, spec, b, o); }));
            EXPECT_EQ(w.file_size, fs::file_size(stream));
            EXPECT_EQ(rearranged(slurp(stream), dir / "r"), slurp(file));
            DumpReader r = DumpReader::open(stream);
            ASSERT_TRUE(r.flattened().has_value());
            EXPECT_EQ(r.flattened()->stored_size, fs::file_size(stream));
            EXPECT_GT(r.flattened()->records, 2u);
            EXPECT_EQ(r.file_size(), fs::file_size(file));
            EXPECT_EQ(r.nr_pages(), list.size());
            EXPECT_TRUE(r.verify().empty());
            EXPECT_FALSE(DumpReader::open(file).flattened().has_value());
            std::vector<std::byte> page(4096), want(4096);
            for (size_t i = 0; i < list.size(); i += 37) {
                ASSERT_TRUE(r.read_page_by_pfn(list[i].pfn, page));
                fill_mixed_page(list[i].pfn, want.data());
                ASSERT_EQ(page, want) << "pfn " << list[i].pfn;
            }
            // Flattened into a file (KdumpOptions::flattened): the same stream, published.
            const fs::path published = dir / "published.flat";
            fs::remove(published);
            KdumpOptions f = o;
            f.flattened = true;
            MixedSource c3(list);
            write_kdump_file(published, spec, c3, f);
            EXPECT_EQ(slurp(published), slurp(stream));
        }
    }
}

// With recipients the stream is the age file of the flattened bytes: age
// -d gives the plain stream; the readers open it with the key (and say it
// is both); xen-dump-convert --decrypt rearranges it in clear, and refuses
// to without --decrypt or to encrypt the result.
TEST(FlattenedFormat, EncryptedStreamIsTheAgeFileOfThePlainOne) {
    TempDir dir;
    const agewrite::AgeKey key = agewrite::age_keygen(dir.path());
    std::vector<PageEntry> list;
    for (uint64_t pfn = 0; pfn < 3000; ++pfn) list.push_back({pfn, pfn});
    DumpSpec spec;
    spec.type = format::GuestType::pvh;
    spec.domain.set(keys::kDomid, "5");
    spec.domain.set(keys::kType, "pvh");
    spec.vcpus.push_back({0, std::vector<std::byte>(format::kVcpuContextSize64, std::byte{2})});
    KdumpOptions o = kdump_options(Compression::zstd, 2);
    MixedSource a(list), b(list);
    const fs::path plain = dir / "plain.flat", sealed = dir / "sealed.flat.age";
    write_file(plain, through_pipe([&](int fd) { write_kdump_flattened(fd, spec, a, o); }));
    o.write.recipients = {key.recipient};
    write_file(sealed, through_pipe([&](int fd) { write_kdump_flattened(fd, spec, b, o); }));
    EXPECT_TRUE(agewrite::starts_with_age_magic(sealed));
    EXPECT_EQ(agewrite::age_decrypt(key, sealed, dir / "scratch"), slurp(plain));
    OpenOptions open;
    open.identity_files = {key.identity};
    DumpReader r = DumpReader::open(sealed, open);
    ASSERT_TRUE(r.flattened().has_value());
    ASSERT_TRUE(r.encryption().has_value());
    EXPECT_EQ(r.flattened()->stored_size, fs::file_size(plain));
    EXPECT_TRUE(r.verify().empty());
    RunResult info = run({"xen-dumpctl", "info", "-i", key.identity.string(), sealed.string()});
    EXPECT_EQ(info.exit_code, 0) << info.err;
    EXPECT_NE(info.out.find("Encrypted:"), std::string::npos) << info.out;
    EXPECT_NE(info.out.find("Flattened:"), std::string::npos) << info.out;

    const fs::path out = dir / "clear.kdump";
    RunResult c = run({"xen-dump-convert", "-q", "-i", key.identity.string(), sealed.string(), "-o", out.string()});
    EXPECT_EQ(c.exit_code, 1) << "plaintext on a disk without --decrypt";
    c = run({"xen-dump-convert", "-q", "-i", key.identity.string(), "-r", key.recipient, sealed.string(), "-o",
             out.string()});
    EXPECT_EQ(c.exit_code, 1);
    EXPECT_NE(c.err.find("rearranged as it is"), std::string::npos) << c.err;
    c = run({"xen-dump-convert", "-q", "-i", key.identity.string(), "--decrypt", sealed.string(), "-o", out.string()});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    EXPECT_EQ(slurp(out), rearranged(slurp(plain), dir / "r"));
}

// A hostile stream: what it is, and where (the offset in the stream) the
// reader, the rearranger and the programs say it is wrong.
struct Hostile {
    std::string name;
    std::vector<std::byte> bytes;
    uint64_t offset;
    std::string says;
};

std::vector<Hostile> hostile_streams() {
    auto header = [] { return Stream().header(); };
    std::vector<Hostile> out;
    {
        Stream s = header();
        s.bytes.resize(100);
        out.push_back({"truncated-header", s.bytes, 100, "truncated"});
    }
    out.push_back({"wrong-type", header().bytes, 16, "type"});
    out.back().bytes[23] = std::byte{2};
    out.push_back({"truncated-record-head", header().raw("0123456789").bytes, 4096, "16-byte head"});
    out.push_back({"truncated-record-data", header().head(0, 100).raw("only fifty bytes, not the hundred the head says").bytes,
                   4096, "ends after"});
    out.push_back({"negative-offset", header().record(-5, "abc").end().bytes, 4096, "negative offset"});
    out.push_back({"zero-size", header().head(0, 0).end().bytes, 4096, "1 byte or more"});
    out.push_back({"negative-size", header().head(0, -7).end().bytes, 4096, "1 byte or more"});
    out.push_back({"offset-overflow", header().head(std::numeric_limits<int64_t>::max() - 1, 16).raw(std::string(16, 'x')).end().bytes,
                   4096, "largest file"});
    out.push_back({"past-the-bound", header().head((int64_t{1} << 50) - 1, 2).raw("xy").end().bytes, 4096, "largest file"});
    out.push_back({"bad-second-record", header().record(0, "12345678").head(-3, 1).raw("z").end().bytes, 4096 + 16 + 8,
                   "negative offset"});
    out.push_back({"no-end-record", header().record(0, "abcd").bytes, 4096 + 16 + 4, "without its end record"});
    out.push_back({"after-the-end", header().record(0, "abcd").end().raw("xx").bytes, 4096 + 16 + 4, "follow"});
    return out;
}

TEST(FlattenedHostile, EachIsAnErrorNamingTheFileAndOffset) {
    TempDir dir;
    for (const Hostile& h : hostile_streams()) {
        SCOPED_TRACE(h.name);
        const fs::path p = dir / (h.name + ".flat");
        write_file(p, h.bytes);
        try {
            DumpReader::open(p);
            ADD_FAILURE() << "opened";
        } catch (const Error& e) {
            EXPECT_EQ(e.object(), p.string()) << e.what();
            EXPECT_EQ(e.offset(), std::optional<uint64_t>(h.offset)) << e.what();
            EXPECT_NE(e.message().find(h.says), std::string::npos) << e.what();
        }
        try {
            rearranged(h.bytes, dir / "out");
            ADD_FAILURE() << "rearranged";
        } catch (const Error& e) {
            EXPECT_EQ(e.object(), "stream") << e.what();
            EXPECT_EQ(e.offset(), std::optional<uint64_t>(h.offset)) << e.what();
            EXPECT_NE(e.message().find(h.says), std::string::npos) << e.what();
        }
        char at[32];
        std::snprintf(at, sizeof at, "at offset 0x%llx", static_cast<unsigned long long>(h.offset));
        // The programs: xen-dumpctl, xen-dump-convert on the file and on standard input.
        RunResult r = run({"xen-dumpctl", "info", p.string()});
        EXPECT_NE(r.exit_code, 0);
        EXPECT_NE(r.err.find(p.string() + ": " + at), std::string::npos) << r.err;
        const fs::path out = dir / (h.name + ".kdump");
        r = run({"xen-dump-convert", "-q", p.string(), "-o", out.string()});
        EXPECT_EQ(r.exit_code, 1) << r.err;
        EXPECT_NE(r.err.find(at), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(out));
        r = run({"sh", "-c", "exec \"$0\" -q - -o \"$1\" < \"$2\"", build_program("xen-dump-convert").string(),
                 out.string(), p.string()});
        EXPECT_EQ(r.exit_code, 1) << r.err;
        EXPECT_NE(r.err.find("standard input: " + std::string(at)), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(out));
    }
}

// A stream that is well formed but does not carry a dump is rearranged, then
// refused by the check before it appears: nothing under the output's name.
TEST(FlattenedHostile, ConvertPublishesOnlyADumpThatVerifies) {
    TempDir dir;
    const fs::path p = dir / "text.flat", out = dir / "text.kdump";
    write_file(p, Stream().header().record(0, "not a dump at all").end().bytes);
    RunResult r = run({"xen-dump-convert", "-q", p.string(), "-o", out.string()});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_FALSE(fs::exists(out));
    EXPECT_EQ(run({"xen-dump-convert", "-q", "-"}).exit_code, 2) << "standard input without -o";
}

}  // namespace
}  // namespace xendump::test
