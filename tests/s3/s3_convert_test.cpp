// xen-dump-convert and the store (issue 34 items 1 and 4 for the
// converter), against the s3-lab's RGW: a legacy xc_core file and an `xl
// dump-core` file converted into s3:// (one file, a batch, the compact
// format) give objects byte for byte the local conversions; s3:// inputs
// (one object, a prefix) converted into a directory or into the store give
// the local-input conversion's bytes, and are left as they were; an output
// object that exists is "already converted" or left alone, as a file; a
// truncated or corrupt input object fails with the error a file gets,
// naming s3://BUCKET/KEY and the offset, and leaves no object; wrong
// credentials, a missing bucket and a conversion cancelled mid-upload name
// the object and leave neither an object nor an upload.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <ctime>

#include "legacy_gen.hpp"
#include "s3_lab.hpp"
#include "test_support.hpp"
#include "xendump/convert.hpp"
#include "xendump/error.hpp"
#include "xendump/reader.hpp"
#include "xl_elf_gen.hpp"

namespace xendump::test {
namespace {

namespace fs = std::filesystem;
namespace gen = legacy_gen;

void make_legacy(const fs::path& p, uint64_t pfns, uint64_t seed) {
    auto g = gen::make_guest({.width = 8, .nr_pfns = pfns, .seed = seed});
    gen::write_bytes(p, gen::make_file(g, {.variant = gen::Variant::pv_page_list, .shuffle_seed = seed}));
}

void make_xl(const fs::path& p, bool hvm, uint64_t pfns, uint64_t seed) {
    xl_elf_gen::XlSpec s{.hvm = hvm, .seed = seed};
    for (uint64_t i = 0; i < pfns; ++i)
        if (i % 50 != 7) s.pfns.push_back(i);
    gen::write_bytes(p, xl_elf_gen::make_xl_core(s));
}

void put_file(s3::Client& c, const s3::Url& url, const fs::path& file) {
    const auto bytes = slurp(file);
    c.put_object(url, bytes);
}

// The local file's mtime made the object's Last-Modified (whole seconds):
// SOURCE_ID= and TIME= then name the same source either way.
void take_mtime_of(s3::Client& c, const s3::Url& url, const fs::path& file) {
    const auto info = c.head_object(url);
    ASSERT_TRUE(info);
    std::tm tm{};
    ASSERT_TRUE(::strptime(info->last_modified.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm)) << info->last_modified;
    const timespec t[2] = {{::timegm(&tm), 0}, {::timegm(&tm), 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, file.c_str(), t, 0), 0);
}

void expect_object_is_file(s3::Client& c, const s3::Url& url, const fs::path& file) {
    SCOPED_TRACE(url.str() + " vs " + file.string());
    ASSERT_TRUE(fs::exists(file));
    const auto want = slurp(file);
    const auto got = c.get_object(url);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(got == want) << "the object differs from the local conversion";
}

void expect_same_files(const fs::path& a, const fs::path& b) {
    SCOPED_TRACE(a.string() + " vs " + b.string());
    ASSERT_TRUE(fs::exists(a));
    ASSERT_TRUE(fs::exists(b));
    EXPECT_TRUE(slurp(a) == slurp(b)) << "the conversions differ";
}

std::vector<std::string> keys_under(s3::Client& c, const std::string& bucket, const std::string& prefix) {
    std::vector<std::string> out;
    for (const auto& o : c.list_objects(bucket, prefix)) out.push_back(o.key);
    return out;
}

void expect_nothing_under(s3::Client& c, const std::string& bucket, const std::string& prefix) {
    EXPECT_TRUE(c.list_objects(bucket, prefix).empty()) << "an object was left under " << prefix;
    EXPECT_TRUE(c.list_multipart_uploads(bucket, prefix).empty()) << "an upload was left under " << prefix;
}

size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

class S3Convert : public ::testing::Test {
protected:
    void SetUp() override {
        if (!s3_lab().up()) return;  // REQUIRE_S3_LAB fails each test, saying why
        client = std::make_unique<s3::Client>(s3_lab().settings());
        make_legacy(dir / "legacy.core", 1500, 11);
        make_xl(dir / "xl.core", false, 2000, 12);
    }
    TempDir dir;
    std::unique_ptr<s3::Client> client;
};

TEST_F(S3Convert, OutputsToTheStoreAreTheLocalConversions) {
    REQUIRE_S3_LAB();
    s3::Client& c = *client;
    const std::string bucket = new_bucket(c, "convout");
    const std::string legacy = (dir / "legacy.core").string(), xl = (dir / "xl.core").string();
    // One batch of both, into the store and into a directory.
    RunResult r = run({"xen-dump-convert", "-q", "--output-dir", "s3://" + bucket + "/out", legacy, xl});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run({"xen-dump-convert", "-q", "--output-dir", (dir / "local").string(), legacy, xl});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_object_is_file(c, {bucket, "out/legacy.core"}, dir / "local/legacy.core");
    expect_object_is_file(c, {bucket, "out/xl.core"}, dir / "local/xl.core");
    EXPECT_EQ(keys_under(c, bucket, ""), (std::vector<std::string>{"out/legacy.core", "out/xl.core"}));
    // One file with -o, and compact outputs (the head written last, held back).
    r = run({"xen-dump-convert", "-q", "-o", "s3://" + bucket + "/one/xl.v1.core", xl});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_object_is_file(c, {bucket, "one/xl.v1.core"}, dir / "local/xl.core");
    r = run({"xen-dump-convert", "-q", "--format", "kdump", "--output-dir", "s3://" + bucket + "/k", legacy, xl});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run({"xen-dump-convert", "-q", "--format", "kdump", "--output-dir", (dir / "k").string(), legacy, xl});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_object_is_file(c, {bucket, "k/legacy.core"}, dir / "k/legacy.core");
    expect_object_is_file(c, {bucket, "k/xl.core"}, dir / "k/xl.core");
    EXPECT_TRUE(c.list_multipart_uploads(bucket, "").empty());

    // Run again: each object records its source and verifies, as a file would.
    r = run({"xen-dump-convert", "--json", "--output-dir", "s3://" + bucket + "/out", legacy, xl});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(count(r.out, "\"already converted\""), 2u) << r.out;
    // An object under the name that is not this source's output: left alone, the file fails.
    const auto before = c.head_object({bucket, "out/xl.core"});
    r = run({"xen-dump-convert", "-q", "-o", "s3://" + bucket + "/out/xl.core", legacy});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("output s3://" + bucket + "/out/xl.core exists but was converted from another file"),
              std::string::npos) << r.err;
    EXPECT_NE(r.err.find("not overwritten"), std::string::npos) << r.err;
    EXPECT_EQ(c.head_object({bucket, "out/xl.core"})->etag, before->etag);
    // Not an object: an encrypted output, standard input.
    r = run({"xen-dump-convert", "-r", "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p", "--output-dir",
             "s3://" + bucket + "/enc", legacy});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("not streamed to object storage"), std::string::npos) << r.err;
    expect_nothing_under(c, bucket, "enc/");
}

