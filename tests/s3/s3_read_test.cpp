// Dumps read from S3-compatible storage (issue 34 item 4), against the
// s3-lab's RGW: the object reader fetches aligned blocks by ranged GETs,
// keeps a few, and counts what it fetched; every xen-dumpctl verb given
// s3://BUCKET/KEY prints what it prints for the same dump as a local file
// (encrypted dumps with -i too); info of a 4 GiB guest's dump fetches at
// most 4 MiB; errors name the object and the offset; list --store lists a
// fleet's dumps from their sidecar objects, with their hosts.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "age/age.hpp"
#include "dump_support.hpp"
#include "s3_lab.hpp"
#include "store/object_reader.hpp"
#include "test_support.hpp"
#include "xendump/error.hpp"

namespace xendump::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<std::byte> numbered_bytes(size_t n) {
    std::vector<std::byte> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 131) ^ (i >> 12));
    return out;
}

bool same_bytes(std::span<const std::byte> got, const std::vector<std::byte>& want, uint64_t at) {
    return at + got.size() <= want.size() && std::equal(got.begin(), got.end(), want.begin() + static_cast<ptrdiff_t>(at));
}

void put_file(s3::Client& c, const s3::Url& url, const fs::path& file) { c.put_object(url, slurp(file)); }

std::string replaced(std::string text, const std::string& from, const std::string& to) {
    for (size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size()) text.replace(at, from.size(), to);
    return text;
}

// `text` without the lines that start with one of `prefixes`.
std::string without_lines(const std::string& text, const std::vector<std::string>& prefixes) {
    std::string out;
    for (size_t at = 0; at < text.size();) {
        const size_t end = std::min(text.find('\n', at), text.size() - 1) + 1;
        const std::string line = text.substr(at, end - at);
        if (std::none_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) { return line.starts_with(p); }))
            out += line;
        at = end;
    }
    return out;
}

TEST(S3Read, BlocksAreFetchedOnceKeptAndCounted) {
    REQUIRE_S3_LAB();
    auto c = std::make_shared<s3::Client>(s3_lab().settings());
    const std::string bucket = new_bucket(*c, "blocks");
    const s3::Url url{bucket, "dir/object"};
    constexpr uint64_t kBlock = 64 << 10;
    const std::vector<std::byte> want = numbered_bytes(3 * kBlock + 1000);
    c->put_object(url, want);
    s3::ObjectReader r(c, url, kBlock, 2);
    EXPECT_EQ(r.size(), want.size());
    EXPECT_EQ(r.name(), "s3://" + bucket + "/dir/object");
    EXPECT_EQ(r.fetched().requests, 0u);
    // Many small reads inside one block: one GET of the whole block.
    std::vector<std::byte> got(100);
    for (uint64_t at = 0; at + got.size() <= kBlock; at += 4000) {
        ASSERT_EQ(r.read_at(at, got), got.size());
        ASSERT_TRUE(same_bytes(got, want, at)) << at;
    }
    EXPECT_EQ(r.fetched().requests, 1u);
    EXPECT_EQ(r.fetched().bytes, kBlock);
    // Across a block's end: the next block, once.
    got.resize(300);
    ASSERT_EQ(r.read_at(kBlock - 100, got), got.size());
    EXPECT_TRUE(same_bytes(got, want, kBlock - 100));
    EXPECT_EQ(r.fetched().requests, 2u);
    // The last block is short; a read past the end gets what there is.
    ASSERT_EQ(r.read_at(want.size() - 50, got), 50u);
    EXPECT_TRUE(same_bytes(std::span(got).first(50), want, want.size() - 50));
    EXPECT_EQ(r.read_at(want.size(), got), 0u);
    EXPECT_EQ(r.fetched().requests, 3u);
    EXPECT_EQ(r.fetched().bytes, 2 * kBlock + 1000);
    // Two blocks kept: the last one still is, the first (least recently used) is fetched again.
    ASSERT_EQ(r.read_at(want.size() - 10, std::span(got).first(10)), 10u);
    EXPECT_EQ(r.fetched().requests, 3u);
    ASSERT_EQ(r.read_at(5, std::span(got).first(10)), 10u);
    EXPECT_EQ(r.fetched().requests, 4u);
    // A read larger than the cache: the whole object, right.
    std::vector<std::byte> all(want.size());
    ASSERT_EQ(r.read_at(0, all), all.size());
    EXPECT_TRUE(all == want);
    // Going through the object a little at a time: GETs of 1, 2, then 4
    // blocks (a quarter of 16), every byte fetched once.
    s3::ObjectReader seq(c, url, 4096, 16);
    for (uint64_t at = 0; at < want.size(); at += got.size()) {
        const size_t n = seq.read_at(at, got);
        ASSERT_TRUE(same_bytes(std::span(got).first(n), want, at)) << at;
    }
    EXPECT_EQ(seq.fetched().bytes, want.size());
    const uint64_t blocks = (want.size() + 4095) / 4096;
    EXPECT_EQ(seq.fetched().requests, 2 + (blocks - 3 + 3) / 4);
}

