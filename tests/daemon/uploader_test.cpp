// The uploader's pure parts (issue 34): object keys, metadata from a
// sidecar (what an encrypted dump's allows), the backoff, the state file.
#include <gtest/gtest.h>

#include "crash_signature.hpp"
#include "uploader.hpp"
#include "xendump/error.hpp"

using namespace xendump::daemon;

TEST(Uploader, KeysArePrefixHostName) {
    UploadConfig u;
    u.bucket = "b";
    u.prefix = "fleet/xen";
    EXPECT_EQ(upload_key(u, "dom0-a", "web-7-20240101T000000Z.core"), "fleet/xen/dom0-a/web-7-20240101T000000Z.core");
    u.prefix = "";
    EXPECT_EQ(upload_key(u, "dom0-a", "x.core.json"), "dom0-a/x.core.json");
}

TEST(Uploader, MetadataFromTheSidecar) {
    Sidecar s;
    s.domain_name = "we b\n\xc3\xa9%";
    s.domid = 7;
    s.uuid = "11111111-1111-4111-8111-111111111111";
    s.type = "pv";
    s.reason = "crash";
    s.start_time = 1700000000;
    s.format = "kdump";
    s.file_size = 12345;
    s.dump_file = "we%20b%0A%C3%A9%25-7-20231114T221320Z.kdump";
    s.guest_panic = " Kernel panic - not syncing: sysrq triggered crash";
    auto m = upload_metadata(s);
    EXPECT_EQ(m["domain"], "we b%0A%C3%A9%25");  // printable ASCII as it is, the rest (and '%') as %XX
    EXPECT_EQ(m["domid"], "7");
    EXPECT_EQ(m["uuid"], s.uuid);
    EXPECT_EQ(m["type"], "pv");
    EXPECT_EQ(m["reason"], "crash");
    EXPECT_EQ(m["time"], "2023-11-14T22:13:20Z");
    EXPECT_EQ(m["format"], "kdump");
    EXPECT_EQ(m["size"], "12345");
    EXPECT_EQ(m["encrypted"], "no");
    EXPECT_EQ(m["panic"], "%20Kernel panic - not syncing: sysrq triggered crash");  // an edge space would be lost
    EXPECT_EQ(m["signature"], crash_signature(s).value());  // the crash's, to group a fleet's objects by
    EXPECT_EQ(m["dump"], s.dump_file);  // a file name of the dump directory is printable ASCII already
    // An encrypted dump's sidecar has the panic line only with
    // ClearMetadata=panic: without it, neither has the metadata.
    s.recipients = 2;
    s.guest_panic.reset();
    m = upload_metadata(s);
    EXPECT_EQ(m["encrypted"], "yes");
    EXPECT_FALSE(m.contains("panic"));
    EXPECT_FALSE(m.contains("signature"));
    // A long panic line is cut (S3 keeps 2 KiB of metadata in all).
    s.guest_panic = std::string(5000, 'x');
    EXPECT_EQ(upload_metadata(s)["panic"].size(), 512u);
}

TEST(Uploader, BackoffDoublesFromTenSecondsToTenMinutes) {
    EXPECT_EQ(upload_backoff(1).count(), 10);
    EXPECT_EQ(upload_backoff(2).count(), 20);
    EXPECT_EQ(upload_backoff(3).count(), 40);
    EXPECT_EQ(upload_backoff(6).count(), 320);
    EXPECT_EQ(upload_backoff(7).count(), 600);
    EXPECT_EQ(upload_backoff(1000).count(), 600);
}

TEST(Uploader, StateRoundTripsAndBadStateIsRefused) {
    UploadState s;
    s.dump = "web-7-20240101T000000Z.core";
    s.queued = 1700000000;
    s.done = {"web-7-20240101T000000Z.core"};
    s.key = "p/h/web-7-20240101T000000Z.core.json";
    s.upload_id = "2~abc";
    s.part_size = 5u << 20;
    s.attempts = 3;
    s.error = "HTTP 503";
    const UploadState t = UploadState::from_json(s.to_json(), "x");
    EXPECT_EQ(t.dump, s.dump);
    EXPECT_EQ(t.queued, s.queued);
    EXPECT_EQ(t.done, s.done);
    EXPECT_EQ(t.key, s.key);
    EXPECT_EQ(t.upload_id, s.upload_id);
    EXPECT_EQ(t.part_size, s.part_size);
    EXPECT_EQ(t.attempts, 3u);
    EXPECT_EQ(t.error, s.error);
    EXPECT_FALSE(t.stream_failed);
    // A dump whose stream failed (Mode=stream): its leftover upload is aborted first.
    s.stream_failed = true;
    EXPECT_TRUE(UploadState::from_json(s.to_json(), "x").stream_failed);
    EXPECT_THROW(UploadState::from_json("not json", "x"), xendump::Error);
    EXPECT_THROW(UploadState::from_json(R"({"queued":1})", "x"), xendump::Error);
    EXPECT_THROW(UploadState::from_json(R"({"dump":"../etc/passwd"})", "x"), xendump::Error);
}
