// The service's uploads to S3-compatible object storage ([Upload] in
// xen-dumpd.conf(5), issue 34 items 2 and 3, Mode=spool): every dump the
// service publishes in its dump directory is copied, once written, to
// s3://BUCKET/PREFIX/HOST/NAME (NAME its local file name, HOST this
// machine's host name): the dump first, its kernel log file next (when
// there is one), its sidecar last, so that a sidecar in the store always
// stands beside a complete dump. Each file goes as a multipart upload of
// PartSize= parts, each sent with its MD5 (Content-MD5, which the store
// checks; no SHA-256 of it taken) and its ETag checked against the MD5 of the
// local bytes, and the finished object's size (and multipart ETag) by
// HEAD, before the next file starts. With KeepLocal=no the local files
// are removed once all of them are in the store.
//
// A crash dump is never lost for want of the store: an upload that fails
// (no connection, DNS, 5xx after the client's own retries, wrong
// credentials, a missing bucket) leaves the dump where it is and is tried
// again after 10 s, 20 s, ... at most 10 min. What an upload has reached is
// kept in DIR/.xen-dumpd-uploads/NAME.json (dump_dir.hpp): after a restart
// the pending uploads are taken up again, a file's multipart upload
// resumed (its parts listed, only those missing or whose ETag is not the
// MD5 of the local part sent again) or begun anew when the store forgot
// it. Multipart uploads this service began and no longer needs are
// aborted (and, once a run, those under PREFIX/HOST/ that no state file
// knows, begun before the service started).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "config.hpp"
#include "sidecar.hpp"
#include "xendump/s3.hpp"

namespace xendump::daemon {

// Fixed MESSAGE_IDs of the upload's journal entries.
inline constexpr const char* kMessageDumpUploaded = "c16da53f086641bba34746af7305bd07";
inline constexpr const char* kMessageUploadFailed = "3c1ba8822a6245acaacf3b046c5859e6";

// What DIR/.xen-dumpd-uploads/NAME.json holds.
struct UploadState {
    std::string dump;                // the dump's file name in the dump directory
    int64_t queued = 0;              // unix seconds: when it was published
    std::vector<std::string> done;   // files in the store, verified (names)
    std::string key;                 // the object key of the file being uploaded
    std::string upload_id;           // its multipart upload ("" none yet)
    uint64_t part_size = 0;          // the upload's part size
    unsigned attempts = 0;           // failed attempts so far
    std::string error;               // the last one's error
    // Mode=stream: the dump was first streamed to its key and that failed;
    // whatever multipart upload the stream left there (its abort failed
    // too, with the store down) is aborted before this upload starts.
    bool stream_failed = false;
    std::string to_json() const;
    static UploadState from_json(const std::string& text, const std::string& origin);  // throws Error
};

// PREFIX/HOST/NAME (PREFIX left out when empty).
std::string upload_key(const UploadConfig& upload, const std::string& host, const std::string& file_name);
// The x-amz-meta-* of a dump's objects, from its sidecar: domain (its
// bytes outside printable ASCII, and '%', as %XX), domid, uuid, type, reason,
// time (the dump's start, ISO 8601 UTC), format, size (the dump file's
// bytes), encrypted (yes/no), panic (the guest's panic line when the
// sidecar holds it in clear: always for a plain dump, for an encrypted one
// only with ClearMetadata=panic), dump (the dump's file name, as it is).
std::map<std::string, std::string> upload_metadata(const Sidecar& s);
// "2024-05-01T10:00:00.000Z" (S3's Initiated, LastModified) as unix seconds; 0 when not that.
int64_t parse_iso_time(const std::string& text);
// The delay before attempt `attempts` + 1 after `attempts` failed ones:
// 10 s doubled each time, at most 10 min.
std::chrono::seconds upload_backoff(unsigned attempts);

// A client for [Upload]'s store: the credentials as the AWS tools find
// them, read anew each time; the client's own retries short (3 attempts),
// the caller waits and tries again. Error when the service may not open
// network sockets (kUploadSandboxHint) or no credentials are found.
std::unique_ptr<s3::Client> upload_client(const UploadConfig& cfg);

// Whether this process may open network sockets: the unit's
// RestrictAddressFamilies=AF_UNIX refuses them (EAFNOSUPPORT) unless the
// upload drop-in widens it.
bool network_sockets_allowed();
inline constexpr const char* kUploadSandboxHint =
    "install the drop-in xen-dumpd.service.d/upload.conf, see xen-dumpd.conf(5)";

// One waiting or running upload, as `xen-dumpctl status` shows it.
struct UploadSnapshot {
    std::string dump;     // path
    std::string target;   // s3://BUCKET/KEY of the dump object
    bool active = false;  // uploading now
    uint64_t bytes_done = 0, bytes_total = 0;
    unsigned attempts = 0;
    std::string reason;        // why it waits (the last error), "" when it does not
    int64_t next_attempt = 0;  // unix seconds, 0: as soon as it can
};

class Uploader {
public:
    // `config` gives the current [Upload] (read again for each attempt:
    // a reload takes effect at the next one); `host` is HOST of the keys.
    Uploader(std::filesystem::path dump_dir, std::string host, std::function<UploadConfig()> config);
    ~Uploader();
    Uploader(const Uploader&) = delete;
    Uploader& operator=(const Uploader&) = delete;

    // Takes up the uploads recorded in the state directory and starts the
    // thread that uploads.
    void start();
    // A dump just published (its sidecar written): recorded, then uploaded.
    // Error when the record cannot be written. `stream_error`: the dump
    // was first streamed (Mode=stream) and that failed so: counted as the
    // upload's first failed attempt (status shows why it waits), the next
    // after upload_backoff(1), the stream's leftover upload aborted first.
    void add(const std::filesystem::path& dump, const std::string& stream_error = {});
    // Try the waiting uploads now (a reload, a test).
    void wake();
    std::vector<UploadSnapshot> snapshot() const;
    // Stops the thread: an upload in progress stops after its current part
    // (its state kept for the next start). False when it did not within
    // `bound` (a request still hanging on the network).
    bool stop(std::chrono::milliseconds bound);

private:
    struct Entry {
        UploadState state;
        bool active = false;
        uint64_t bytes_done = 0, bytes_total = 0;
        std::chrono::steady_clock::time_point next_try{};
        int64_t next_try_unix = 0;
    };
    void run();
    void refresh(const UploadConfig& cfg);
    void attempt(const std::string& name, const UploadConfig& cfg);
    void abort_quietly(const UploadConfig& cfg, const std::string& key, const std::string& upload_id);
    void sweep(const UploadConfig& cfg);
    std::filesystem::path state_dir() const;

    std::filesystem::path dump_dir_;
    std::string host_;
    std::function<UploadConfig()> config_;
    int64_t started_ = 0;  // unix seconds
    bool swept_ = false;   // abandoned uploads looked for (the thread's only)

    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::map<std::string, Entry> entries_;  // by dump file name
    bool poked_ = false;
    std::atomic<bool> stop_{false};
    std::atomic<bool> running_{false};
    std::thread thread_;
};

}  // namespace xendump::daemon
