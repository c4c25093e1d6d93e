// The service's uploads (issue 34 items 2 and 3, [Upload] Mode=spool)
// against the s3-lab's RGW: xen-dumpd on a simulated host with [Upload]
// Target= dumps a crashed guest and copies the dump and its sidecar to
// PREFIX/HOST/NAME with the dump's key fields as metadata, the object's bytes
// those of the local dump, the local copy removed only with KeepLocal=no;
// with the gateway stopped the dump stays local, `xen-dumpctl status` shows
// the waiting upload and why, and it goes once the gateway is back; a
// restart takes up a pending upload (resuming its multipart upload, parts
// already stored and intact kept, a damaged one sent again; an upload the
// store forgot begun anew; an abandoned one aborted); wrong credentials and
// a missing bucket keep the dump, naming the object, until fixed.
// Mode=stream: a crash dump goes straight into its object (the bytes of the
// same guest's dump with Mode=spool but for its TIME=), nothing ever in the
// dump directory; the store down when the guest crashes, or stopped in the
// middle of the stream, leaves no object, and the dump is written locally,
// waits (status says the stream failed) and is uploaded once the store is
// back, the local copy then removed and the stream's upload aborted.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "control_protocol.hpp"
#include "s3_lab.hpp"
#include "service_harness.hpp"
#include "test_support.hpp"
#include "xendump/error.hpp"
#include "xendump/reader.hpp"

namespace xendump::test {
namespace {

namespace fs = std::filesystem;

const std::string kUuid = "11111111-1111-4111-8111-111111111111";
// 3000 pages: a 12 MiB dump, three parts of PartSize=5M.
constexpr uint64_t kPages = 3000;

std::string host_name() {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    return name;
}

// Stops the lab's gateway for its lifetime (the store refuses connections).
class GatewayDown {
public:
    GatewayDown() { lab("stop-rgw"); }
    ~GatewayDown() { up(); }
    void up() {
        if (down_) lab("start-rgw");
        down_ = false;
    }

private:
    static void lab(const std::string& verb) {
        const RunResult r =
            run({(source_root() / "tests" / "s3-lab" / "s3-lab").string(), verb, s3_lab().vars.at("S3LAB_DIR")});
        if (r.exit_code != 0) throw std::runtime_error("s3-lab " + verb + ": " + r.err);
    }
    bool down_ = true;
};

// Makes the bucket full for its lifetime: a quota smaller than one part, so
// that RGW refuses every part at once (HTTP 403 QuotaExceeded), as a store
// out of room does (tests/s3-lab/README.md: a memstore filled up would hold
// the writes instead).
class BucketFull {
public:
    explicit BucketFull(const std::string& bucket) : bucket_(bucket) { quota(4u << 20); }
    ~BucketFull() { lift(); }
    void lift() {
        if (full_) quota(0);
        full_ = false;
    }

private:
    void quota(uint64_t bytes) {
        const RunResult r = run({(source_root() / "tests" / "s3-lab" / "s3-lab").string(), "quota",
                                 s3_lab().vars.at("S3LAB_DIR"), bucket_, std::to_string(bytes)});
        if (r.exit_code != 0) throw std::runtime_error("s3-lab quota: " + r.err);
    }
    std::string bucket_;
    bool full_ = true;
};

// Sets environment variables (unset: nullopt) for the processes started
// while it lives, and puts the old values back.
class ScopedEnv {
public:
    explicit ScopedEnv(const std::vector<std::pair<std::string, std::optional<std::string>>>& vars) {
        for (const auto& [k, v] : vars) {
            const char* old = std::getenv(k.c_str());
            old_.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
            if (v) ::setenv(k.c_str(), v->c_str(), 1);
            else ::unsetenv(k.c_str());
        }
    }
    ~ScopedEnv() {
        for (const auto& [k, v] : old_) {
            if (v) ::setenv(k.c_str(), v->c_str(), 1);
            else ::unsetenv(k.c_str());
        }
    }

private:
    std::vector<std::pair<std::string, std::optional<std::string>>> old_;
};

struct Fixture {
    TempDir tmp;
    fs::path host = tmp / "host";
    fs::path dumps = tmp / "dumps";
    s3::Client client{s3_lab().settings()};
    std::string bucket;
    std::string prefix = "fleet/xen";
    std::unique_ptr<ServiceProcess> service;

