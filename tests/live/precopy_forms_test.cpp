// Consistent live dumps in every form but the plaintext v1 file (issue 35
// item 5, issue 33's "-r with a consistent --live"): compact (each
// compression, a dump level), encrypted (v1 and compact), standard output
// or a pipe (v1, and compact as its flattened stream), a flattened file.
// The pre-copy writes its v1 image into a temporary file and the asked form
// is made from it after the unpause (dump/live_image.hpp): each is one
// instant of the guest's writer, records the pre-copy as a v1 file does,
// leaves no plaintext on disk when encrypted (the image is sealed), and an
// error while it is made leaves nothing under the output's name, log-dirty
// off and the guest running.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "../age-write/age_write_helpers.hpp"
#include "live_support.hpp"
#include "sim/sim_host.hpp"
#include "xendump/dumper.hpp"
#include "xendump/error.hpp"
#include "xendump/reader.hpp"

namespace xendump::test::live {
namespace {

using test::sim::Host;
using namespace xendump::test::agewrite;

constexpr uint64_t kPages = 4096;  // 16 MiB
// Word 0 of every page the writer wrote ("XDSIMRW1", sim/sim_writer.hpp):
// what must never lie on disk in clear under an encrypted dump.
const std::string kMarker = "XDSIMRW1";

// Rounds until they run out (a pause no copy fits), so pages are rewritten.
DumpOptions precopy_options() {
    DumpOptions o;
    o.precopy.on = true;
    o.precopy.max_pause = std::chrono::microseconds(1);
    o.precopy.max_rounds = 3;
    return o;
}

void expect_one_instant(const DumpReader& reader, const json& d) {
    const Instant i = check_instant(reader, writer_of(d));
    EXPECT_TRUE(i.consistent()) << i.torn << " torn pages of " << i.pages_checked;
    EXPECT_GT(i.written, 0u);
}

void expect_guest_running(const Host& host, uint32_t domid) {
    const json info = sim_info(host, domid);
    EXPECT_FALSE(info.at("logdirty").get<bool>());
    EXPECT_FALSE(info.at("paused").get<bool>());
}

// The files under `dir` (names), hidden ones included.
std::set<std::string> listing(const std::filesystem::path& dir) {
    std::set<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir)) out.insert(e.path().filename().string());
    return out;
}

// Runs `look` once, from the report of the paused round: the image then
// holds every page of the pass and of the rounds.
void at_final_round(DumpOptions& o, std::function<void()> look) {
    o.write.on_progress = [look = std::move(look)](const WriteProgress& p) {
        if (p.live_final) look();
    };
}

// Compact, each compression, every page or a dump level: one instant of the
// writer, the dump level decided on the image.
TEST(PrecopyForms, CompactIsOneInstant) {
    uint32_t domid = 100;
    for (const char* type : {"hvm", "pvh"}) {
        for (Compression c : {Compression::zstd, Compression::zlib}) {
            for (unsigned level : {0u, 31u}) {
                SCOPED_TRACE(std::string(type) + " " + std::string(to_string(c)) + " level " + std::to_string(level));
                const json d = guest(domid, type, kPages, 250, "random");
                Host host(host_spec({d}));
                const auto file = host.tmp / "live.kdump";
                DumpOptions o = precopy_options();
                o.kdump = true;
                o.compression = c;
                o.dump_level = level;
                std::vector<std::string> warnings;
                o.write.on_warning = [&](const std::string& w) { warnings.push_back(w); };
                const DumpResult r = dump_domain_to_file(*host.hv, domid, file, o);
                const DumpReader reader = DumpReader::open(file);
                EXPECT_EQ(reader.format(), FileFormat::kdump);
                expect_live_record(reader, r);
                expect_one_instant(reader, d);
                // The simulated guest has no kernel: level 31 is level 1 (zero pages), said once.
                EXPECT_EQ(r.dump_level, level ? 1u : 0u);
                if (level) {
                    EXPECT_NE(std::find_if(warnings.begin(), warnings.end(),
                                           [](const std::string& w) { return w.find("instead of 31") != w.npos; }),
                              warnings.end());
                }
                for (const auto& f : reader.verify()) ADD_FAILURE() << f.check << ": " << f.message;
                expect_guest_running(host, domid);
                EXPECT_EQ(listing(host.tmp.path()).count("live.kdump"), 1u);
                ++domid;
            }
        }
    }
}