TEST(S3Read, ErrorsNameTheObjectAndTheOffset) {
    REQUIRE_S3_LAB();
    auto c = std::make_shared<s3::Client>(s3_lab().settings());
    const std::string bucket = new_bucket(*c, "readerrors");
    const std::string missing = "s3://" + bucket + "/none.core";
    try {
        s3::ObjectReader r(c, s3::parse_url(missing));
        ADD_FAILURE() << "opened a missing object";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(missing + ": no such object"), std::string::npos) << e.what();
    }
    // The object goes away while it is read: the read names it and where.
    const s3::Url url{bucket, "gone.core"};
    c->put_object(url, numbered_bytes(300 << 10));
    s3::ObjectReader r(c, url, 64 << 10, 2);
    std::vector<std::byte> got(10);
    ASSERT_EQ(r.read_at(0, got), got.size());
    c->delete_object(url);
    try {
        r.read_at(200 << 10, got);
        ADD_FAILURE() << "read a deleted object";
    } catch (const Error& e) {
        EXPECT_EQ(e.object(), url.str());
        EXPECT_EQ(e.offset(), uint64_t{192} << 10) << e.what();  // the block's GET
        EXPECT_NE(std::string(e.what()).find("NoSuchKey"), std::string::npos) << e.what();
    }
    // Through xen-dumpctl: one line naming the object, exit 1.
    RunResult x = run({"xen-dumpctl", "info", missing});
    EXPECT_EQ(x.exit_code, 1);
    EXPECT_NE(x.err.find(missing), std::string::npos) << x.err;
    c->put_object({bucket, "junk.core"}, numbered_bytes(5000));
    x = run({"xen-dumpctl", "verify", "s3://" + bucket + "/junk.core"});
    EXPECT_EQ(x.exit_code, 1);
    EXPECT_NE(x.out.find("s3://" + bucket + "/junk.core: "), std::string::npos) << x.out << x.err;
    x = run({"xen-dumpctl", "info", "s3://" + bucket + "/junk.core"}, {"AWS_SECRET_ACCESS_KEY=wrong-secret-value"});
    EXPECT_EQ(x.exit_code, 1);
    EXPECT_NE(x.err.find("s3://" + bucket + "/junk.core"), std::string::npos) << x.err;
    EXPECT_NE(x.err.find("HTTP 403"), std::string::npos) << x.err;  // a HEAD's answer has no body to say more
    EXPECT_EQ(x.err.find("wrong-secret-value"), std::string::npos) << x.err;
    x = run({"xen-dumpctl", "info", "s3://" + bucket});
    EXPECT_EQ(x.exit_code, 1);
    EXPECT_NE(x.err.find("not an object"), std::string::npos) << x.err;
}