    explicit Fixture(const std::string& hint, const SimDomainSpec& guest = {7, "web01", kUuid, kPages})
        : bucket(new_bucket(client, hint)) {
        create_sim_host(host, {guest});
    }
    std::string config(const std::string& upload_extra = "", const std::string& target = "") const {
        return "[Dump]\n[Upload]\nTarget=" + (target.empty() ? "s3://" + bucket + "/" + prefix : target) +
               "\nPartSize=5M\n" + upload_extra;
    }
    void start(const std::string& config_text) {
        service = std::make_unique<ServiceProcess>(tmp.path(), host, dumps, config_text);
        service->start();
        if (!service->wait_ready()) throw std::runtime_error("service not ready: " + service->log());
        service->keep_reading_notifications();
    }
    void restart() {
        ASSERT_EQ(service->stop(SIGTERM), 0) << service->log();
        service->start();
        ASSERT_TRUE(service->wait_ready()) << service->log();
    }
    std::string key_of(const std::string& name) const { return prefix + "/" + host_name() + "/" + name; }
    s3::Url url_of(const std::string& name) const { return {bucket, key_of(name)}; }
    std::vector<std::string> object_names() {
        std::vector<std::string> out;
        const std::string p = prefix + "/" + host_name() + "/";
        for (const auto& o : client.list_objects(bucket, p)) out.push_back(o.key.substr(p.size()));
        return out;
    }
    bool uploaded(const std::string& dump_name) {
        const auto names = object_names();
        return std::find(names.begin(), names.end(), dump_name + ".json") != names.end();
    }
    nlohmann::json status() {
        return daemon::control_request(service->socket(), {{"command", "status"}});
    }
    nlohmann::json uploads() { return status().value("uploads", nlohmann::json::array()); }
    RunResult ctl(std::vector<std::string> args) { return run_ctl(*service, std::move(args)); }
    // The crash of guest 7, dumped: its dump's file name.
    std::string crash_and_dump() {
        sim({"crash", host.string(), "7"});
        if (!wait_until([&] { return sidecars_in(dumps).size() == 1 && dumps_in(dumps).size() == 1; },
                        std::chrono::seconds(60)))
            throw std::runtime_error("no dump: " + service->log());
        return dumps_in(dumps).at(0).filename().string();
    }
    // Told to retry now (SIGHUP), the service uploads the waiting dump
    // `name`: the object is the local file's bytes, the local copy goes,
    // no multipart upload is left behind.
    void expect_uploaded_when_retried(const std::string& name) {
        const auto local = slurp(dumps / name);
        service->signal(SIGHUP);
        ASSERT_TRUE(wait_until([&] { return uploaded(name); }, std::chrono::seconds(120))) << service->log();
        ASSERT_TRUE(wait_until([&] { return !fs::exists(dumps / name); })) << service->log();
        EXPECT_TRUE(client.get_object(url_of(name)) == local);
        EXPECT_TRUE(client.list_multipart_uploads(bucket, "").empty());
    }
    fs::path state_file(const std::string& name) const { return dumps / ".xen-dumpd-uploads" / (name + ".json"); }
    // The guest crashes while the store is down, and the service stops with
    // the upload pending: the dump's file name.
    std::string crash_and_stop_while_the_store_is_down() {
        GatewayDown down;
        const std::string name = crash_and_dump();
        if (!wait_until([&] { return fs::exists(state_file(name)) && uploads().size() == 1; }))
            throw std::runtime_error("no pending upload: " + service->log());
        if (service->stop(SIGTERM) != 0) throw std::runtime_error("the service did not stop: " + service->log());
        return name;
    }
};

// The metadata of the objects of guest 7's crash dump `name` that the
// sidecar knows before the dump is written.
void expect_key_fields(std::map<std::string, std::string> meta, const std::string& name) {
    EXPECT_EQ(meta["domain"], "web01");
    EXPECT_EQ(meta["domid"], "7");
    EXPECT_EQ(meta["uuid"], kUuid);
    EXPECT_EQ(meta["reason"], "crash");
    EXPECT_EQ(meta["format"], "v1");
    EXPECT_EQ(meta["encrypted"], "no");
    EXPECT_EQ(meta["dump"], name);
}

TEST(S3Service, CrashDumpIsUploadedWithItsMetadataAndKeptLocalWhenAsked) {
    REQUIRE_S3_LAB();
    Fixture f("svc-keep");
    f.start(f.config("KeepLocal=yes\n"));
    const std::string name = f.crash_and_dump();
    ASSERT_TRUE(wait_until([&] { return f.uploaded(name); }, std::chrono::seconds(120))) << f.service->log();
    ASSERT_TRUE(wait_until([&] { return f.uploads().empty(); })) << f.status().dump();

    // The layout: PREFIX/HOST/NAME, the dump and its sidecar (the simulated
    // guest has no kernel log), nothing else, no upload left open.
    std::vector<std::string> want = {name, name + ".json"};
    EXPECT_EQ(f.object_names(), want);
    EXPECT_TRUE(f.client.list_multipart_uploads(f.bucket, "").empty());
    // KeepLocal=yes: the local copy stays, the same bytes as the object.
    ASSERT_TRUE(fs::exists(f.dumps / name));
    const auto local = slurp(f.dumps / name);
    EXPECT_GT(local.size(), 10u << 20);  // three parts
    EXPECT_TRUE(f.client.get_object(f.url_of(name)) == local) << "the object differs from the local dump";
    EXPECT_TRUE(f.client.get_object(f.url_of(name + ".json")) == slurp(f.dumps / (name + ".json")));
    EXPECT_FALSE(fs::exists(f.state_file(name)));

    const auto head = f.client.head_object(f.url_of(name));
    ASSERT_TRUE(head);
    EXPECT_EQ(head->size, local.size());
    EXPECT_NE(head->etag.find("-3"), std::string::npos) << head->etag << ": three parts";
    auto meta = head->metadata;
    expect_key_fields(meta, name);
    EXPECT_EQ(meta["size"], std::to_string(local.size()));
    EXPECT_TRUE(std::regex_match(meta["time"], std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"))) << meta["time"];
    const auto sidecar_head = f.client.head_object(f.url_of(name + ".json"));
    ASSERT_TRUE(sidecar_head);
    EXPECT_EQ(sidecar_head->metadata.at("dump"), name);

    // The journal's lines (stderr here) name the target.
    const std::string log = f.service->log();
    EXPECT_NE(log.find("uploaded " + (f.dumps / name).string() + " to s3://" + f.bucket + "/" + f.key_of(name)),
              std::string::npos)
        << log;
}

TEST(S3Service, KeepLocalNoRemovesTheLocalCopyOnceVerified) {
    REQUIRE_S3_LAB();
    Fixture f("svc-move");
    f.start(f.config());
    sim({"crash", f.host.string(), "7"});
    ASSERT_TRUE(wait_until([&] { return f.object_names().size() == 2; }, std::chrono::seconds(120)))
        << f.service->log();
    ASSERT_TRUE(wait_until([&] { return dumps_in(f.dumps).empty() && sidecars_in(f.dumps).empty(); }))
        << f.service->log();
    const std::string name = f.object_names().at(0);
    EXPECT_TRUE(name.starts_with("web01-7-")) << name;
    EXPECT_TRUE(f.uploaded(name));
    EXPECT_TRUE(fs::is_empty(f.dumps / ".xen-dumpd-uploads"));
    // The object is a dump that verifies (downloaded).
    const fs::path back = f.tmp / "back.core";
    {
        const auto bytes = f.client.get_object(f.url_of(name));
        std::ofstream(back, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                    static_cast<std::streamsize>(bytes.size()));
    }
    const RunResult v = f.ctl({"verify", back.string()});
    EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

// A crash dump is never lost: the store down when the guest crashes.
TEST(S3Service, StoreDownWhenTheGuestCrashesThenUploadedWhenBack) {
    REQUIRE_S3_LAB();
    Fixture f("svc-down");
    f.start(f.config());
    std::string name;
    {
        GatewayDown down;
        name = f.crash_and_dump();
        // Waits, with the reason: the store cannot be reached, naming the object.
        ASSERT_TRUE(wait_until(
            [&] {
                const auto u = f.uploads();
                return u.size() == 1 && u[0].value("attempts", 0u) >= 1;
            },
            std::chrono::seconds(90)))
            << f.status().dump() << f.service->log();
        const auto u = f.uploads().at(0);
        EXPECT_EQ(u["dump"], (f.dumps / name).string());
        EXPECT_EQ(u["target"], f.url_of(name).str());
        EXPECT_EQ(u["state"], "waiting");
        EXPECT_GT(u.value("bytes_total", uint64_t{0}), 10u << 20);
        EXPECT_NE(u.value("error", "").find(f.url_of(name).str()), std::string::npos) << u.dump();
        EXPECT_TRUE(u.contains("next_attempt"));
        const RunResult st = f.ctl({"status"});
        EXPECT_EQ(st.exit_code, 0) << st.err;
        EXPECT_NE(st.out.find("Upload of " + (f.dumps / name).string() + " to " + f.url_of(name).str()),
                  std::string::npos)
            << st.out;
        EXPECT_NE(st.out.find("waiting (1 attempt failed"), std::string::npos) << st.out;
        EXPECT_TRUE(fs::exists(f.dumps / name));
        EXPECT_TRUE(fs::exists(f.state_file(name)));
        EXPECT_TRUE(f.service->logged("upload of " + (f.dumps / name).string())) << f.service->log();
        down.up();
    }
    // Back: a reload tries at once (else the backoff's next attempt would).
    f.service->signal(SIGHUP);
    ASSERT_TRUE(wait_until([&] { return f.uploaded(name); }, std::chrono::seconds(120))) << f.service->log();
    ASSERT_TRUE(wait_until([&] { return !fs::exists(f.dumps / name); })) << f.service->log();
    EXPECT_TRUE(f.uploads().empty());
    EXPECT_FALSE(fs::exists(f.state_file(name)));
    EXPECT_TRUE(f.client.list_multipart_uploads(f.bucket, "").empty());
}

// A pending upload survives a restart of the service.
TEST(S3Service, RestartTakesUpThePendingUpload) {
    REQUIRE_S3_LAB();
    Fixture f("svc-restart");
    f.start(f.config("KeepLocal=yes\n"));
    const std::string name = f.crash_and_stop_while_the_store_is_down();
    // Started again with the store back: the upload goes without a reload.
    f.service->start();
    ASSERT_TRUE(f.service->wait_ready()) << f.service->log();
    ASSERT_TRUE(wait_until([&] { return f.uploaded(name); }, std::chrono::seconds(120))) << f.service->log();
    EXPECT_TRUE(f.client.get_object(f.url_of(name)) == slurp(f.dumps / name));
    EXPECT_FALSE(fs::exists(f.state_file(name)));
}

// After a restart, a file's multipart upload is resumed: the parts stored
// and intact stay, a damaged one is sent again; an upload the store no
// longer knows is begun anew; one that no state file knows is aborted.
TEST(S3Service, RestartResumesTheMultipartUploadOrBeginsAnew) {
    REQUIRE_S3_LAB();
    Fixture f("svc-resume");
    f.start(f.config("KeepLocal=yes\n"));
    const std::string name = f.crash_and_stop_while_the_store_is_down();
    // As if the service had stopped mid-upload: part 1 stored, part 2
    // stored damaged, part 3 missing, the upload id in the state file.
    const auto local = slurp(f.dumps / name);
    const size_t part = 5u << 20;
    const s3::Url url = f.url_of(name);
    const std::string id = f.client.create_multipart_upload(url);
    f.client.upload_part(url, id, 1, std::span(local).first(part));
    std::vector<std::byte> damaged(local.begin() + part, local.begin() + 2 * part);
    damaged[100] ^= std::byte{1};
    f.client.upload_part(url, id, 2, damaged);
    auto state = nlohmann::json::parse(slurp_text(f.state_file(name)));
    state["key"] = url.key;
    state["upload_id"] = id;
    state["part_size"] = part;
    std::ofstream(f.state_file(name)) << state.dump();
    // And an upload under PREFIX/HOST/ that nobody knows, begun before the start.
    const s3::Url orphan = f.url_of("lost-3-20200101T000000Z.core");
    f.client.create_multipart_upload(orphan);
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));

    f.service->start();
    ASSERT_TRUE(f.service->wait_ready()) << f.service->log();
    ASSERT_TRUE(wait_until([&] { return f.uploaded(name); }, std::chrono::seconds(120))) << f.service->log();
    EXPECT_TRUE(f.client.get_object(url) == local) << "the resumed object differs from the dump";
    const std::string log = f.service->log();
    EXPECT_NE(log.find("resuming the multipart upload of " + url.str() + ": 2 of 3 parts stored"), std::string::npos)
        << log;
    EXPECT_NE(log.find("aborted the multipart upload of " + orphan.str()), std::string::npos) << log;
    EXPECT_TRUE(f.client.list_multipart_uploads(f.bucket, "").empty());

    // An upload id the store does not know: begun anew.
    f.client.delete_object(url);
    f.client.delete_object(f.url_of(name + ".json"));
    ASSERT_EQ(f.service->stop(SIGTERM), 0);
    state["upload_id"] = "2~nosuchupload";
    state["done"] = nlohmann::json::array();
    std::ofstream(f.state_file(name)) << state.dump();
    f.service->start();
    ASSERT_TRUE(f.service->wait_ready()) << f.service->log();
    ASSERT_TRUE(wait_until([&] { return f.uploaded(name); }, std::chrono::seconds(120))) << f.service->log();
    EXPECT_TRUE(f.client.get_object(url) == local);
    EXPECT_NE(f.service->log().find("no longer knows upload 2~nosuchupload"), std::string::npos) << f.service->log();
}

// Wrong credentials and a missing bucket: a clear error naming the object,
// the dump kept, and uploaded once the operator has fixed what was wrong.
TEST(S3Service, WrongCredentialsKeepTheDumpUntilFixed) {
    REQUIRE_S3_LAB();
    Fixture f("svc-creds");
    // The keys as the systemd credential aws-credentials (LoadCredential=), wrong at first.
    const fs::path creds = f.tmp / "credentials";
    fs::create_directories(creds);
    std::ofstream(creds / "aws-credentials") << "[default]\naws_access_key_id = NOSUCHKEY0000000000\n"
                                                "aws_secret_access_key = nosuchsecret\n";
    {
        ScopedEnv env({{"AWS_ACCESS_KEY_ID", std::nullopt},
                       {"AWS_SECRET_ACCESS_KEY", std::nullopt},
                       {"CREDENTIALS_DIRECTORY", creds.string()}});
        f.start(f.config());
    }
    const std::string name = f.crash_and_dump();
    ASSERT_TRUE(wait_until([&] {
        const auto u = f.uploads();
        return u.size() == 1 && u[0].value("attempts", 0u) >= 1;
    })) << f.service->log();
    const std::string error = f.uploads().at(0).value("error", "");
    EXPECT_NE(error.find(f.url_of(name).str()), std::string::npos) << error;
    EXPECT_NE(error.find("InvalidAccessKeyId"), std::string::npos) << error;
    EXPECT_TRUE(fs::exists(f.dumps / name));
    // Neither the wrong keys nor the right ones ever reach the log.
    EXPECT_EQ(f.service->log().find("nosuchsecret"), std::string::npos);

    std::ofstream(creds / "aws-credentials") << "[default]\naws_access_key_id = " << s3_lab().vars.at("AWS_ACCESS_KEY_ID")
                                             << "\naws_secret_access_key = "
                                             << s3_lab().vars.at("AWS_SECRET_ACCESS_KEY") << "\n";
    f.service->signal(SIGHUP);
    ASSERT_TRUE(wait_until([&] { return f.uploaded(name); }, std::chrono::seconds(120))) << f.service->log();
    ASSERT_TRUE(wait_until([&] { return !fs::exists(f.dumps / name); }));
    EXPECT_EQ(f.service->log().find(s3_lab().vars.at("AWS_SECRET_ACCESS_KEY")), std::string::npos);
}

TEST(S3Service, MissingBucketKeepsTheDumpUntilTheTargetIsFixed) {
    REQUIRE_S3_LAB();
    Fixture f("svc-bucket");
    const std::string missing = "s3://no-such-bucket-" + std::to_string(::getpid()) + "/p";
    f.start(f.config("", missing));
    const std::string name = f.crash_and_dump();
    ASSERT_TRUE(wait_until([&] {
        const auto u = f.uploads();
        return u.size() == 1 && u[0].value("attempts", 0u) >= 1;
    })) << f.service->log();
    const auto u = f.uploads().at(0);
    EXPECT_NE(u.value("error", "").find("NoSuchBucket"), std::string::npos) << u.dump();
    EXPECT_NE(u.value("error", "").find("s3://no-such-bucket-"), std::string::npos) << u.dump();
    EXPECT_TRUE(fs::exists(f.dumps / name));

    // Fixed by a reload: the waiting upload goes to the new target.
    std::ofstream(f.service->config_file()) << f.config();
    f.service->signal(SIGHUP);
    ASSERT_TRUE(wait_until([&] { return f.uploaded(name); }, std::chrono::seconds(120))) << f.service->log();
    ASSERT_TRUE(wait_until([&] { return !fs::exists(f.dumps / name); }));
}

// A full store (the bucket's quota reached): the upload fails with the
// store's reason naming the object, the dump stays in the dump directory,
// nothing is listed as a dump in the store; once there is room the same
// upload completes and the local copy goes.
TEST(S3Service, FullStoreKeepsTheDumpUntilThereIsRoom) {
    REQUIRE_S3_LAB();
    Fixture f("svc-full");
    std::string name;
    {
        BucketFull full(f.bucket);
        f.start(f.config());
        name = f.crash_and_dump();
        ASSERT_TRUE(wait_until([&] {
            const auto u = f.uploads();
            return u.size() == 1 && u[0].value("attempts", 0u) >= 1;
        })) << f.service->log();
        const auto u = f.uploads().at(0);
        EXPECT_NE(u.value("error", "").find("QuotaExceeded"), std::string::npos) << u.dump();
        EXPECT_NE(u.value("error", "").find(f.url_of(name).str()), std::string::npos) << u.dump();
        EXPECT_TRUE(fs::exists(f.dumps / name));
        EXPECT_TRUE(f.object_names().empty());
    }
    f.expect_uploaded_when_retried(name);
}

// A dump removed while it waits (by hand, or by another process's storage
// limits): its upload is dropped, with a warning, nothing left in the store.
TEST(S3Service, DumpRemovedWhileWaitingDropsItsUpload) {
    REQUIRE_S3_LAB();
    Fixture f("svc-drop");
    f.start(f.config("KeepLocal=yes\n", "s3://" + f.bucket + "/" + f.prefix) + "Endpoint=http://127.0.0.1:1\n");
    const std::string name = f.crash_and_dump();
    ASSERT_TRUE(wait_until([&] {
        const auto u = f.uploads();
        return u.size() == 1 && u[0].value("attempts", 0u) >= 1;
    })) << f.service->log();
    fs::remove(f.dumps / name);
    f.service->signal(SIGHUP);
    ASSERT_TRUE(wait_until([&] { return f.uploads().empty(); }, std::chrono::seconds(60))) << f.service->log();
    EXPECT_TRUE(f.service->logged("the upload of " + (f.dumps / name).string() + " to object storage is dropped"))
        << f.service->log();
    EXPECT_FALSE(fs::exists(f.state_file(name)));
    EXPECT_TRUE(f.object_names().empty());
}

// The bytes two dumps of the same paused guest differ in: TIME= of the
// NT_XEN_DOMAIN note (seconds apart) and the notes' digest.
size_t differing_bytes(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
    size_t n = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += a[i] != b[i];
    return n + (a.size() > b.size() ? a.size() - b.size() : b.size() - a.size());
}

// Looks at a dump directory every few milliseconds while it lives, and
// remembers every name it saw there but the service's crash state file.
class DirWatch {
public:
    explicit DirWatch(fs::path dir) : dir_(std::move(dir)), thread_([this] { run(); }) {}
    ~DirWatch() {
        stop_ = true;
        thread_.join();
    }
    std::set<std::string> seen() {
        std::lock_guard lock(mutex_);
        return seen_;
    }

private:
    void run() {
        while (!stop_) {
            std::error_code ec;
            for (const auto& e : fs::directory_iterator(dir_, ec)) {
                const std::string n = e.path().filename().string();
                if (n.find(".xen-dumpd-state") != std::string::npos) continue;
                std::lock_guard lock(mutex_);
                seen_.insert(n);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
    }
    fs::path dir_;
    std::mutex mutex_;
    std::set<std::string> seen_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

std::string stream_config(const Fixture& f, const std::string& extra = "") { return f.config("Mode=stream\n" + extra); }

// Mode=stream: the crash dump goes straight into PREFIX/HOST/NAME, its
// sidecar beside it, nothing ever in the dump directory; its bytes are those
// of the same crashed guest's dump written with Mode=spool, but for TIME=.
TEST(S3ServiceStream, CrashDumpGoesStraightIntoTheStore) {
    REQUIRE_S3_LAB();
    Fixture f("stream-crash");
    fs::create_directories(f.dumps);
    std::string name;
    {
        DirWatch watch(f.dumps);
        f.start(stream_config(f));
        sim({"crash", f.host.string(), "7"});
        ASSERT_TRUE(wait_until([&] { return f.object_names().size() == 2; }, std::chrono::seconds(120)))
            << f.service->log();
        ASSERT_EQ(f.service->stop(SIGTERM), 0) << f.service->log();
        EXPECT_TRUE(watch.seen().empty()) << "in the dump directory: " << *watch.seen().begin();
    }
    name = f.object_names().at(0);
    EXPECT_TRUE(name.starts_with("web01-7-") && name.ends_with(".core")) << name;
    const std::vector<std::string> want = {name, name + ".json"};
    EXPECT_EQ(f.object_names(), want);
    EXPECT_TRUE(f.client.list_multipart_uploads(f.bucket, "").empty());
    EXPECT_TRUE(dumps_in(f.dumps).empty());
    EXPECT_TRUE(sidecars_in(f.dumps).empty());
    EXPECT_FALSE(fs::exists(f.dumps / ".xen-dumpd-uploads"));
    const auto object = f.client.get_object(f.url_of(name));
    EXPECT_GT(object.size(), 10u << 20);  // three parts

    // The sidecar object: the dump's record, as spool uploads it.
    const auto sidecar = f.client.get_object(f.url_of(name + ".json"));
    const auto j = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(sidecar.data()), sidecar.size()));
    EXPECT_EQ(j.value("result", ""), "ok") << j.dump();
    EXPECT_EQ(j.value("reason", ""), "crash");
    EXPECT_EQ(j.value("file_size", uint64_t{0}), object.size()) << j.dump();
    const auto head = f.client.head_object(f.url_of(name));
    ASSERT_TRUE(head);
    expect_key_fields(head->metadata, name);
    EXPECT_FALSE(head->metadata.contains("size")) << "known only once the dump is written: in its sidecar";
    EXPECT_EQ(f.client.head_object(f.url_of(name + ".json"))->metadata.at("size"), std::to_string(object.size()));
    const std::string log = f.service->log();
    EXPECT_NE(log.find("written to " + f.url_of(name).str()), std::string::npos) << log;

    // The same crashed guest (still there: OnCrash=preserve), dumped by a
    // service with Mode=spool and a dump directory of its own.
    const fs::path spool_dumps = f.tmp / "spool-dumps";
    fs::create_directories(f.tmp / "spool");
    ServiceProcess spool(f.tmp / "spool", f.host, spool_dumps,
                         f.config("KeepLocal=yes\n", "s3://" + f.bucket + "/spooled"));
    spool.start();
    ASSERT_TRUE(spool.wait_ready()) << spool.log();
    spool.keep_reading_notifications();
    ASSERT_TRUE(wait_until([&] { return dumps_in(spool_dumps).size() == 1 && sidecars_in(spool_dumps).size() == 1; },
                           std::chrono::seconds(60)))
        << spool.log();
    const auto local = slurp(dumps_in(spool_dumps).at(0));
    ASSERT_EQ(object.size(), local.size());
    EXPECT_LE(differing_bytes(object, local), 16u + 20u);
    const fs::path back = f.tmp / "back.core";
    std::ofstream(back, std::ios::binary)
        .write(reinterpret_cast<const char*>(object.data()), static_cast<std::streamsize>(object.size()));
    const RunResult v = f.ctl({"verify", back.string()});
    EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

// Format=kdump with Mode=stream: the compact file goes straight into the
// store too (its head, bitmaps and descriptors held back until its pages are
// in), nothing in the dump directory; the object verifies as a compact dump.
TEST(S3ServiceStream, CompactCrashDumpGoesStraightIntoTheStore) {
    REQUIRE_S3_LAB();
    Fixture f("stream-compact");
    fs::create_directories(f.dumps);
    std::string text = stream_config(f);
    text.replace(0, std::string("[Dump]\n").size(), "[Dump]\nFormat=kdump\nDumpLevel=1\n");
    {
        DirWatch watch(f.dumps);
        f.start(text);
        sim({"crash", f.host.string(), "7"});
        ASSERT_TRUE(wait_until([&] { return f.object_names().size() == 2; }, std::chrono::seconds(120)))
            << f.service->log();
        ASSERT_EQ(f.service->stop(SIGTERM), 0) << f.service->log();
        EXPECT_TRUE(watch.seen().empty()) << "in the dump directory: " << *watch.seen().begin();
    }
    const std::string name = f.object_names().at(0);
    EXPECT_EQ(f.object_names(), (std::vector<std::string>{name, name + ".json"}));
    EXPECT_TRUE(f.client.list_multipart_uploads(f.bucket, "").empty());
    const auto object = f.client.get_object(f.url_of(name));
    const fs::path back = f.tmp / "back.kdump";
    std::ofstream(back, std::ios::binary)
        .write(reinterpret_cast<const char*>(object.data()), static_cast<std::streamsize>(object.size()));
    EXPECT_TRUE(DumpReader::open(back).compact_format().has_value());
    const RunResult v = f.ctl({"verify", back.string()});
    EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
    const auto sidecar = f.client.get_object(f.url_of(name + ".json"));
    const auto j = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(sidecar.data()), sidecar.size()));
    EXPECT_EQ(j.value("format", ""), "kdump") << j.dump();
    EXPECT_EQ(j.value("file_size", uint64_t{0}), object.size()) << j.dump();
}

// KeepLocal=yes means nothing with Mode=stream: the service refuses to start.
TEST(S3ServiceStream, KeepLocalIsRefused) {
    REQUIRE_S3_LAB();
    Fixture f("stream-keep");
    ServiceProcess service(f.tmp.path(), f.host, f.dumps, stream_config(f, "KeepLocal=yes\n"));
    service.start();
    ASSERT_TRUE(wait_until([&] { return !service.running(); })) << service.log();
    EXPECT_NE(service.exit_status(), 0);
    EXPECT_NE(service.log().find("KeepLocal=yes needs Mode=spool"), std::string::npos) << service.log();
}

// The store down when the guest crashes: the stream fails at once, the dump
// is written locally, waits with the stream's failure as its reason, and is
// uploaded (the local copy removed) once the store is back.
TEST(S3ServiceStream, StoreDownWhenTheGuestCrashesThenUploadedWhenBack) {
    REQUIRE_S3_LAB();
    Fixture f("stream-down");
    f.start(stream_config(f));
    std::string name;
    {
        GatewayDown down;
        name = f.crash_and_dump();
        ASSERT_TRUE(wait_until([&] { return f.uploads().size() == 1; })) << f.service->log();
        const auto u = f.uploads().at(0);
        EXPECT_EQ(u["dump"], (f.dumps / name).string());
        EXPECT_EQ(u["target"], f.url_of(name).str());
        EXPECT_EQ(u["state"], "waiting");
        EXPECT_GE(u.value("attempts", 0u), 1u);
        EXPECT_NE(u.value("error", "").find("streaming it failed"), std::string::npos) << u.dump();
        EXPECT_NE(u.value("error", "").find(f.url_of(name).str()), std::string::npos) << u.dump();
        const RunResult st = f.ctl({"status"});
        EXPECT_NE(st.out.find("Upload of " + (f.dumps / name).string() + " to " + f.url_of(name).str()),
                  std::string::npos)
            << st.out;
        const std::string log = f.service->log();
        EXPECT_NE(log.find("streaming the dump of web01 (domain 7) to " + f.url_of(name).str() + " failed"),
                  std::string::npos)
            << log;
        EXPECT_TRUE(fs::exists(f.state_file(name)));
        down.up();
    }
    f.expect_uploaded_when_retried(name);
    EXPECT_TRUE(f.uploads().empty());
}

// A full store under Mode=stream: the stream fails on its first part, no
// object appears, the dump lands in the dump directory and is uploaded
// once the store has room.
TEST(S3ServiceStream, FullStoreThenUploadedWhenThereIsRoom) {
    REQUIRE_S3_LAB();
    Fixture f("stream-full");
    std::string name;
    {
        BucketFull full(f.bucket);
        f.start(stream_config(f));
        name = f.crash_and_dump();
        ASSERT_TRUE(wait_until([&] { return f.uploads().size() == 1; })) << f.service->log();
        const auto u = f.uploads().at(0);
        EXPECT_NE(u.value("error", "").find("QuotaExceeded"), std::string::npos) << u.dump();
        EXPECT_NE(u.value("error", "").find(f.url_of(name).str()), std::string::npos) << u.dump();
        EXPECT_TRUE(f.object_names().empty());
    }
    f.expect_uploaded_when_retried(name);
}

// The store stopped in the middle of the stream (its first parts stored):
// no object appears, the dump is written locally, and uploaded once the
// store is back, the stream's upload aborted then.
TEST(S3ServiceStream, StoreStoppedMidStreamThenUploadedWhenBack) {
    REQUIRE_S3_LAB();
    // 10000 pages at 1 ms each: a 40 MiB dump (eight parts of 5M) taking 10 s.
    Fixture f("stream-cut", {7, "web01", kUuid, 10000, 1000000});
    f.start(stream_config(f) + "[Dump]\nThreads=1\n");
    sim({"crash", f.host.string(), "7"});
    std::optional<GatewayDown> down;
    ASSERT_TRUE(wait_until(
        [&] {
            for (const auto& u : f.client.list_multipart_uploads(f.bucket, ""))
                if (!f.client.list_parts({f.bucket, u.key}, u.upload_id).empty()) return true;
            return false;
        },
        std::chrono::seconds(60)))
        << f.service->log();
    down.emplace();
    ASSERT_TRUE(wait_until([&] { return dumps_in(f.dumps).size() == 1 && f.uploads().size() == 1; },
                           std::chrono::seconds(120)))
        << f.service->log();
    const std::string name = dumps_in(f.dumps).at(0).filename().string();
    EXPECT_NE(f.uploads().at(0).value("error", "").find("streaming it failed"), std::string::npos)
        << f.uploads().dump();
    // The service records the upload before it logs why (wait for the line).
    EXPECT_TRUE(f.service->logged("streaming the dump of web01 (domain 7) to " + f.url_of(name).str() + " failed"))
        << f.service->log();
    const auto local = slurp(f.dumps / name);
    down->up();
    // Back, before the upload's next attempt: no object, complete or not.
    EXPECT_TRUE(f.object_names().empty());
    f.service->signal(SIGHUP);
    ASSERT_TRUE(wait_until([&] { return f.uploaded(name); }, std::chrono::seconds(120))) << f.service->log();
    ASSERT_TRUE(wait_until([&] { return !fs::exists(f.dumps / name); })) << f.service->log();
    EXPECT_TRUE(f.client.get_object(f.url_of(name)) == local);
    EXPECT_TRUE(f.client.list_multipart_uploads(f.bucket, "").empty());
}

}  // namespace
}  // namespace xendump::test

namespace xendump::test {
namespace {

// An on-demand consistent live dump (xen-dumpd --domain --live, the
// service's request) with Mode=stream: streamed into the store from its
// temporary image once the final round is done, its sidecar object saying
// how long the guest stood still; nothing in the dump directory, the guest
// running again with log-dirty off.
TEST(S3ServiceStream, ConsistentLiveDumpGoesStraightIntoTheStore) {
    REQUIRE_S3_LAB();
    Fixture f("stream-live", {7, "web01", kUuid, 4096, 0, {}, "hvm", 0, 200});
    fs::create_directories(f.dumps);
    f.start(stream_config(f));
    std::vector<std::string> argv{"xen-dumpd", "--domain", "web01", "--live", "--max-pause", "30000", "--quiet"};
    const auto common = f.service->common_args();
    argv.insert(argv.end(), common.begin(), common.end());
    const RunResult request = run(argv);
    EXPECT_EQ(request.exit_code, 0) << request.err << f.service->log();
    ASSERT_TRUE(wait_until([&] { return f.object_names().size() == 2; }, std::chrono::seconds(120)))
        << f.service->log();
    ASSERT_EQ(f.service->stop(SIGTERM), 0) << f.service->log();
    EXPECT_TRUE(dumps_in(f.dumps).empty());
    EXPECT_TRUE(f.client.list_multipart_uploads(f.bucket, "").empty());
    const std::string name = f.object_names().at(0);
    const std::string log = f.service->log();
    EXPECT_NE(log.find("written to " + f.url_of(name).str()), std::string::npos) << "streamed, not spooled: " << log;
    const auto object = f.client.get_object(f.url_of(name));
    const fs::path back = f.tmp / "back.core";
    std::ofstream(back, std::ios::binary)
        .write(reinterpret_cast<const char*>(object.data()), static_cast<std::streamsize>(object.size()));
    const DumpReader reader = DumpReader::open(back);
    EXPECT_EQ(reader.domain().get(keys::kLive).value_or(""), "precopy");
    const auto sidecar = f.client.get_object(f.url_of(name + ".json"));
    const auto j = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(sidecar.data()), sidecar.size()));
    EXPECT_EQ(j.value("live", ""), "precopy") << j.dump();
    EXPECT_EQ(std::to_string(j.value("pause_usec", uint64_t{0})), reader.domain().get(keys::kPauseUsec).value_or("?"));
    const RunResult v = f.ctl({"verify", back.string()});
    EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
    const RunResult info = run({"xen-dump-sim", "info", f.host.string(), "7", "--json"});
    const auto i = nlohmann::json::parse(info.out);
    EXPECT_FALSE(i.at("logdirty").get<bool>());
    EXPECT_FALSE(i.at("paused").get<bool>());
}

}  // namespace
}  // namespace xendump::test