// Encrypted, v1 and compact: one instant once decrypted (by the library's
// reader, and for v1 by age itself), and no page in clear on disk at any
// time: the image is sealed, while a plaintext compact dump's image is a
// plain file there (the scan's control: it does see the image).
TEST(PrecopyForms, EncryptedLeavesNoPlaintext) {
    uint32_t domid = 120;
    for (bool kdump : {false, true}) {
        for (bool encrypted : {true, false}) {
            if (!kdump && !encrypted) continue;  // a plaintext v1 file is written in place
            SCOPED_TRACE(std::string(kdump ? "kdump" : "v1") + (encrypted ? ", encrypted" : ", plaintext"));
            const json d = guest(domid, "hvm", kPages, 250, "random");
            Host host(host_spec({d}));
            const std::filesystem::path dir = host.tmp / "dumps";
            std::filesystem::create_directories(dir);
            const AgeKey key = age_keygen(host.tmp.path());
            const auto file = dir / (kdump ? "live.kdump.age" : "live.core.age");
            DumpOptions o = precopy_options();
            o.kdump = kdump;
            if (encrypted) o.write.recipients = {key.recipient};
            std::vector<std::string> in_clear;
            bool looked = false;
            at_final_round(o, [&] {
                looked = true;
                in_clear = files_with_marker({dir}, kMarker);
            });
            const DumpResult r = dump_domain_to_file(*host.hv, domid, file, o);
            ASSERT_TRUE(looked);
            if (encrypted) {
                EXPECT_TRUE(in_clear.empty()) << in_clear.front();
            } else {
                EXPECT_FALSE(in_clear.empty()) << "the plain image was not seen: the scan proves nothing";
                ++domid;
                continue;
            }
            EXPECT_TRUE(starts_with_age_magic(file));
            EXPECT_TRUE(files_with_marker({dir}, kMarker).empty());
            EXPECT_EQ(listing(dir), std::set<std::string>{file.filename().string()});
            OpenOptions open;
            open.identity_files = {key.identity};
            const DumpReader reader = DumpReader::open(file, open);
            EXPECT_EQ(reader.format(), kdump ? FileFormat::kdump : FileFormat::v1);
            expect_live_record(reader, r);
            expect_one_instant(reader, d);
            if (!kdump) {
                // age itself decrypts it into the v1 file.
                const auto plain = host.tmp / "plain.core";
                const RunResult a = run({kAge, "-d", "-i", key.identity.string(), "-o", plain.string(), file.string()});
                ASSERT_EQ(a.exit_code, 0) << a.err;
                expect_one_instant(DumpReader::open(plain), d);
                for (const auto& f : DumpReader::open(plain).verify()) ADD_FAILURE() << f.check << ": " << f.message;
            }
            expect_guest_running(host, domid);
            ++domid;
        }
    }
}

// A pipe (standard output), v1 and compact (its flattened stream), plaintext
// and encrypted, and a flattened compact file (-F): the stream carries one
// instant of the writer; the image was in $TMPDIR, sealed when encrypted.
TEST(PrecopyForms, StreamsAndFlattened) {
    uint32_t domid = 140;
    for (bool kdump : {false, true}) {
        for (bool encrypted : {false, true}) {
            SCOPED_TRACE(std::string(kdump ? "kdump" : "v1") + (encrypted ? ", encrypted" : ""));
            const json d = guest(domid, "pvh", kPages, 250, "sequential");
            Host host(host_spec({d}));
            const std::filesystem::path tmpdir = host.tmp / "tmpdir";
            std::filesystem::create_directories(tmpdir);
            ::setenv("TMPDIR", tmpdir.c_str(), 1);
            const AgeKey key = age_keygen(host.tmp.path());
            DumpOptions o = precopy_options();
            o.kdump = kdump;
            if (encrypted) o.write.recipients = {key.recipient};
            std::vector<std::string> in_clear;
            at_final_round(o, [&] { in_clear = files_with_marker({tmpdir}, kMarker); });
            const auto streamed = host.tmp / "streamed";
            DumpResult r;
            {
                PipeToFile pipe(streamed);
                r = dump_domain_to_fd(*host.hv, domid, pipe.fd(), false, o);
                pipe.close();
            }
            ::unsetenv("TMPDIR");
            EXPECT_EQ(in_clear.empty(), encrypted) << "the image: sealed when encrypted, plain else";
            OpenOptions open;
            open.identity_files = {key.identity};
            const DumpReader reader = DumpReader::open(streamed, open);
            EXPECT_EQ(reader.format(), kdump ? FileFormat::kdump : FileFormat::v1);
            EXPECT_EQ(reader.flattened().has_value(), kdump);
            EXPECT_EQ(reader.encryption().has_value(), encrypted);
            expect_live_record(reader, r);
            expect_one_instant(reader, d);
            EXPECT_TRUE(listing(tmpdir).empty());
            expect_guest_running(host, domid);
            ++domid;
        }
    }
    // A flattened compact file (-F).
    const json d = guest(domid, "hvm", kPages, 250, "hot");
    Host host(host_spec({d}));
    DumpOptions o = precopy_options();
    o.kdump = true;
    o.flattened = true;
    const auto file = host.tmp / "live.flat";
    const DumpResult r = dump_domain_to_file(*host.hv, domid, file, o);
    const DumpReader reader = DumpReader::open(file);
    EXPECT_TRUE(reader.flattened());
    expect_live_record(reader, r);
    expect_one_instant(reader, d);
    expect_guest_running(host, domid);
}

