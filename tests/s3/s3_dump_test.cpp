// Dumps streamed into S3 multipart uploads (issue 34 item 2, "stream"),
// against the s3-lab's RGW: the object holds exactly the bytes of the file
// the same writer writes (parts kept back for the late rewrites of the head,
// the page digests written ahead into the trailer), for PV, PVH and HVM
// sources over several parts, and of a compact file for each compression; `xen-dumpd --domain N -o s3://...` of
// simulated guests downloads to a dump that verifies and equals the local
// dump of the same paused guest but for its TIME=; wrong credentials, a
// missing bucket and a cancel fail naming the object and leave neither an
// object nor an upload behind.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>

#include "dump_check.hpp"
#include "dump_support.hpp"
#include "live_support.hpp"
#include "s3_lab.hpp"
#include "io/sink.hpp"
#include "kdump/write_kdump.hpp"
#include "store/multipart_output.hpp"
#include "test_support.hpp"
#include "xendump/error.hpp"
#include "xendump/reader.hpp"

namespace xendump::test {
namespace {

namespace fs = std::filesystem;
using format::GuestType;

void expect_nothing_left(s3::Client& c, const std::string& bucket) {
    EXPECT_TRUE(c.list_objects(bucket, "").empty()) << "an object was left";
    EXPECT_TRUE(c.list_multipart_uploads(bucket, "").empty()) << "an upload was left";
}

// Parts of the least size S3 takes (5 MiB), two uploading at once.
s3::UploadOptions small_parts() {
    s3::UploadOptions up;
    up.part_size = 5u << 20;
    up.in_flight = 2;
    return up;
}

// The object `url` holds exactly the bytes of `file`, as `r` says.
void expect_object_is_file(s3::Client& c, const s3::Url& url, const fs::path& file, const WriteResult& r) {
    const auto want = slurp(file);
    EXPECT_EQ(r.file_size, want.size());
    const auto got = c.get_object(url);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(got == want) << "the object differs from the file";
}

TEST(S3Dump, ObjectHoldsTheFileBytesOverManyParts) {
    REQUIRE_S3_LAB();
    s3::Client c(s3_lab().settings());
    const std::string bucket = new_bucket(c, "dumpbytes");
    TempDir dir;
    struct Case {
        GuestType type;
        uint64_t pages;
        bool digests;
    };
    for (const Case& k : {Case{GuestType::pv, 7000, true}, Case{GuestType::pvh, 4000, true},
                          Case{GuestType::hvm, 3000, false}, Case{GuestType::pv, 10, true}}) {
        SCOPED_TRACE(std::string(format::to_string(k.type)) + " " + std::to_string(k.pages));
        const DumpSpec spec = make_spec(k.type, 8, 2);
        const auto pfns = pfns_with_holes(k.pages);
        PatternPageSource a(entries_for(pfns, k.type), 9), b(entries_for(pfns, k.type), 9);
        a.zero_pfns = b.zero_pfns = {pfns[3], pfns[4]};
        WriteOptions wo;
        wo.digests = k.digests;
        wo.guest_kernel = true;  // the head's room is held back and rewritten
        wo.threads = 2;
        const fs::path file = dir / (std::string(format::to_string(k.type)) + std::to_string(k.pages) + ".core");
        write_dump_file(file, spec, a, wo);
        const s3::Url url{bucket, "d/" + file.filename().string()};
        // A 27 MiB dump is 6 parts.
        expect_object_is_file(c, url, file, write_dump_object(c, url, spec, b, wo, small_parts()));
    }
    EXPECT_TRUE(c.list_multipart_uploads(bucket, "").empty());
}

// A compact file into an object: its head, bitmaps and descriptors are
// written after its pages, so every part that holds them waits for them;
// the object is the file's bytes, for each compression.
TEST(S3Dump, CompactObjectHoldsTheFileBytes) {
    REQUIRE_S3_LAB();
    s3::Client c(s3_lab().settings());
    const std::string bucket = new_bucket(c, "compactbytes");
    TempDir dir;
    struct Case {
        GuestType type;
        uint64_t pages;
        Compression compression;
    };
    // 240000 pages: 5.5 MiB of descriptors, so the head spans two parts;
    // all but 2000 of them zero pages (the one shared zero page: no data).
    for (const Case& k : {Case{GuestType::pv, 7000, Compression::none}, Case{GuestType::hvm, 240000, Compression::zstd},
                          Case{GuestType::pvh, 3000, Compression::lz4}, Case{GuestType::pv, 10, Compression::zlib}}) {
        SCOPED_TRACE(std::string(format::to_string(k.type)) + " " + std::to_string(k.pages) + " " +
                     std::string(to_string(k.compression)));
        const DumpSpec spec = make_spec(k.type, 8, 2);
        const auto pfns = pfns_with_holes(k.pages);
        PatternPageSource a(entries_for(pfns, k.type), 5), b(entries_for(pfns, k.type), 5);
        a.zero_pfns = b.zero_pfns = {pfns[3], pfns[4]};
        if (k.pages > 100000) a.zero_pfns = b.zero_pfns = std::vector<uint64_t>(pfns.begin() + 2000, pfns.end());
        KdumpOptions ko;
        ko.compression = k.compression;
        ko.write.guest_kernel = true;
        ko.write.threads = 2;
        const fs::path file = dir / ("c" + std::to_string(k.pages) + ".kdump");
        write_kdump_file(file, spec, a, ko);
        const s3::Url url{bucket, "c/" + file.filename().string()};
        WriteResult r;
        {
            store::MultipartOutput out(c, url, small_parts());
            r = kdump::write_kdump_every_page(kdump::Destination::object_output(out, url.str()), spec, b, ko);
        }
        expect_object_is_file(c, url, file, r);
    }
    EXPECT_TRUE(c.list_multipart_uploads(bucket, "").empty());
}

TEST(S3Dump, PartsHeldBackTakeTheirRewrites) {
    REQUIRE_S3_LAB();
    s3::Client c(s3_lab().settings());
    const std::string bucket = new_bucket(c, "heldparts");
    const s3::Url url{bucket, "patched"};
    s3::UploadOptions up;
    up.part_size = 5u << 20;
    std::vector<std::byte> want(up.part_size * 3 + 100);
    for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<std::byte>(i * 7 + (i >> 20));
    {
        store::MultipartOutput out(c, url, up);
        io::Sink sink(out, url.str());
        sink.hold(10, 4);                         // in part 1
        sink.write(std::span(want).first(up.part_size * 2 + 5));
        // Ahead, in the last part, as the v1 trailer's digests come.
        const uint64_t ahead_at = up.part_size * 3;
        sink.write_ahead(ahead_at, std::span(want).subspan(ahead_at, 50));
        sink.write(std::span(want).subspan(up.part_size * 2 + 5, ahead_at - (up.part_size * 2 + 5)));
        sink.skip_written(50);
        sink.write(std::span(want).subspan(ahead_at + 50));
        const std::byte patch[4] = {std::byte{0xde}, std::byte{0xad}, std::byte{0xbe}, std::byte{0xef}};
        sink.write_at(10, patch);
        std::copy(patch, patch + 4, want.begin() + 10);
        // Part 2 was uploaded already: not held, so not rewritable.
        EXPECT_THROW(sink.write_at(up.part_size + 1, std::span(patch, 1)), Error);
        sink.finish();
        EXPECT_EQ(out.parts_held(), 1u);
        EXPECT_EQ(out.parts_uploaded(), 4u);
    }
    EXPECT_TRUE(c.get_object(url) == want);
    EXPECT_TRUE(c.list_multipart_uploads(bucket, "").empty());
}

TEST(S3Dump, ErrorsAndCancelLeaveNothing) {
    REQUIRE_S3_LAB();
    s3::Client c(s3_lab().settings());
    const std::string bucket = new_bucket(c, "dumperrors");
    const DumpSpec spec = make_spec(GuestType::pv, 8, 1);
    const auto pfns = pfns_with_holes(3000);
    PatternPageSource src(entries_for(pfns, GuestType::pv));
    s3::UploadOptions up;
    up.part_size = 5u << 20;
    auto message = [&](const std::function<void()>& f) -> std::string {
        try {
            f();
        } catch (const Error& e) {
            return e.what();
        }
        return "(no error)";
    };
    // A cancel after the first batches: the upload (parts stored) is aborted.
    std::atomic<bool> cancel{false};
    WriteOptions wo;
    wo.cancel = &cancel;
    wo.on_progress = [&](const WriteProgress& p) {
        if (p.bytes_done > (6u << 20)) cancel = true;
    };
    std::string e = message([&] { write_dump_object(c, {bucket, "cancelled.core"}, spec, src, wo, up); });
    EXPECT_NE(e.find("cancelled"), std::string::npos) << e;
    EXPECT_NE(e.find("s3://" + bucket + "/cancelled.core"), std::string::npos) << e;
    expect_nothing_left(c, bucket);

    s3::Settings bad = s3_lab().settings();
    bad.credentials.access_key_id = "NOSUCHKEY0000000000";
    s3::Client wrong(bad);
    e = message([&] { write_dump_object(wrong, {bucket, "creds.core"}, spec, src, {}, up); });
    EXPECT_NE(e.find("s3://" + bucket + "/creds.core"), std::string::npos) << e;
    EXPECT_NE(e.find("InvalidAccessKeyId"), std::string::npos) << e;
    expect_nothing_left(c, bucket);

    e = message([&] { write_dump_object(c, {"no-such-bucket-dump", "x.core"}, spec, src, {}, up); });
    EXPECT_NE(e.find("s3://no-such-bucket-dump/x.core"), std::string::npos) << e;
    EXPECT_NE(e.find("NoSuchBucket"), std::string::npos) << e;
}

// The TIME= value of a v1 dump's NT_XEN_DOMAIN (the one thing two dumps of
// the same paused guest do not share, with the notes' digest it changes).
size_t differing_bytes(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
    size_t n = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += a[i] != b[i];
    return n + (a.size() > b.size() ? a.size() - b.size() : b.size() - a.size());
}

TEST(S3Dump, DumpdStreamsSimGuestsToS3) {
    REQUIRE_S3_LAB();
    s3::Client c(s3_lab().settings());
    const std::string bucket = new_bucket(c, "dumpd");
    using dump::json;
    const std::vector<json> domains = {
        dump::pv_domain(7, 8, "tree", 16384, json::array({json::array({0, 0x100000, 9000})})),
        dump::hvm_domain(8, "pvh", 8192, json::array({json::array({0, 0x200000, 5000})})),
        dump::hvm_domain(9, "hvm", 8192, json::array({json::array({0, 0x300000, 0xA0}), json::array({0x100, 0x300100, 3000})})),
    };
    sim::Host host(dump::host_spec(domains));
    TempDir dir;
    for (const char* domid : {"7", "8", "9"}) {
        SCOPED_TRACE(domid);
        const std::string key = std::string("host/") + domid + ".core";
        const RunResult s = run({"xen-dumpd", "--host", host.host(), "--domain", domid, "-q", "-o", "s3://" + bucket + "/" + key});
        ASSERT_EQ(s.exit_code, 0) << s.err;
        EXPECT_EQ(s.out, "s3://" + bucket + "/" + key + "\n");
        const fs::path local = dir / (std::string(domid) + ".core");
        const RunResult f = run({"xen-dumpd", "--host", host.host(), "--domain", domid, "-q", "-o", local.string()});
        ASSERT_EQ(f.exit_code, 0) << f.err;
        const auto object = c.get_object({bucket, key});
        const fs::path got = dir / (std::string(domid) + ".s3.core");
        std::ofstream(got, std::ios::binary).write(reinterpret_cast<const char*>(object.data()), static_cast<std::streamsize>(object.size()));
        const auto want = slurp(local);
        ASSERT_EQ(object.size(), want.size());
        // Same bytes but for TIME= (seconds apart) and the notes' digest.
        EXPECT_LE(differing_bytes(object, want), 16u + 20u);
        const RunResult v = run({"xen-dumpctl", "verify", got.string()});
        EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
    }
    EXPECT_TRUE(c.list_multipart_uploads(bucket, "").empty());
    // Wrong credentials and a missing bucket: the object named, nothing left.
    RunResult r = run({"xen-dumpd", "--host", host.host(), "--domain", "7", "-q", "-o", "s3://" + bucket + "/bad.core"},
                      {"AWS_SECRET_ACCESS_KEY=wrong-secret-value"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("s3://" + bucket + "/bad.core"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("SignatureDoesNotMatch"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("wrong-secret-value"), std::string::npos) << r.err;
    r = run({"xen-dumpd", "--host", host.host(), "--domain", "7", "-q", "-o", "s3://no-such-bucket-dumpd/x.core"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("s3://no-such-bucket-dumpd/x.core"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("NoSuchBucket"), std::string::npos) << r.err;
    EXPECT_EQ(c.list_objects(bucket, "").size(), 3u);
    EXPECT_TRUE(c.list_multipart_uploads(bucket, "").empty());
    // No credentials at all: said, before anything is dumped.
    r = run({"xen-dumpd", "--host", host.host(), "--domain", "7", "-q", "-o", "s3://" + bucket + "/none.core"},
            {"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY="});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("no S3 credentials"), std::string::npos) << r.err;
    // Not flattened into an object (the object is the compact file).
    r = run({"xen-dumpd", "--host", host.host(), "--domain", "7", "--format", "kdump", "-F", "-o", "s3://" + bucket + "/f.kdump"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--flattened"), std::string::npos) << r.err;
    EXPECT_EQ(c.list_objects(bucket, "").size(), 3u);
}

// `xen-dumpd --format kdump -o s3://...`: the compact file streamed, at
// levels 0 and 1; downloaded, it verifies and its pages are those of the
// local compact dump of the same paused guest.
TEST(S3Dump, DumpdStreamsCompactDumpsToS3) {
    REQUIRE_S3_LAB();
    s3::Client c(s3_lab().settings());
    const std::string bucket = new_bucket(c, "dumpdcompact");
    using dump::json;
    const std::vector<json> domains = {
        dump::pv_domain(7, 8, "tree", 16384, json::array({json::array({0, 0x100000, 9000})})),
        dump::hvm_domain(9, "hvm", 8192, json::array({json::array({0, 0x300000, 0xA0}), json::array({0x100, 0x300100, 3000})})),
    };
    sim::Host host(dump::host_spec(domains));
    TempDir dir;
    for (const std::string domid : {"7", "9"}) {
        for (const std::string level : {"0", "1"}) {
            SCOPED_TRACE(domid + " level " + level);
            const std::string key = "host/" + domid + "-" + level + ".kdump";
            const RunResult s = run({"xen-dumpd", "--host", host.host(), "--domain", domid, "-q", "--format", "kdump",
                                     "--dump-level", level, "-o", "s3://" + bucket + "/" + key});
            ASSERT_EQ(s.exit_code, 0) << s.err;
            EXPECT_EQ(s.out, "s3://" + bucket + "/" + key + "\n");
            const fs::path local = dir / (domid + "-" + level + ".kdump");
            const RunResult f = run({"xen-dumpd", "--host", host.host(), "--domain", domid, "-q", "--format", "kdump",
                                     "--dump-level", level, "-o", local.string()});
            ASSERT_EQ(f.exit_code, 0) << f.err;
            const auto object = c.get_object({bucket, key});
            const fs::path got = dir / (domid + "-" + level + ".s3.kdump");
            std::ofstream(got, std::ios::binary)
                .write(reinterpret_cast<const char*>(object.data()), static_cast<std::streamsize>(object.size()));
            const auto want = slurp(local);
            ASSERT_EQ(object.size(), want.size());
            // The same but for the dumps' times (seconds apart).
            EXPECT_LE(differing_bytes(object, want), 64u);
            const RunResult v = run({"xen-dumpctl", "verify", got.string()});
            EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
            const DumpReader rg = DumpReader::open(got), rw = DumpReader::open(local);
            ASSERT_EQ(rg.nr_pages(), rw.nr_pages());
            EXPECT_EQ(rg.zero_pages(), rw.zero_pages());
            std::vector<std::byte> pg(4096), pw(4096);
            for (uint64_t i = 0; i < rw.nr_pages(); i += 97) {
                const uint64_t pfn = rw.entry(i).pfn;
                ASSERT_TRUE(rg.read_page_by_pfn(pfn, pg));
                ASSERT_TRUE(rw.read_page_by_pfn(pfn, pw));
                EXPECT_TRUE(pg == pw) << "pfn " << pfn;
            }
        }
    }
    EXPECT_TRUE(c.list_multipart_uploads(bucket, "").empty());
}

}  // namespace
}  // namespace xendump::test

namespace xendump::test {
namespace {

// A consistent live dump streamed into an object (issue 35 item 5; the
// service's Mode=stream takes the same path, dump_domain_to_object): the
// pre-copy writes its image into a temporary file and the object is made
// from it after the unpause, v1 or compact. Downloaded, it is one instant
// of the guest's writer and records the pre-copy; no upload is left open.
TEST(S3Dump, ConsistentLiveDumpStreamsFromItsImage) {
    REQUIRE_S3_LAB();
    s3::Client c(s3_lab().settings());
    const std::string bucket = new_bucket(c, "live");
    using live::json;
    const json d = live::guest(40, "hvm", 4096, 250, "random");
    sim::Host host(live::host_spec({d}));
    TempDir dir;
    for (const char* format : {"v1", "kdump"}) {
        SCOPED_TRACE(format);
        const std::string key = std::string("host/live.") + format;
        const RunResult s = run({"xen-dumpd", "--host", host.host(), "--domain", "40", "--live", "--max-pause",
                                 "30000", "--format", format, "-q", "-o", "s3://" + bucket + "/" + key},
                                {"TMPDIR=" + dir.path().string()});
        ASSERT_EQ(s.exit_code, 0) << s.err;
        const auto object = c.get_object({bucket, key});
        const fs::path got = dir / (std::string("got.") + format);
        std::ofstream(got, std::ios::binary)
            .write(reinterpret_cast<const char*>(object.data()), static_cast<std::streamsize>(object.size()));
        const DumpReader reader = DumpReader::open(got);
        EXPECT_EQ(reader.format(), std::string(format) == "v1" ? FileFormat::v1 : FileFormat::kdump);
        EXPECT_EQ(reader.domain().get(keys::kLive).value_or(""), "precopy");
        EXPECT_TRUE(reader.domain().get(keys::kPauseUsec));
        const live::Instant i = live::check_instant(reader, live::writer_of(d));
        EXPECT_TRUE(i.consistent()) << i.torn << " torn pages of " << i.pages_checked;
        EXPECT_GT(i.written, 0u);
        const json info = live::sim_info(host, 40);
        EXPECT_FALSE(info.at("logdirty").get<bool>());
        EXPECT_FALSE(info.at("paused").get<bool>());
    }
    EXPECT_TRUE(c.list_multipart_uploads(bucket, "").empty());
}

}  // namespace
}  // namespace xendump::test
