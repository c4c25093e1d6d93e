// The S3 client (xendump/s3.hpp) against the real store of the s3-lab
// (Ceph RGW): objects put, read whole and by ranges, listed a page at a
// time, deleted; multipart uploads made, listed, completed and aborted;
// errors that name the object and carry S3's code. The settings as
// operators give them (environment, shared credentials file, systemd's
// credentials directory) and the XML parser's refusals need no store.
#include <openssl/evp.h>

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "s3_lab.hpp"
#include "store/xml.hpp"
#include "test_support.hpp"
#include "xendump/error.hpp"

namespace xendump::test {
namespace {

std::vector<std::byte> random_bytes(size_t n, unsigned seed) {
    std::vector<std::byte> v(n);
    std::mt19937_64 rng(seed);
    for (auto& b : v) b = static_cast<std::byte>(rng());
    return v;
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(S3Client, PutGetRangesHeadDelete) {
    REQUIRE_S3_LAB();
    s3::Client c(s3_lab().settings());
    const std::string bucket = new_bucket(c, "objects");
    const auto data = random_bytes(300000, 1);
    const s3::Url obj{bucket, "dir/a key with spaces+and%signs.bin"};
    c.put_object(obj, data, {{"domain", "guest7"}});
    auto info = c.head_object(obj);
    ASSERT_TRUE(info);
    EXPECT_EQ(info->size, data.size());
    EXPECT_EQ(info->metadata["domain"], "guest7");
    EXPECT_EQ(c.get_object(obj), data);
    for (auto [off, len] : {std::pair<uint64_t, size_t>{0, 1}, {12345, 4096}, {data.size() - 7, 7}}) {
        std::vector<std::byte> part(len);
        c.get_range(obj, off, part);
        EXPECT_TRUE(std::equal(part.begin(), part.end(), data.begin() + static_cast<std::ptrdiff_t>(off))) << off;
    }
    std::vector<std::byte> past(10);
    const std::string e = error_of([&] { c.get_range(obj, data.size() - 5, past); });
    EXPECT_NE(e.find("s3://" + bucket + "/dir/a key"), std::string::npos) << e;
    c.delete_object(obj);
    EXPECT_FALSE(c.head_object(obj));
}

TEST(S3Client, ListsEveryPage) {
    REQUIRE_S3_LAB();
    s3::Client c(s3_lab().settings());
    const std::string bucket = new_bucket(c, "listing");
    std::vector<std::string> keys;
    for (int i = 0; i < 23; ++i) keys.push_back("p/" + std::to_string(1000 + i));
    for (const auto& k : keys) c.put_object({bucket, k}, random_bytes(static_cast<size_t>(k.back()), 2));
    c.put_object({bucket, "other"}, random_bytes(3, 3));
    const auto listed = c.list_objects(bucket, "p/", 5);  // five pages of 5 or fewer
    ASSERT_EQ(listed.size(), keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
        EXPECT_EQ(listed[i].key, keys[i]);
        EXPECT_EQ(listed[i].size, static_cast<uint64_t>(keys[i].back()));
    }
    EXPECT_EQ(c.list_objects(bucket, "").size(), keys.size() + 1);
    EXPECT_GE(c.traffic().requests, 5u);
}

TEST(S3Client, MultipartUploadListCompleteAbort) {
    REQUIRE_S3_LAB();
    s3::Client c(s3_lab().settings());
    const std::string bucket = new_bucket(c, "multipart");
    const s3::Url obj{bucket, "big"};
    const auto p1 = random_bytes(5u << 20, 4), p2 = random_bytes(5u << 20, 5), p3 = random_bytes(1000, 6);
    const std::string id = c.create_multipart_upload(obj);
    // Out of order, as parts in flight finish.
    std::vector<s3::PartInfo> parts(3);
    parts[2] = {3, c.upload_part(obj, id, 3, p3), p3.size()};
    parts[0] = {1, c.upload_part(obj, id, 1, p1), p1.size()};
    parts[1] = {2, c.upload_part(obj, id, 2, p2), p2.size()};
    const auto uploads = c.list_multipart_uploads(bucket, "");
    ASSERT_EQ(uploads.size(), 1u);
    EXPECT_EQ(uploads[0].key, "big");
    EXPECT_EQ(uploads[0].upload_id, id);
    const auto listed = c.list_parts(obj, id);
    ASSERT_EQ(listed.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(listed[i].number, i + 1);
        EXPECT_EQ(listed[i].etag, parts[i].etag);
        EXPECT_EQ(listed[i].size, parts[i].size);
    }
    EXPECT_FALSE(c.head_object(obj)) << "an upload not completed is no object";
    c.complete_multipart_upload(obj, id, parts);
    std::vector<std::byte> all = p1;
    all.insert(all.end(), p2.begin(), p2.end());
    all.insert(all.end(), p3.begin(), p3.end());
    EXPECT_EQ(c.get_object(obj), all);
    EXPECT_TRUE(c.list_multipart_uploads(bucket, "").empty());

    const s3::Url gone{bucket, "aborted"};
    const std::string id2 = c.create_multipart_upload(gone);
    c.upload_part(gone, id2, 1, p3);
    c.abort_multipart_upload(gone, id2);
    EXPECT_TRUE(c.list_multipart_uploads(bucket, "").empty());
    EXPECT_FALSE(c.head_object(gone));
    // A part smaller than 5 MiB before the last: S3 refuses to complete.
    const std::string id3 = c.create_multipart_upload(gone);
    std::vector<s3::PartInfo> small = {{1, c.upload_part(gone, id3, 1, p3), p3.size()},
                                       {2, c.upload_part(gone, id3, 2, p3), p3.size()}};
    const std::string e = error_of([&] { c.complete_multipart_upload(gone, id3, small); });
    EXPECT_NE(e.find("EntityTooSmall"), std::string::npos) << e;
    EXPECT_NE(e.find("s3://" + bucket + "/aborted"), std::string::npos) << e;
    c.abort_multipart_upload(gone, id3);
}

// A part sent with its MD5 (Content-MD5, the payload unsigned: the
// service's uploader, which has the MD5 anyway): the store checks the MD5
// against the bytes, so a wrong one is refused and nothing is stored.
TEST(S3Client, PartWithContentMd5IsCheckedByTheStore) {
    REQUIRE_S3_LAB();
    s3::Client c(s3_lab().settings());
    const std::string bucket = new_bucket(c, "md5");
    const s3::Url obj{bucket, "part"};
    const auto bytes = random_bytes(1000, 7);
    std::array<unsigned char, 16> md5{};
    unsigned int len = 0;
    ASSERT_EQ(EVP_Digest(bytes.data(), bytes.size(), md5.data(), &len, EVP_md5(), nullptr), 1);
    const std::string id = c.create_multipart_upload(obj);
    auto wrong = md5;
    wrong[0] ^= 1;
    const std::string e = error_of([&] { c.upload_part(obj, id, 1, bytes, wrong); });
    EXPECT_NE(e.find("BadDigest"), std::string::npos) << e;
    EXPECT_TRUE(c.list_parts(obj, id).empty());
    std::vector<s3::PartInfo> parts = {{1, c.upload_part(obj, id, 1, bytes, md5), bytes.size()}};
    c.complete_multipart_upload(obj, id, parts);
    EXPECT_EQ(c.get_object(obj), bytes);
}

TEST(S3Client, WrongCredentialsAndMissingBucketNameTheObject) {
    REQUIRE_S3_LAB();
    s3::Settings bad = s3_lab().settings();
    bad.credentials.secret_access_key = "not-the-secret-0123456789";
    s3::Client wrong(bad);
    s3::Client c(s3_lab().settings());
    const std::string bucket = new_bucket(c, "creds");
    std::string e = error_of([&] { wrong.put_object({bucket, "k"}, random_bytes(10, 7)); });
    EXPECT_NE(e.find("s3://" + bucket + "/k"), std::string::npos) << e;
    EXPECT_NE(e.find("SignatureDoesNotMatch"), std::string::npos) << e;
    EXPECT_EQ(e.find("not-the-secret"), std::string::npos) << "a secret in an error: " << e;
    e = error_of([&] { c.put_object({"no-such-bucket-s3test", "k"}, random_bytes(10, 7)); });
    EXPECT_NE(e.find("s3://no-such-bucket-s3test/k"), std::string::npos) << e;
    EXPECT_NE(e.find("NoSuchBucket"), std::string::npos) << e;
    EXPECT_TRUE(c.list_objects(bucket, "").empty());
}

TEST(S3Client, UnreachableStoreIsRetriedThenAnError) {
    s3::Settings s;
    s.endpoint = "http://127.0.0.1:1";  // nothing listens on port 1
    s.credentials = {"AKID", "SECRET", "", "test"};
    s.attempts = 3;
    s.first_backoff = std::chrono::milliseconds(1);
    s3::Client c(s);
    const std::string e = error_of([&] { c.head_object({"bucket", "key"}); });
    EXPECT_NE(e.find("after 3 attempts"), std::string::npos) << e;
    EXPECT_NE(e.find("s3://bucket/key"), std::string::npos) << e;
    EXPECT_EQ(c.traffic().retries, 2u);
}

TEST(S3Settings, EnvironmentThenSystemdCredentialThenSharedFile) {
    TempDir dir;
    std::ofstream(dir / "credentials") << "# comment\n[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = FILESECRET\n"
                                          "region = eu-west-3\n[profile other]\naws_access_key_id=OTHER\naws_secret_access_key=OS\n";
    std::filesystem::create_directory(dir / "creds");
    std::ofstream(dir / "creds" / "aws-credentials") << "[default]\naws_access_key_id=SYSTEMDKEY\naws_secret_access_key=SS\n";
    const std::string saved_id = std::getenv("AWS_ACCESS_KEY_ID") ? std::getenv("AWS_ACCESS_KEY_ID") : "";
    const std::string saved_secret = std::getenv("AWS_SECRET_ACCESS_KEY") ? std::getenv("AWS_SECRET_ACCESS_KEY") : "";
    const std::string saved_region = std::getenv("AWS_REGION") ? std::getenv("AWS_REGION") : "";
    const std::string saved_endpoint = std::getenv("AWS_ENDPOINT_URL") ? std::getenv("AWS_ENDPOINT_URL") : "";
    ::unsetenv("AWS_REGION");
    ::unsetenv("AWS_DEFAULT_REGION");
    ::unsetenv("AWS_ENDPOINT_URL");
    ::setenv("AWS_SHARED_CREDENTIALS_FILE", (dir / "credentials").c_str(), 1);
    ::setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", "ENVSECRET", 1);
    ::setenv("CREDENTIALS_DIRECTORY", (dir / "creds").c_str(), 1);
    auto s = s3::settings_from_environment();
    EXPECT_EQ(s.credentials.access_key_id, "ENVKEY");
    ::unsetenv("AWS_ACCESS_KEY_ID");
    ::unsetenv("AWS_SECRET_ACCESS_KEY");
    s = s3::settings_from_environment();
    EXPECT_EQ(s.credentials.access_key_id, "SYSTEMDKEY");
    ::unsetenv("CREDENTIALS_DIRECTORY");
    s = s3::settings_from_environment();
    EXPECT_EQ(s.credentials.access_key_id, "FILEKEY");
    EXPECT_EQ(s.credentials.secret_access_key, "FILESECRET");
    EXPECT_EQ(s.region, "eu-west-3");
    EXPECT_EQ(s.endpoint, "https://s3.eu-west-3.amazonaws.com");
    ::setenv("AWS_PROFILE", "other", 1);
    s = s3::settings_from_environment("http://127.0.0.1:9000/", "here-1");
    EXPECT_EQ(s.credentials.access_key_id, "OTHER");
    EXPECT_EQ(s.endpoint, "http://127.0.0.1:9000");
    EXPECT_EQ(s.region, "here-1");
    ::setenv("AWS_PROFILE", "missing", 1);
    const std::string e = error_of([] { s3::settings_from_environment(); });
    EXPECT_NE(e.find("no S3 credentials"), std::string::npos) << e;
    ::unsetenv("AWS_PROFILE");
    ::setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent", 1);
    if (!saved_id.empty()) ::setenv("AWS_ACCESS_KEY_ID", saved_id.c_str(), 1);
    if (!saved_secret.empty()) ::setenv("AWS_SECRET_ACCESS_KEY", saved_secret.c_str(), 1);
    if (!saved_region.empty()) ::setenv("AWS_REGION", saved_region.c_str(), 1);
    if (!saved_endpoint.empty()) ::setenv("AWS_ENDPOINT_URL", saved_endpoint.c_str(), 1);
}

TEST(S3Url, ParsesAndRefuses) {
    auto u = s3::parse_url("s3://my-bucket/a/b.core");
    EXPECT_EQ(u.bucket, "my-bucket");
    EXPECT_EQ(u.key, "a/b.core");
    EXPECT_EQ(u.str(), "s3://my-bucket/a/b.core");
    for (const char* bad : {"s3://", "s3://ab/k", "s3://Upper/k", "s3://a_b_c/k", "/tmp/x", "s3://../k"})
        EXPECT_THROW(s3::parse_url(bad), Error) << bad;
}

TEST(S3Xml, ParsesS3DocumentsAndRefusesTheRest) {
    const auto doc = store::xml::parse(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<Name>b</Name><Contents><Key>a&amp;b&#x41;&#66;</Key><Size>12</Size></Contents><IsTruncated>false</IsTruncated>"
        "</ListBucketResult>",
        "t");
    EXPECT_EQ(doc.name, "ListBucketResult");
    ASSERT_EQ(doc.all("Contents").size(), 1u);
    EXPECT_EQ(doc.all("Contents")[0]->text_of("Key"), "a&bAB");
    for (const char* bad : {"<a>", "<a></b>", "<!DOCTYPE a><a/>", "<a>&foo;</a>", "<a/><b/>", "<a x=1/>", "<a>&#x110000;</a>",
                            "<a><a><a><a><a><a><a><a><a><a><a><a><a><a><a><a><a></a></a></a></a></a></a></a></a></a></a></a>"
                            "</a></a></a></a></a></a>"})
        EXPECT_THROW(store::xml::parse(bad, "t"), Error) << bad;
}

}  // namespace
}  // namespace xendump::test