// The command line: xen-dumpd --live --format kdump -o - is a flattened
// stream of one instant.
TEST(PrecopyForms, CommandLineStandardOutput) {
    const json d = guest(160, "hvm", kPages, 100, "random");
    Host host(host_spec({d}));
    const RunResult r = run({"xen-dumpd", "--host", host.host(), "--domain", "160", "--live", "--max-pause", "30000",
                             "--format", "kdump", "-q", "-o", "-"},
                            {"TMPDIR=" + host.tmp.path().string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto file = host.tmp / "out.flat";
    std::ofstream(file, std::ios::binary) << r.out;
    const DumpReader reader = DumpReader::open(file);
    EXPECT_TRUE(reader.flattened());
    EXPECT_EQ(reader.domain().get(keys::kLive).value_or(""), "precopy");
    expect_one_instant(reader, d);
    expect_guest_running(host, 160);
}

// An error while the final form is made from the image (a cancel there):
// nothing under the output's name nor beside it, log-dirty off, the guest
// running, the image gone.
TEST(PrecopyForms, ErrorWhileConvertingLeavesNothing) {
    struct Case {
        const char* name;
        bool kdump, flattened, encrypted;
    } cases[] = {{"kdump", true, false, false},
                 {"flattened", true, true, false},
                 {"encrypted v1", false, false, true},
                 {"encrypted kdump", true, false, true}};
    uint32_t domid = 170;
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        const json d = guest(domid, "hvm", kPages, 250, "random");
        Host host(host_spec({d}));
        const std::filesystem::path dir = host.tmp / "dumps";
        std::filesystem::create_directories(dir);
        const AgeKey key = age_keygen(host.tmp.path());
        DumpOptions o = precopy_options();
        o.kdump = c.kdump;
        o.flattened = c.flattened;
        if (c.encrypted) o.write.recipients = {key.recipient};
        std::atomic<bool> cancel{false};
        o.write.cancel = &cancel;
        // The first report after the paused round's that is not done: the conversion's.
        bool final_seen = false, converting = false;
        o.write.on_progress = [&](const WriteProgress& p) {
            if (p.live_final) final_seen = true;
            if (final_seen && !p.live_round && p.pages_done < p.pages_total && !converting) {
                converting = true;
                EXPECT_FALSE(sim_info(host, domid).at("logdirty").get<bool>()) << "converting after the unpause";
                EXPECT_FALSE(sim_info(host, domid).at("paused").get<bool>());
                cancel = true;
            }
        };
        const auto file = dir / "live.out";
        try {
            dump_domain_to_file(*host.hv, domid, file, o);
            ADD_FAILURE() << "dumped";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("cancelled"), std::string::npos) << e.what();
        }
        EXPECT_TRUE(converting) << "cancelled before the conversion";
        EXPECT_TRUE(listing(dir).empty()) << *listing(dir).begin();
        expect_guest_running(host, domid);
        ++domid;
    }
}

// A guest that balloons during the rounds of a compact dump: the pre-copy
// starts over (its image discarded) and the compact file is the new
// layout's, one instant, its restart recorded.
TEST(PrecopyForms, CompactRestartsWithTheLayout) {
    const json d = guest(180, "hvm", kPages, 100, "random");
    Host host(host_spec({d}));
    xendump::sim::SimHost sim(host.dir);
    DumpOptions o = precopy_options();
    o.kdump = true;
    bool done = false;
    o.write.on_progress = [&](const WriteProgress& p) {
        if (p.live_round && !done) {
            done = true;
            sim.balloon(180, 0x400, 24);
        }
    };
    const auto file = host.tmp / "live.kdump";
    const DumpResult r = dump_domain_to_file(*host.hv, 180, file, o);
    ASSERT_TRUE(r.live);
    EXPECT_EQ(r.live->restarts, 1u);
    const DumpReader reader = DumpReader::open(file);
    EXPECT_EQ(reader.domain().get(keys::kLiveRestarts).value_or(""), "1");
    std::vector<std::byte> page(4096);
    EXPECT_FALSE(reader.read_page_by_pfn(0x400, page));
    std::set<uint64_t> ballooned;
    for (uint64_t p = 0x400; p < 0x400 + 24; ++p) ballooned.insert(p);
    const Instant i = check_instant(reader, writer_of(d), ballooned);
    EXPECT_TRUE(i.consistent()) << i.torn << " torn pages of " << i.pages_checked;
    expect_guest_running(host, 180);
}

}  // namespace
}  // namespace xendump::test::live