// A test with a bucket of its own in the lab, and a directory.
class WithBucket : public ::testing::Test {
protected:
    explicit WithBucket(std::string hint) : hint_(std::move(hint)) {}
    void SetUp() override {
        REQUIRE_S3_LAB();
        client_ = std::make_unique<s3::Client>(s3_lab().settings());
        bucket_ = new_bucket(*client_, hint_);
    }

    TempDir dir_;
    std::unique_ptr<s3::Client> client_;
    std::string hint_, bucket_;
};

// The real Linux fixture's guest (128 MiB), dumped to a local file and
// uploaded: every verb prints the same for the object as for the file.
class S3ReadFixture : public WithBucket {
protected:
    S3ReadFixture() : WithBucket("verbs") {}
    void SetUp() override {
        WithBucket::SetUp();
        if (!HasFatalFailure()) host_ = dump::fixture_ram_host(dir_ / "ram.raw", 5);
    }
    // `xen-dumpd --domain 5 ARGS -o DIR/NAME`, uploaded as host1/NAME: its URL.
    std::string dump_and_upload(const std::string& name, std::vector<std::string> args = {}) {
        std::vector<std::string> argv{"xen-dumpd", "--host", host_->host(), "--domain", "5", "-q"};
        argv.insert(argv.end(), args.begin(), args.end());
        argv.insert(argv.end(), {"-o", (dir_ / name).string()});
        const RunResult r = run(argv);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        put_file(*client_, {bucket_, "host1/" + name}, dir_ / name);
        return "s3://" + bucket_ + "/host1/" + name;
    }
    // The verb's output for the file and for the object (the object's URL
    // put back to the file's name), each with its exit code.
    void expect_same(const std::vector<std::string>& verb, const std::string& name, const std::string& url,
                     const std::vector<std::string>& more = {}) {
        auto argv = [&](const std::string& file) {
            std::vector<std::string> a{"xen-dumpctl"};
            a.insert(a.end(), verb.begin(), verb.end());
            a.push_back(file);
            a.insert(a.end(), more.begin(), more.end());
            return a;
        };
        const std::string file = (dir_ / name).string();
        const RunResult local = run(argv(file));
        const RunResult stored = run(argv(url));
        SCOPED_TRACE(verb[0] + " " + name);
        EXPECT_EQ(local.exit_code, 0) << local.err;
        EXPECT_EQ(stored.exit_code, local.exit_code) << stored.err;
        EXPECT_GT(local.out.size(), 20u);
        // The object's info says what its reads fetched (the one line more);
        // estimate how long it took.
        EXPECT_EQ(without_lines(replaced(stored.out, url, file), {"Store:", "Classified in"}),
                  without_lines(local.out, {"Classified in"}));
    }
    json info(const std::string& file, const std::vector<std::string>& more = {}) {
        std::vector<std::string> a{"xen-dumpctl", "info", "--json", file};
        a.insert(a.end(), more.begin(), more.end());
        const RunResult r = run(a);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return r.exit_code == 0 ? json::parse(r.out) : json();
    }

    std::unique_ptr<sim::Host> host_;
};

