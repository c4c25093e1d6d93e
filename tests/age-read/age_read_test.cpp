// Reading age-encrypted dumps (issue 33 items 4 and 5): dumps of PV, PVH and
// HVM guests of the simulated host, v1 and compact with each compression,
// encrypted with the age tool (an X25519 and an ssh-ed25519 recipient); every
// verb of xen-dumpctl given the identity (-i, $XEN_DUMP_IDENTITY) prints for
// the encrypted file what it prints for the plain one. The reader decrypts
// only the chunks it reads (counted); a wrong key, a flipped byte, a cut file
// and an identity file others may read are clear errors with nothing
// printed; without a key info, list and verify say what the header says.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "dump_support.hpp"
#include "guest_ram.hpp"
#include "test_support.hpp"
#include "xendump/dump_kernel_log.hpp"
#include "xendump/dumper.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"
#include "xendump/reader.hpp"

namespace xendump::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint64_t kChunk = 64 * 1024, kSealed = kChunk + 16;

bool have(const std::string& program) { return run({"sh", "-c", "command -v " + program}).exit_code == 0; }

std::string trimmed(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

// The keys: an age identity (mode 0600, as age-keygen makes it), another
// that matches nothing, and an ssh-ed25519 key pair.
struct Keys {
    TempDir dir;
    fs::path identity = dir / "key.txt", other = dir / "other.txt", ssh = dir / "id_ed25519";
    std::string recipient;
    Keys() {
        for (const fs::path& p : {identity, other})
            if (auto r = run({"age-keygen", "-o", p.string()}); r.exit_code != 0) throw std::runtime_error(r.err);
        recipient = trimmed(run({"age-keygen", "-y", identity.string()}).out);
        if (auto r = run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", ssh.string()}); r.exit_code != 0)
            throw std::runtime_error(r.err);
    }
};
Keys& keys() {
    static Keys k;
    return k;
}

// `plain` encrypted by the age tool to the X25519 recipient (and the ssh one).
fs::path encrypt(const fs::path& plain, const fs::path& out, bool ssh = false) {
    std::vector<std::string> argv = {"age", "-r", keys().recipient};
    if (ssh) argv.insert(argv.end(), {"-R", keys().ssh.string() + ".pub"});
    argv.insert(argv.end(), {"-o", out.string(), plain.string()});
    if (auto r = run(argv); r.exit_code != 0) throw std::runtime_error("age: " + r.err);
    return out;
}

std::string hex_of(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
    return buf;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size()) s.replace(at, from.size(), to);
    return s;
}

// What a verb prints, the file's name made FILE and info's "Encrypted:" line
// (and JSON key) left out: the one difference an encrypted file may make
// (and the time estimate took).
struct Output {
    int exit_code;
    std::string out, err;
};
Output shown(std::vector<std::string> argv, const fs::path& file, const std::vector<std::string>& env = {}) {
    argv.push_back(file.string());
    RunResult r = run(argv, env);
    std::string out = replace_all(r.out, file.string(), "FILE");
    if (out.starts_with("{")) {
        json j = json::parse(out);
        j.erase("encrypted");
        out = j.dump(1);
    } else {
        out = std::regex_replace(out, std::regex("Encrypted: [^\n]*\n"), "");
        out = std::regex_replace(out, std::regex("Classified in [^\n]*\n"), "");  // estimate's timing
    }
    return {r.exit_code, out, replace_all(r.err, file.string(), "FILE")};
}

// The verb's output for `plain` and for `encrypted` with the identity: equal.
void expect_same(const std::vector<std::string>& verb, const fs::path& plain, const fs::path& encrypted,
                 const fs::path& identity) {
    SCOPED_TRACE(verb[1] + " " + encrypted.filename().string());
    std::vector<std::string> with_key = verb;
    with_key.insert(with_key.begin() + 2, {"-i", identity.string()});
    const Output a = shown(verb, plain), b = shown(with_key, encrypted);
    EXPECT_EQ(a.exit_code, b.exit_code) << b.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_EQ(a.err, b.err);
}

std::vector<json> guest_domains() {
    auto extents = [](uint64_t base) {
        return json::array({json::array({0, base, 160}), json::array({256, base + 0x1000, 200})});
    };
    return {dump::pv_domain(5, 8, "tree", 1024, extents(0x100000)), dump::hvm_domain(6, "pvh", 1024, extents(0x200000)),
            dump::hvm_domain(7, "hvm", 1024, extents(0x300000))};
}

class AgeRead : public ::testing::Test {
protected:
    void SetUp() override {
        if (!have("age") || !have("age-keygen") || !have("ssh-keygen")) GTEST_SKIP() << "needs age and ssh-keygen";
    }
    TempDir dir_;
};

// Every guest type, v1 and compact with each compression, to an X25519 and
// (v1) also an ssh-ed25519 recipient: info (text and JSON) and verify as for
// the plain file.
TEST_F(AgeRead, EveryVerbReadsEncryptedDumpsOfEveryGuestAndFormat) {
    for (const json& d : guest_domains()) {
        sim::Host host(dump::host_spec({d}));
        const uint32_t domid = d["domid"].get<uint32_t>();
        const std::string type = d.contains("type") ? d["type"].get<std::string>() : "pv";
        struct Form {
            std::string name;
            bool kdump;
            Compression c;
        };
        std::vector<Form> forms = {{"v1", false, Compression::none}};
        for (Compression c : {Compression::zstd, Compression::lz4, Compression::lzo, Compression::zlib, Compression::none})
            forms.push_back({"kdump-" + std::string(to_string(c)), true, c});
        for (const Form& f : forms) {
            SCOPED_TRACE(type + " " + f.name);
            const fs::path plain = dir_ / (type + "-" + f.name + (f.kdump ? ".kdump" : ".core"));
            DumpOptions o;
            o.kdump = f.kdump;
            o.compression = f.c;
            dump_domain_to_file(*host.hv, domid, plain, o);
            const fs::path enc = encrypt(plain, plain.string() + ".age", !f.kdump);
            for (const auto& verb : std::vector<std::vector<std::string>>{
                     {"xen-dumpctl", "info"}, {"xen-dumpctl", "info", "--json"}, {"xen-dumpctl", "verify"}})
                expect_same(verb, plain, enc, keys().identity);
            if (!f.kdump) expect_same({"xen-dumpctl", "info"}, plain, enc, keys().ssh);
            // The identity from the environment, as from -i.
            const Output a = shown({"xen-dumpctl", "verify"}, plain),
                         b = shown({"xen-dumpctl", "verify"}, enc, {"XEN_DUMP_IDENTITY=" + keys().identity.string()});
            EXPECT_EQ(b.exit_code, 0) << b.err;
            EXPECT_EQ(a.out, b.out);
            // info with the key says it is encrypted, and to how many.
            auto r = run({"xen-dumpctl", "info", "-i", keys().identity.string(), enc.string()});
            EXPECT_NE(r.out.find("Encrypted:    age, " + std::string(f.kdump ? "1" : "2") + " recipient(s): X25519"),
                      std::string::npos)
                << r.out;
        }
    }
}

// The fixture's crashed Linux guest (a real kernel's log, symbols, stacks),
// v1 and compact: info, dmesg, backtrace and symbol as for the plain file.
struct LinuxDumps {
    TempDir dir;
    fs::path image = dir / "linux.raw", v1 = dir / "linux.core", kdump = dir / "linux.kdump";
    fs::path v1_age = dir / "linux.core.age", kdump_age = dir / "linux.kdump.age";
    LinuxDumps() {
        const std::string ram = crashed_guest_ram();
        std::ofstream(image, std::ios::binary).write(ram.data(), static_cast<std::streamsize>(ram.size()));
        constexpr uint64_t kPages = (128ULL << 20) / 4096;
        json d = dump::hvm_domain(21, "hvm", kPages, json::array({json::array({0, 0x800000, kPages})}));
        d["memory"] = json{{"image", image.string()}};
        sim::Host host(dump::host_spec({d}));
        dump_domain_to_file(*host.hv, 21, v1);
        DumpOptions o;
        o.kdump = true;
        o.compression = Compression::lzo;
        dump_domain_to_file(*host.hv, 21, kdump, o);
        encrypt(v1, v1_age);
        encrypt(kdump, kdump_age);
    }
};
LinuxDumps& linux_dumps() {
    static LinuxDumps d;
    return d;
}

TEST_F(AgeRead, KernelVerbsReadEncryptedDumpsOfALinuxGuest) {
    const LinuxDumps& l = linux_dumps();
    for (auto [plain, enc] : {std::pair{l.v1, l.v1_age}, std::pair{l.kdump, l.kdump_age}}) {
        for (const auto& verb : std::vector<std::vector<std::string>>{{"xen-dumpctl", "info"},
                                                                       {"xen-dumpctl", "dmesg"},
                                                                       {"xen-dumpctl", "backtrace", "--json"},
                                                                       {"xen-dumpctl", "estimate"}})
            expect_same(verb, plain, enc, keys().identity);
        // symbol takes FILE then NAME.
        auto a = run({"xen-dumpctl", "symbol", plain.string(), "panic"});
        auto b = run({"xen-dumpctl", "symbol", "-i", keys().identity.string(), enc.string(), "panic"});
        EXPECT_EQ(a.exit_code, 0) << a.err;
        EXPECT_EQ(a.out, b.out) << b.err;
        auto dm = run({"xen-dumpctl", "dmesg", "-i", keys().identity.string(), enc.string()});
        EXPECT_NE(dm.out.find(kCrashedPanicLine), std::string::npos);
    }
}

// Random access: opening the 128 MiB dump, reading its kernel log and one
// page decrypt a few chunks of its ~2000, not the file.
TEST_F(AgeRead, ReadersDecryptOnlyTheChunksTheyRead) {
    const LinuxDumps& l = linux_dumps();
    OpenOptions open;
    open.identity_files = {keys().identity};
    for (const fs::path& file : {l.v1_age, l.kdump_age}) {
        SCOPED_TRACE(file.filename().string());
        const DumpReader r = DumpReader::open(file, open);
        const EncryptionInfo at_open = *r.encryption();
        EXPECT_GT(at_open.chunks, 50u);
        EXPECT_LT(at_open.chunks_decrypted, at_open.chunks / 10);
        std::vector<std::byte> page(4096);
        ASSERT_TRUE(r.read_page_by_pfn(1000, page));
        EXPECT_LE(r.encryption()->chunks_decrypted, at_open.chunks_decrypted + 3);
        const auto info = kernel::Vmcoreinfo::parse(*r.vmcoreinfo());
        ASSERT_TRUE(info);
        const auto log = read_dump_log(r, *info);
        EXPECT_FALSE(log.records.empty());
        EXPECT_LT(r.encryption()->chunks_decrypted, at_open.chunks / 10) << "of " << at_open.chunks;
        // The same pages as the plain file.
        const DumpReader p = DumpReader::open(file.string().substr(0, file.string().size() - 4));
        std::vector<std::byte> want(4096);
        ASSERT_TRUE(p.read_page_by_pfn(1000, want));
        EXPECT_EQ(page, want);
        EXPECT_FALSE(p.encryption());
    }
}

// A copy of `file` changed by `edit`.
fs::path edited(const fs::path& file, const fs::path& out, const std::function<void(std::string&)>& edit) {
    std::string bytes = slurp_text(file);
    edit(bytes);
    std::ofstream(out, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return out;
}

// Where the payload starts: after the header's "--- MAC" line and the 16-byte nonce.
uint64_t payload_offset(const std::string& bytes) {
    const size_t mac = bytes.find("\n---") + 1;
    return bytes.find('\n', mac) + 1 + 16;
}

TEST_F(AgeRead, BadKeysAndDamagedFilesAreClearErrorsWithNothingPrinted) {
    const LinuxDumps& l = linux_dumps();
    const std::string id = keys().identity.string();
    // A wrong identity: "no identity matches", naming the file.
    auto r = run({"xen-dumpctl", "info", "-i", keys().other.string(), l.v1_age.string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find(l.v1_age.string()), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("no identity matches"), std::string::npos) << r.err;

    const std::string bytes = slurp_text(l.v1_age);
    const uint64_t payload = payload_offset(bytes);
    // A flipped byte in chunk 0 (the ELF header, which every verb reads):
    // the chunk and its offset named, nothing printed.
    const fs::path flipped0 = edited(l.v1_age, dir_ / "flip0.core.age", [&](std::string& b) { b[payload + 100] ^= 1; });
    for (const char* verb : {"info", "dmesg", "verify"}) {
        r = run({"xen-dumpctl", verb, "-i", id, flipped0.string()});
        EXPECT_EQ(r.exit_code, 1) << verb;
        EXPECT_EQ(r.out, "") << verb;
        EXPECT_NE(r.err.find("chunk 0"), std::string::npos) << verb << ": " << r.err;
        EXPECT_NE(r.err.find("offset 0x" + hex_of(payload)), std::string::npos) << verb << ": " << r.err;
    }
    // A flipped byte in a chunk of pages: info and dmesg read other chunks,
    // verify reads them all and names it.
    const uint64_t k = 1000;
    const fs::path flipped = edited(l.v1_age, dir_ / "flip.core.age", [&](std::string& b) { b[payload + k * kSealed + 7] ^= 0x10; });
    r = run({"xen-dumpctl", "verify", "-q", "-i", id, flipped.string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("chunk " + std::to_string(k)), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("offset 0x" + hex_of(payload + k * kSealed)), std::string::npos) << r.err;
    EXPECT_EQ(run({"xen-dumpctl", "dmesg", "-i", id, flipped.string()}).out, run({"xen-dumpctl", "dmesg", l.v1.string()}).out);

    // Two chunks of pages swapped: named as reordered.
    const fs::path swapped = edited(l.v1_age, dir_ / "swap.core.age", [&](std::string& b) {
        std::string first = b.substr(payload + 500 * kSealed, kSealed);
        b.replace(payload + 500 * kSealed, kSealed, b.substr(payload + 501 * kSealed, kSealed));
        b.replace(payload + 501 * kSealed, kSealed, first);
    });
    r = run({"xen-dumpctl", "verify", "-q", "-i", id, swapped.string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("chunk 500 holds chunk 501: chunks were reordered or duplicated"), std::string::npos) << r.err;
    // The header's MAC changed: it does not match.
    const fs::path header = edited(l.v1_age, dir_ / "header.core.age", [&](std::string& b) {
        const size_t mac = b.find("\n--- ") + 5;
        b[mac] = b[mac] == 'A' ? 'B' : 'A';
    });
    r = run({"xen-dumpctl", "info", "-i", id, header.string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find(header.string()), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("MAC does not match"), std::string::npos) << r.err;
    // Every chunk of pages damaged: dmesg reads the log from some of them
    // and prints nothing of it (not the records before the bad chunk).
    const fs::path pages = edited(l.v1_age, dir_ / "pages.core.age", [&](std::string& b) {
        for (uint64_t i = 16; i + 16 < (b.size() - payload) / kSealed; ++i) b[payload + i * kSealed + 3] ^= 1;
    });
    r = run({"xen-dumpctl", "dmesg", "-i", id, pages.string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("does not authenticate"), std::string::npos) << r.err;

    // Cut at a chunk boundary and inside a chunk.
    const uint64_t chunks = (bytes.size() - payload + kSealed - 1) / kSealed;
    const fs::path at = edited(l.v1_age, dir_ / "at.core.age", [&](std::string& b) { b.resize(payload + (chunks - 1) * kSealed); });
    const fs::path off = edited(l.v1_age, dir_ / "off.core.age", [&](std::string& b) { b.resize(b.size() - 1000); });
    for (const fs::path& cut : {at, off}) {
        r = run({"xen-dumpctl", "info", "-i", id, cut.string()});
        EXPECT_EQ(r.exit_code, 1);
        EXPECT_EQ(r.out, "");
        EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find(cut.string()), std::string::npos) << r.err;
    }

    // An identity file others may read: refused, unless allowed.
    const fs::path open_key = dir_ / "open-key.txt";
    fs::copy_file(keys().identity, open_key);
    fs::permissions(open_key, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
    r = run({"xen-dumpctl", "info", "-i", open_key.string(), l.v1_age.string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find(open_key.string()), std::string::npos) << r.err;
    r = run({"xen-dumpctl", "info", "-i", open_key.string(), "--allow-insecure-identity", l.v1_age.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
}

// Without a key: info shows the header and the sidecar's clear metadata,
// verify checks the header and exits 3, the other verbs exit 3 saying a key
// is needed; list marks the encrypted dumps.
TEST_F(AgeRead, WithoutAKeyInfoListAndVerifySayWhatTheyCan) {
    const LinuxDumps& l = linux_dumps();
    const fs::path dumps = dir_ / "dumps";
    fs::create_directory(dumps);
    const fs::path enc = dumps / "web01-21-20261201T105953Z.core.age";
    fs::copy_file(l.v1_age, enc);
    fs::copy_file(l.v1, dumps / "db01-9-20261201T105000Z.core");
    std::ofstream(enc.string() + ".json") << json{{"domain", "web01"}, {"domid", 21}, {"type", "hvm"},
                                                  {"reason", "crash"}, {"pages", 32768}, {"result", "ok"},
                                                  {"format", "v1"}, {"start_time", 1764586793}}
                                                 .dump();
    auto r = run({"xen-dumpctl", "info", enc.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("Encrypted:    (age, 1 recipient: X25519)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Domain:       21 (web01)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Contents:     need a key"), std::string::npos) << r.out;
    r = run({"xen-dumpctl", "info", "--json", enc.string()});
    const json j = json::parse(r.out);
    EXPECT_EQ(j["encrypted"]["recipients"], 1);
    EXPECT_EQ(j["readable"], false);
    EXPECT_EQ(j["sidecar"]["domain"], "web01");

    r = run({"xen-dumpctl", "verify", enc.string()});
    EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
    EXPECT_NE(r.out.find("the age header is well-formed; the pages need a key"), std::string::npos) << r.out;
    // A header that does not parse fails (1).
    const fs::path bad = edited(enc, dir_ / "bad.core.age", [](std::string& b) { b[b.find("-> X25519") + 3] = '\x01'; });
    r = run({"xen-dumpctl", "verify", bad.string()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("age header"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(bad.string()), std::string::npos) << r.err;

    for (const char* verb : {"dmesg", "backtrace", "estimate"}) {
        r = run({"xen-dumpctl", verb, enc.string()});
        EXPECT_EQ(r.exit_code, 3) << verb << r.err;
        EXPECT_EQ(r.out, "");
        EXPECT_NE(r.err.find("need a key"), std::string::npos) << r.err;
    }
    r = run({"xen-dumpctl", "symbol", enc.string(), "panic"});
    EXPECT_EQ(r.exit_code, 3) << r.err;

    r = run({"xen-dumpctl", "list", "--json", "--dump-dir", dumps.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json list = json::parse(r.out);
    ASSERT_EQ(list.size(), 2u) << r.out;
    for (const auto& e : list) {
        const bool is_enc = e["path"].get<std::string>().ends_with(".age");
        EXPECT_EQ(e["encrypted"], is_enc) << e.dump();
        if (is_enc) {
            EXPECT_EQ(e["recipients"], 1);
        }
    }
    r = run({"xen-dumpctl", "list", "--dump-dir", dumps.string()});
    EXPECT_NE(r.out.find("v1+age"), std::string::npos) << r.out;

    // A plain dump needs no key file: one named that is missing is not read.
    r = run({"xen-dumpctl", "info", l.v1.string()}, {"XEN_DUMP_IDENTITY=" + (dir_ / "missing.txt").string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
}

// debug refuses an encrypted dump; dump writes its vmcore to a pipe only.
TEST_F(AgeRead, NoPlaintextVmcoreOnADisk) {
    const LinuxDumps& l = linux_dumps();
    const std::string id = keys().identity.string();
    auto r = run({"xen-dumpctl", "debug", "--print-command", "--vmlinux", "/bin/sh", "-i", id, l.v1_age.string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("plaintext"), std::string::npos) << r.err;
    r = run({"xen-dumpctl", "dump", "-i", id, "-o", (dir_ / "vmcore").string(), l.v1_age.string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_FALSE(fs::exists(dir_ / "vmcore"));
    EXPECT_NE(r.err.find("pipe"), std::string::npos) << r.err;
    const std::string ctl = build_program("xen-dumpctl").string();
    auto piped = run({"sh", "-c", "\"$0\" dump -i \"$1\" -o - \"$2\" | sha256sum", ctl, id, l.v1_age.string()});
    auto plain = run({"sh", "-c", "\"$0\" dump -o - \"$1\" | sha256sum", ctl, l.v1.string()});
    EXPECT_EQ(piped.exit_code, 0) << piped.err;
    EXPECT_EQ(piped.out, plain.out);
}

// dump -r/-R (issue 33 item 2): the vmcore encrypted to the recipients, to a
// file (also for an encrypted dump) or to a pipe, decrypts with age -d to the
// vmcore of the plain dump; the file holds no plaintext of it. -r is
// --recipient for dump only: --reverse keeps its long name there, list -r
// is still --reverse.
TEST_F(AgeRead, DumpEncryptsItsVmcoreToRecipients) {
    const LinuxDumps& l = linux_dumps();
    const std::string id = keys().identity.string();
    const fs::path plain = dir_ / "plain.vmcore", enc = dir_ / "enc.vmcore.age", from_plain = dir_ / "p.vmcore.age";
    auto r = run({"xen-dumpctl", "dump", "-o", plain.string(), l.v1.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string vmcore = slurp_text(plain);
    ASSERT_GT(vmcore.size(), 1u << 20);
    // An encrypted dump's vmcore to a file: refused in clear, written encrypted.
    r = run({"xen-dumpctl", "dump", "-i", id, "-r", keys().recipient, "-o", enc.string(), l.v1_age.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string sealed = slurp_text(enc);
    EXPECT_TRUE(sealed.starts_with("age-encryption.org/v1\n"));
    // No page of the vmcore in clear: its notes and a page from its middle.
    EXPECT_EQ(sealed.find("VMCOREINFO"), std::string::npos);
    EXPECT_EQ(sealed.find(vmcore.substr(vmcore.size() / 2, 4096)), std::string::npos);
    auto d = run({"age", "-d", "-i", id, enc.string()});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    EXPECT_TRUE(d.out == vmcore) << "the decrypted vmcore differs from the plain dump's";
    // A plain dump's, to an ssh-ed25519 recipient by -R and an X25519 one by -r; each key opens it.
    const fs::path recipients = dir_ / "recipients.txt";
    std::ofstream(recipients) << "# the ssh key\n" << slurp_text(keys().ssh.string() + ".pub");
    r = run({"xen-dumpctl", "dump", "-R", recipients.string(), "-r", keys().recipient, "-o", from_plain.string(),
             l.v1.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const std::string& key : {id, keys().ssh.string()}) {
        d = run({"age", "-d", "-i", key, from_plain.string()});
        EXPECT_EQ(d.exit_code, 0) << d.err;
        EXPECT_TRUE(d.out == vmcore) << key;
    }
    // To a pipe: age -d reads it back.
    const std::string ctl = build_program("xen-dumpctl").string();
    auto piped = run({"sh", "-c", "\"$0\" dump -i \"$1\" -r \"$2\" -o - \"$3\" | age -d -i \"$1\" | sha256sum", ctl, id,
                      keys().recipient, l.kdump_age.string()});
    auto clear = run({"sh", "-c", "\"$0\" dump -o - \"$1\" | sha256sum", ctl, l.kdump.string()});
    EXPECT_EQ(piped.exit_code, 0) << piped.err;
    EXPECT_EQ(piped.out, clear.out);
    // A recipient that does not parse: a usage error, nothing written.
    r = run({"xen-dumpctl", "dump", "-r", "age1nope", "-o", (dir_ / "bad").string(), l.v1.string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("-r #1"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "bad"));
    // --reverse is still dump's, by its long name.
    r = run({"xen-dumpctl", "dump", "--reverse", "-o", (dir_ / "rev").string(), l.v1.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(slurp_text(dir_ / "rev") == vmcore);
    // list -r is --reverse (a flag: the operand after it is a MATCH, not a recipient).
    r = run({"xen-dumpctl", "list", "-r", "--dump-dir", dir_.path().string()});
    EXPECT_EQ(r.exit_code, 1) << r.err;  // not a usage error (2): nothing listed, as coredumpctl
    EXPECT_NE(r.err.find("dumps in"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace xendump::test