TEST_F(S3Convert, InputsFromTheStoreConvertAsFiles) {
    REQUIRE_S3_LAB();
    s3::Client& c = *client;
    const std::string bucket = new_bucket(c, "convin");
    for (const char* name : {"legacy.core", "xl.core"}) {
        const s3::Url url{bucket, std::string("in/") + name};
        put_file(c, url, dir / name);
        take_mtime_of(c, url, dir / name);
    }
    const auto etag = [&](const char* key) { return c.head_object({bucket, key})->etag; };
    const std::string legacy_etag = etag("in/legacy.core"), xl_etag = etag("in/xl.core");
    RunResult r = run({"xen-dump-convert", "-q", "--output-dir", (dir / "local").string(), (dir / "legacy.core").string(),
                       (dir / "xl.core").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;

    // One object at a time, into a directory.
    r = run({"xen-dump-convert", "-q", "--output-dir", (dir / "a").string(), "s3://" + bucket + "/in/legacy.core",
             "s3://" + bucket + "/in/xl.core"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_same_files(dir / "a/legacy.core", dir / "local/legacy.core");
    expect_same_files(dir / "a/xl.core", dir / "local/xl.core");
    // The prefix, as a directory, into the store.
    r = run({"xen-dump-convert", "--json", "--output-dir", "s3://" + bucket + "/out", "s3://" + bucket + "/in/"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(count(r.out, "\"result\": \"converted\""), 2u) << r.out;
    expect_object_is_file(c, {bucket, "out/legacy.core"}, dir / "local/legacy.core");
    expect_object_is_file(c, {bucket, "out/xl.core"}, dir / "local/xl.core");
    // By default beside its input, in the store.
    r = run({"xen-dump-convert", "-q", "s3://" + bucket + "/in/xl.core"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_object_is_file(c, {bucket, "in/xl.v1.core"}, dir / "local/xl.core");
    // The sources are as they were, and never deleted.
    EXPECT_EQ(etag("in/legacy.core"), legacy_etag);
    EXPECT_EQ(etag("in/xl.core"), xl_etag);
    r = run({"xen-dump-convert", "--remove-source", "--output-dir", (dir / "b").string(), "s3://" + bucket + "/in/xl.core"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("never deleted"), std::string::npos) << r.err;
    EXPECT_TRUE(c.head_object({bucket, "in/xl.core"}));
    // A key that is not there fails alone, named.
    r = run({"xen-dump-convert", "-q", "--output-dir", (dir / "c").string(), "s3://" + bucket + "/in/nothing.core"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("s3://" + bucket + "/in/nothing.core: no such object"), std::string::npos) << r.err;
}

// What the converter says about `input` (a file or an object), its name
// replaced by NAME.
std::string error_about(const std::string& input, const std::string& output_dir) {
    const RunResult r = run({"xen-dump-convert", "-q", "--output-dir", output_dir, input});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    std::string e = r.err;
    for (size_t at; (at = e.find(input)) != std::string::npos;) e.replace(at, input.size(), "NAME");
    return e;
}

TEST_F(S3Convert, BrokenInputObjectsFailAsFilesDo) {
    REQUIRE_S3_LAB();
    s3::Client& c = *client;
    const std::string bucket = new_bucket(c, "convbad");
    struct Case {
        const char* name;
        fs::path source;
        uint64_t keep;  // bytes kept of the source
        uint64_t flip;  // a byte whose bits are inverted (~0: none)
        uint64_t source_size;
    };
    const uint64_t legacy_size = fs::file_size(dir / "legacy.core"), xl_size = fs::file_size(dir / "xl.core");
    for (const Case& k : {Case{"legacy-cut.core", dir / "legacy.core", legacy_size / 2, ~0ull, legacy_size},
                          Case{"xl-cut.core", dir / "xl.core", xl_size - 4096 * 100, ~0ull, xl_size},
                          Case{"legacy-bad.core", dir / "legacy.core", legacy_size, 8, legacy_size}}) {
        SCOPED_TRACE(k.name);
        auto bytes = slurp(k.source);
        bytes.resize(k.keep);
        if (k.flip != ~0ull) bytes[k.flip] = ~bytes[k.flip];
        const fs::path local = dir / k.name;
        gen::write_bytes(local, bytes);
        const s3::Url url{bucket, std::string("in/") + k.name};
        c.put_object(url, bytes);
        const std::string from_file = error_about(local.string(), (dir / "out").string());
        const std::string from_object = error_about(url.str(), "s3://" + bucket + "/out");
        EXPECT_NE(from_object.find("NAME: "), std::string::npos) << from_object;
        // Cut short: the read past its end says where (a file's error, word for word).
        if (k.keep < k.source_size) {
            EXPECT_NE(from_object.find("offset 0x"), std::string::npos) << from_object;
        }
        EXPECT_EQ(from_object, from_file);
        expect_nothing_under(c, bucket, "out/");
        EXPECT_FALSE(fs::exists(dir / "out" / k.name));
    }
}

TEST_F(S3Convert, FailedUploadsLeaveNoObject) {
    REQUIRE_S3_LAB();
    s3::Client& c = *client;
    const std::string bucket = new_bucket(c, "convfail");
    const std::string legacy = (dir / "legacy.core").string();
    const std::string target = "s3://" + bucket + "/out/legacy.core";
    // Wrong credentials: the object named, the secret never shown.
    RunResult r = run({"xen-dump-convert", "-q", "--output-dir", "s3://" + bucket + "/out", legacy},
                      {"AWS_SECRET_ACCESS_KEY=wrong-secret-value"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(target + ": HeadObject failed: HTTP 403"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("wrong-secret-value"), std::string::npos) << r.err;
    // None at all: said, naming the object.
    r = run({"xen-dump-convert", "-q", "--output-dir", "s3://" + bucket + "/out", legacy},
            {"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY="});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(target + ": no S3 credentials"), std::string::npos) << r.err;
    // No such bucket.
    r = run({"xen-dump-convert", "-q", "--output-dir", "s3://no-such-bucket-conv/out", legacy});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("s3://no-such-bucket-conv/out/legacy.core"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("NoSuchBucket"), std::string::npos) << r.err;
    expect_nothing_under(c, bucket, "");

    // Cancelled with parts uploaded (16 MiB parts, a 24 MiB output): aborted.
    make_xl(dir / "big.core", true, 6200, 13);
    ConvertOptions co;
    std::atomic<bool> cancel{false};
    co.write.cancel = &cancel;
    co.write.on_progress = [&](const WriteProgress& p) {
        if (p.bytes_done > (20u << 20)) cancel = true;
    };
    std::string e;
    try {
        convert_file(dir / "big.core", "s3://" + bucket + "/big/big.v1.core", co);
    } catch (const Error& err) {
        e = err.what();
    }
    EXPECT_TRUE(cancel);
    EXPECT_NE(e.find("s3://" + bucket + "/big/big.v1.core"), std::string::npos) << e;
    EXPECT_NE(e.find("cancelled"), std::string::npos) << e;
    expect_nothing_under(c, bucket, "");
    // Uncancelled, the same conversion appears whole.
    convert_file(dir / "big.core", "s3://" + bucket + "/big/big.v1.core", {});
    convert_file(dir / "big.core", dir / "big.v1.core", {});
    expect_object_is_file(c, {bucket, "big/big.v1.core"}, dir / "big.v1.core");
}

}  // namespace
}  // namespace xendump::test