TEST_F(S3ReadFixture, EveryVerbReadsTheObjectAsTheFile) {
    const std::string url = dump_and_upload("linux.core");
    json local = info((dir_ / "linux.core").string()), stored = info(url);
    ASSERT_TRUE(stored.contains("store")) << stored.dump();
    EXPECT_EQ(stored["store"]["object"], url);
    EXPECT_EQ(stored["store"]["object_size"], fs::file_size(dir_ / "linux.core"));
    EXPECT_GT(stored["store"]["requests"].get<uint64_t>(), 0u);
    EXPECT_FALSE(local.contains("store"));
    EXPECT_EQ(stored["kernel"], local["kernel"]);
    stored.erase("store");
    stored["file"] = local["file"];
    EXPECT_EQ(stored, local);
    expect_same({"info"}, "linux.core", url);
    expect_same({"verify"}, "linux.core", url);
    expect_same({"dmesg"}, "linux.core", url);
    expect_same({"backtrace"}, "linux.core", url);
    expect_same({"estimate"}, "linux.core", url);
    expect_same({"symbol"}, "linux.core", url, {"linux_banner"});
    // dump: the same vmcore from either.
    ASSERT_EQ(run({"xen-dumpctl", "dump", "-o", (dir_ / "a.vmcore").string(), (dir_ / "linux.core").string()}).exit_code, 0);
    const RunResult d = run({"xen-dumpctl", "dump", "-o", (dir_ / "b.vmcore").string(), url});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    EXPECT_TRUE(slurp(dir_ / "a.vmcore") == slurp(dir_ / "b.vmcore"));
    // A dump cut short in the store: the error names the object and the offset.
    std::vector<std::byte> cut = slurp(dir_ / "linux.core");
    cut.resize(100000);
    client_->put_object({bucket_, "host1/cut.core"}, cut);
    const RunResult bad = run({"xen-dumpctl", "info", "s3://" + bucket_ + "/host1/cut.core"});
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("s3://" + bucket_ + "/host1/cut.core: at offset 0x"), std::string::npos) << bad.err;
    // A debugger opens files: refused, naming the object.
    const RunResult dbg = run({"xen-dumpctl", "debug", "--print-command", "--vmlinux", "/dev/null", url});
    EXPECT_EQ(dbg.exit_code, 1);
    EXPECT_NE(dbg.err.find(url + ": a debugger reads a local file"), std::string::npos) << dbg.err;
}

TEST_F(S3ReadFixture, EncryptedObjectsReadWithTheIdentity) {
    const age::Identity id = age::Identity::generate();
    const fs::path key = dir_ / "key.txt";
    std::ofstream(key) << id.to_string() << "\n";
    ::chmod(key.c_str(), 0600);
    const std::string url = dump_and_upload("linux.core.age", {"-r", id.recipient().to_string()});
    // Without the key: the age header, exit 3, as for the file.
    const RunResult locked = run({"xen-dumpctl", "dmesg", url});
    EXPECT_EQ(locked.exit_code, 3) << locked.err;
    EXPECT_NE(locked.err.find(url), std::string::npos) << locked.err;
    const RunResult header = run({"xen-dumpctl", "verify", url});
    EXPECT_EQ(header.exit_code, 3) << header.out << header.err;
    EXPECT_NE(header.out.find("the age header is well-formed"), std::string::npos) << header.out;
    expect_same({"info", "-i", key.string()}, "linux.core.age", url);
    expect_same({"dmesg", "-i", key.string()}, "linux.core.age", url);
    expect_same({"verify", "-i", key.string()}, "linux.core.age", url);
    const json stored = info(url, {"-i", key.string()});
    EXPECT_EQ(stored["encrypted"]["format"], "age");
    EXPECT_GT(stored["store"]["bytes_fetched"].get<uint64_t>(), 0u);
    // A wrong key: no identity matches, said naming the object.
    const age::Identity other = age::Identity::generate();
    std::ofstream(dir_ / "other.txt") << other.to_string() << "\n";
    ::chmod((dir_ / "other.txt").c_str(), 0600);
    const RunResult wrong = run({"xen-dumpctl", "info", "-i", (dir_ / "other.txt").string(), url});
    EXPECT_EQ(wrong.exit_code, 1);
    EXPECT_NE(wrong.err.find(url + ": no identity matches"), std::string::npos) << wrong.err;
}


