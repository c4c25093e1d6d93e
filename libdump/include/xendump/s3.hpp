// S3-compatible object storage (issue 34): the client the dump sinks and
// readers use, over libcurl with its SigV4 signing (every request carries
// x-amz-content-sha256, the SHA-256 of its body), path-style URLs
// (ENDPOINT/BUCKET/KEY). TLS is verified against the system's CAs; plain
// HTTP only for an endpoint written http://. Failed requests that may
// succeed later (no connection, a timeout, HTTP 5xx, 429, SlowDown) are
// retried a bounded number of times with doubling waits. Every Error names
// the object (s3://BUCKET/KEY) and carries S3's error code and message.
// Credentials never appear in an error, a log line or a command line.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace xendump::s3 {

// s3://BUCKET/KEY (KEY may be empty: a bucket or a prefix).
struct Url {
    std::string bucket;
    std::string key;
    std::string str() const;  // s3://BUCKET/KEY
};
bool is_url(std::string_view text);
// Error unless `text` is s3://BUCKET[/KEY] with a valid bucket name.
Url parse_url(std::string_view text);

struct Credentials {
    std::string access_key_id;
    std::string secret_access_key;
    std::string session_token;  // empty: none
    std::string source;         // where they came from (for messages; never the secrets)
};

struct Settings {
    std::string endpoint;  // https://host[:port] or http://host[:port]
    std::string region = "us-east-1";
    Credentials credentials;
    unsigned attempts = 5;                                      // per request, the first included
    std::chrono::milliseconds first_backoff{200};               // doubled after each failure
    std::chrono::milliseconds max_backoff{5000};
    std::chrono::seconds connect_timeout{10};
    std::chrono::seconds stall_timeout{60};  // no byte moved for this long: the attempt fails
};

// Where the client's settings come from, as the AWS tools read them:
// - credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with
//   AWS_SESSION_TOKEN); else the systemd credential `aws-credentials`
//   ($CREDENTIALS_DIRECTORY/aws-credentials, LoadCredential=) in the shared
//   credentials file's format; else the shared credentials file
//   (AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials); the profile is
//   AWS_PROFILE, else "default";
// - region: AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`, us-east-1;
// - endpoint: AWS_ENDPOINT_URL, the profile's `endpoint_url`, else
//   https://s3.REGION.amazonaws.com.
// `endpoint` and `region` given here (the configuration's Endpoint=,
// Region=) come first. Error when no credentials are found or a file
// cannot be read.
Settings settings_from_environment(const std::string& endpoint = {}, const std::string& region = {});

struct ObjectInfo {
    std::string key;
    uint64_t size = 0;
    std::string etag;
    std::string last_modified;
    std::map<std::string, std::string> metadata;  // x-amz-meta-* (HEAD only), names lower case
};

struct PartInfo {
    unsigned number = 0;
    std::string etag;
    uint64_t size = 0;
};

struct UploadInfo {
    std::string key;
    std::string upload_id;
    std::string initiated;
};

// How a dump streams into a multipart upload: parts of part_size bytes,
// at most in_flight of them uploading at once (memory: 1 + in_flight parts).
// 16 MiB parts take an object up to 156 GiB (S3's 10000 parts).
struct UploadOptions {
    uint64_t part_size = uint64_t{16} << 20;      // 5 MiB (S3's least) to 5 GiB
    unsigned in_flight = 3;                       // 1 to 16
    std::map<std::string, std::string> metadata;  // x-amz-meta-* of the object
};

// Counts of what went over the wire (for tests and benchmarks).
struct Traffic {
    uint64_t requests = 0;
    uint64_t retries = 0;
    uint64_t bytes_sent = 0;      // request bodies
    uint64_t bytes_received = 0;  // response bodies
};

// Safe to use from several threads at once (each request takes a
// connection of its own from a small pool).
class Client {
public:
    explicit Client(Settings settings);
    ~Client();
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    const Settings& settings() const noexcept;

    void create_bucket(const std::string& bucket);
    void put_object(const Url& obj, std::span<const std::byte> data,
                    const std::map<std::string, std::string>& metadata = {});
    std::optional<ObjectInfo> head_object(const Url& obj);  // nullopt: no such object
    // Reads [offset, offset + out.size()) of the object into `out`; Error if
    // the object is shorter.
    void get_range(const Url& obj, uint64_t offset, std::span<std::byte> out);
    std::vector<std::byte> get_object(const Url& obj);  // the whole object, in memory
    void delete_object(const Url& obj);
    // Every object whose key starts with `prefix`, following the pages of
    // ListObjectsV2 (`page_size` keys a request).
    std::vector<ObjectInfo> list_objects(const std::string& bucket, const std::string& prefix,
                                         unsigned page_size = 1000);

    std::string create_multipart_upload(const Url& obj, const std::map<std::string, std::string>& metadata = {});
    // Returns the part's ETag. The request carries the SHA-256 of `data`
    // (SigV4's signed payload).
    std::string upload_part(const Url& obj, const std::string& upload_id, unsigned part_number,
                            std::span<const std::byte> data);
    // The same for a caller that has the part's MD5 already: it goes as
    // Content-MD5, signed, which the store checks against the bytes, and the
    // payload as UNSIGNED-PAYLOAD (no SHA-256 of it taken).
    std::string upload_part(const Url& obj, const std::string& upload_id, unsigned part_number,
                            std::span<const std::byte> data, const std::array<unsigned char, 16>& content_md5);
    std::vector<PartInfo> list_parts(const Url& obj, const std::string& upload_id);
    void complete_multipart_upload(const Url& obj, const std::string& upload_id, std::span<const PartInfo> parts);
    void abort_multipart_upload(const Url& obj, const std::string& upload_id);
    std::vector<UploadInfo> list_multipart_uploads(const std::string& bucket, const std::string& prefix);

    Traffic traffic() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace xendump::s3