// A 4 GiB guest (1 Mi pages): the real kernel's 128 MiB at its start, zeros
// after (a sparse image), past the MMIO hole below 4 GiB too. info of its
// dump in the store finds the kernel, its log and its backtrace, and
// fetches at most 4 MiB: the v1 file streamed there by xen-dumpd (4 GiB of
// pages, a 16 MiB PFN table), and the compact file (--format kdump, written
// here and uploaded with a sidecar: 24 MiB of page descriptors).
TEST(S3Read, InfoOfA4GiBGuestFetchesAtMost4MiB) {
    REQUIRE_S3_LAB();
    s3::Client c(s3_lab().settings());
    const std::string bucket = new_bucket(c, "big");
    TempDir dir;
    const fs::path image = dir / "ram.raw";
    RunResult z = run({"zstd", "-q", "-f", "-d", "-o", image.string(),
                       (shared_dir() / "fixtures" / "linux-6.1-x86_64-128m.raw.zst").string()});
    ASSERT_EQ(z.exit_code, 0) << z.err;
    constexpr uint64_t kLow = 0x100000, kHigh = 0x10020;  // pfns below 4 GiB; above: the hole's and the VGA's
    fs::resize_file(image, (kLow + kHigh) * 4096);
    json d = dump::hvm_domain(6, "hvm", kLow + kHigh,
                              json::array({json::array({0, 0x800000, kLow}), json::array({kLow, 0x800000 + kLow, kHigh})}));
    d["memory"] = json{{"image", image.string()}};
    sim::Host host(dump::host_spec({d}));
    const std::string v1 = "s3://" + bucket + "/host1/big.core", compact = "s3://" + bucket + "/host1/big.kdump";
    RunResult r = run({"xen-dumpd", "--host", host.host(), "--domain", "6", "-q", "-o", v1});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run({"xen-dumpd", "--host", host.host(), "--domain", "6", "-q", "--format", "kdump", "-o", (dir / "big.kdump").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    put_file(c, s3::parse_url(compact), dir / "big.kdump");
    // Its sidecar beside it, as the service uploads one: info takes the zero
    // pages from it instead of reading every page descriptor (24 MiB).
    r = run({"xen-dumpctl", "info", "--json", (dir / "big.kdump").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json zero = json::parse(r.out)["zero_pages"];
    ASSERT_GT(zero.get<uint64_t>(), 900000u);
    const std::string sidecar = json{{"domain", "guest6"}, {"domid", 6},   {"uuid", ""},       {"type", "hvm"},
                                     {"reason", "request"}, {"start_time", 1000}, {"result", "ok"}, {"dump_file", "big.kdump"},
                                     {"format", "kdump"},   {"zero_pages", zero}}
                                    .dump();
    c.put_object({bucket, "host1/big.kdump.json"}, std::as_bytes(std::span(sidecar.data(), sidecar.size())));
    for (const std::string& url : {v1, compact}) {
        SCOPED_TRACE(url);
        r = run({"xen-dumpctl", "info", "--json", url});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const json j = json::parse(r.out);
        EXPECT_EQ(j["nr_pages"], 1u << 20);
        if (url == compact) {
            EXPECT_EQ(j["zero_pages"], zero);
        }
        EXPECT_EQ(j["kernel"]["release"], "6.1.0-57-amd64") << j["kernel"].dump();
        const uint64_t fetched = j["store"]["bytes_fetched"].get<uint64_t>();
        std::printf("info %s: object %llu bytes, %llu GETs, %llu bytes fetched\n", url.c_str(),
                    static_cast<unsigned long long>(j["store"]["object_size"].get<uint64_t>()),
                    static_cast<unsigned long long>(j["store"]["requests"].get<uint64_t>()),
                    static_cast<unsigned long long>(fetched));
        EXPECT_LE(fetched, uint64_t{4} << 20);
        EXPECT_GT(fetched, 0u);
    }
    EXPECT_GE(c.head_object(s3::parse_url(v1))->size, uint64_t{4} << 30);
}

// A fleet's store as the services' uploaders leave it (daemon/uploader.hpp):
// PREFIX/HOST/NAME, its kernel log, its sidecar last. The dumps' objects
// are a few bytes: list --store reads the sidecars alone.
class S3ListStore : public WithBucket {
protected:
    S3ListStore() : WithBucket("fleet") {}
    void SetUp() override {
        WithBucket::SetUp();
        store_ = "s3://" + bucket_ + "/fleet";
        std::ofstream(dir_ / "xen-dumpd.conf") << "[Dump]\nKeepFree=0\n";
    }
    void put(const std::string& key, const std::string& text) {
        client_->put_object({bucket_, key}, std::as_bytes(std::span(text.data(), text.size())));
    }
    // A crash dump of `domain` on `host`, uploaded (dump, log, sidecar).
    void crashed(const std::string& host, const std::string& name, const std::string& domain, int64_t start,
                 const std::string& panic, const json& frames, bool with_dump = true) {
        if (with_dump) put("fleet/" + host + "/" + name, std::string(1000, 'd'));
        put("fleet/" + host + "/" + name + ".dmesg.txt", std::string(100, 'l'));
        json j = {{"domain", domain}, {"domid", 3},          {"uuid", "0d5e9a3c-1f2b-4c6d-8e9f-000000000003"},
                  {"type", "pv"},     {"reason", "crash"},   {"start_time", start},
                  {"result", "ok"},   {"dump_file", name}};
        if (!panic.empty()) {
            j["guest_panic"] = panic;
            j["guest_backtrace"] = {{"vcpu", 0}, {"method", "orc"}, {"frames", frames}};
        }
        put("fleet/" + host + "/" + name + ".json", j.dump() + "\n");
    }
    RunResult ctl(std::vector<std::string> args) {
        args.insert(args.begin(), "xen-dumpctl");
        args.insert(args.end(), {"--config", (dir_ / "xen-dumpd.conf").string(), "--dump-dir", dir_.path().string()});
        return run(args);
    }
    json listed(std::vector<std::string> args, const std::string& store = {}) {
        args.insert(args.begin(), {"list", "--json", "--store", store.empty() ? store_ : store});
        const RunResult r = ctl(args);
        EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.err;
        return r.exit_code == 0 ? json::parse(r.out) : json::array();
    }
    std::vector<std::string> hosts_of(const json& list) {
        std::vector<std::string> out;
        for (const auto& e : list) out.push_back(e["host"].get<std::string>() + "/" + e["path"].get<std::string>().substr(e["path"].get<std::string>().rfind('/') + 1));
        return out;
    }

    std::string store_;
};

TEST_F(S3ListStore, ListsTheFleetsDumpsWithTheirHosts) {
    const std::string sysrq = "Kernel panic - not syncing: sysrq triggered crash";
    crashed("dom0-a", "web01-3-a.core", "web01", 1000, "[    8.197049] " + sysrq, {"panic+0x286", "sysrq_handle_crash+0x16"});
    crashed("dom0-b", "db01-3-b.core", "db01", 2000, "[ 4711.5] " + sysrq, {"panic+0x2a6/0x3c0", "sysrq_handle_crash+0x1a"});
    crashed("dom0-b", "db01-3-c.core", "db01", 3000, "[    3.1] Kernel panic - not syncing: Fatal exception",
            {"panic+0x286", "die+0x40"});
    crashed("dom0-c", "app-3-d.core", "app", 4000, "", json::array(), false);  // its dump object gone: MISSING
    // Still uploading (no sidecar yet), outside the layout, another prefix: not listed.
    put("fleet/dom0-a/web01-3-e.core", "partial");
    put("fleet/stray.core.json", "{}");
    put("fleet/dom0-a/deeper/x.core.json", "{}");
    put("other/dom0-a/web01-3-f.core.json", "{}");
    const json all = listed({});
    ASSERT_EQ(all.size(), 4u) << all.dump();
    EXPECT_EQ(hosts_of(all), (std::vector<std::string>{"dom0-a/web01-3-a.core", "dom0-b/db01-3-b.core",
                                                       "dom0-b/db01-3-c.core", "dom0-c/app-3-d.core"}));
    EXPECT_EQ(all[0]["path"], store_ + "/dom0-a/web01-3-a.core");
    EXPECT_EQ(all[0]["present"], true);
    EXPECT_EQ(all[0]["bytes_on_disk"], 1000 + 100 + client_->head_object({bucket_, "fleet/dom0-a/web01-3-a.core.json"})->size);
    EXPECT_EQ(all[3]["missing"], true);
    const std::string sig = all[0]["crash_signature"].get<std::string>();
    EXPECT_EQ(all[1]["crash_signature"], sig);  // the same crash on another host
    EXPECT_NE(all[2]["crash_signature"], sig);
    // The same with the prefix's slash, and the text table: HOST after TIME.
    EXPECT_EQ(hosts_of(listed({}, store_ + "/")), hosts_of(all));
    const RunResult text = ctl({"list", "--store", store_, "--utc"});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_EQ(text.out.substr(0, text.out.find('\n')).find("TIME"), 0u) << text.out;
    EXPECT_NE(text.out.find("HOST"), std::string::npos);
    EXPECT_LT(text.out.find("HOST"), text.out.find("DOMAIN")) << text.out;
    EXPECT_NE(text.out.find("dom0-b"), std::string::npos);
    EXPECT_NE(text.out.find("MISSING"), std::string::npos);
    // HOST= and SIGNATURE= select; -F HOST lists the hosts.
    EXPECT_EQ(hosts_of(listed({"HOST=dom0-b"})), (std::vector<std::string>{"dom0-b/db01-3-b.core", "dom0-b/db01-3-c.core"}));
    EXPECT_EQ(hosts_of(listed({"SIGNATURE=" + sig})),
              (std::vector<std::string>{"dom0-a/web01-3-a.core", "dom0-b/db01-3-b.core"}));
    EXPECT_EQ(hosts_of(listed({"HOST=dom0-b", "SIGNATURE=" + sig})), (std::vector<std::string>{"dom0-b/db01-3-b.core"}));
    EXPECT_TRUE(listed({"HOST=dom0-z"}).empty());
    const RunResult f = ctl({"list", "--store", store_, "-F", "HOST"});
    EXPECT_EQ(f.out, "dom0-a\ndom0-b\ndom0-c\n");
    // --group-by signature: one crash across two hosts.
    const RunResult g = ctl({"list", "--store", store_, "--group-by", "signature", "--json"});
    ASSERT_EQ(g.exit_code, 0) << g.err;
    const json groups = json::parse(g.out);
    ASSERT_EQ(groups.size(), 2u) << g.out;
    EXPECT_EQ(groups[0]["value"], sig);
    EXPECT_EQ(groups[0]["count"], 2);
    EXPECT_EQ(groups[0]["first_time"], 1000);
    EXPECT_EQ(groups[0]["last_time"], 2000);
    EXPECT_EQ(groups[0]["hosts"], json::array({"dom0-a", "dom0-b"}));
    EXPECT_EQ(groups[0]["domains"], json::array({"web01", "db01"}));
    const RunResult gt = ctl({"list", "--store", store_, "--group-by", "host"});
    ASSERT_EQ(gt.exit_code, 0) << gt.err;
    EXPECT_NE(gt.out.find("HOSTS"), std::string::npos) << gt.out;
    // A directory's dumps have no host; a store that cannot be listed is named.
    EXPECT_EQ(ctl({"list", "HOST=dom0-a"}).exit_code, 1);
    const RunResult none = ctl({"list", "--store", "s3://no-such-bucket-fleet/x"});
    EXPECT_EQ(none.exit_code, 1);
    EXPECT_NE(none.err.find("s3://no-such-bucket-fleet/x"), std::string::npos) << none.err;
    EXPECT_NE(none.err.find("NoSuchBucket"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace xendump::test
