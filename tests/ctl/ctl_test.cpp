// xen-dumpctl info / verify on good and corrupt files.
#include <gtest/gtest.h>

#include <elf.h>

#include <algorithm>
#include <functional>

#include <nlohmann/json.hpp>

#include "hand_built_dump.hpp"
#include "test_support.hpp"

namespace xendump::test {
namespace {

// A file made bad by `corrupt`, and the check (and offset) that names it.
struct CorruptCase {
    const char* name;
    std::function<void(HandBuiltDump&)> corrupt;
    std::string check;
    uint64_t offset;
};

class Ctl : public ::testing::Test {
protected:
    void SetUp() override {
        spec_.entries = sample_entries(400, true);
        dump_ = build_hand_dump(spec_);
        good_ = dir_ / "good.core";
        dump_.write(good_);
    }
    std::string corrupt_with(const std::function<void(HandBuiltDump&)>& f, const std::string& name) {
        HandBuiltDump d = dump_;
        f(d);
        auto p = dir_ / name;
        d.write(p);
        return p.string();
    }
    TempDir dir_;
    HandBuildSpec spec_;
    HandBuiltDump dump_;
    std::filesystem::path good_;
};

TEST_F(Ctl, VerifyGoodFile) {
    auto r = run({"xen-dumpctl", "verify", good_.string()});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST_F(Ctl, VerifyCorruptFilesNameTheOffset) {
    const uint64_t ph2 = dump_.phdr_offset(2);
    const uint64_t chunk1 = dump_.pages_offset + 256 * 4096;
    std::vector<CorruptCase> cases = {
        {"magic.core", [](HandBuiltDump& d) { d.bytes[0] = std::byte{0}; }, "elf-ident", 0},
        {"offset.core", [&](HandBuiltDump& d) { d.put<uint64_t>(ph2 + 8, d.get<uint64_t>(ph2 + 8) + 4096); },
         "load-offset", ph2},
        {"flip.core", [&](HandBuiltDump& d) { d.bytes[chunk1 + 5] ^= std::byte{4}; }, "digest-mismatch", chunk1},
        {"trunc.core", [&](HandBuiltDump& d) { d.bytes.resize(d.shoff + 10); }, "shoff-range", 0x28},
    };
    for (const auto& c : cases) {
        auto path = corrupt_with(c.corrupt, c.name);
        auto r = run({"xen-dumpctl", "verify", path});
        EXPECT_EQ(r.exit_code, 1) << c.name << ": " << r.out << r.err;
        char off[32];
        std::snprintf(off, sizeof off, "0x%llx", static_cast<unsigned long long>(c.offset));
        const std::string want = path + ": " + c.check + ": ";
        EXPECT_NE(r.out.find(want), std::string::npos) << c.name << ": " << r.out;
        EXPECT_NE(r.out.find(std::string("at offset ") + off + ":"), std::string::npos) << c.name << ": " << r.out;
    }
}

// Issue 16.5: a file without digests fails unless --allow-no-digests, and
// passes with it saying so; hidden digests fail either way, naming the file
// and offset.
TEST_F(Ctl, VerifyNoDigestsFailsUnlessAllowed) {
    HandBuildSpec spec = spec_;
    spec.digests = false;
    auto p = (dir_ / "nodigests.core").string();
    build_hand_dump(spec).write(p);
    auto r = run({"xen-dumpctl", "verify", p});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.out.find(p + ": digests-absent: section ["), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("--allow-no-digests"), std::string::npos) << r.err;
    for (bool quiet : {false, true}) {
        std::vector<std::string> argv = {"xen-dumpctl", "verify", "--allow-no-digests", p};
        if (quiet) argv.insert(argv.begin() + 2, "--quiet");
        r = run(argv);
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        EXPECT_NE(r.out.find(p + ": OK without digests (--allow-no-digests)"), std::string::npos) << r.out;
    }
    r = run({"xen-dumpctl", "verify", "--no-digests", p});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find(p + ": OK, structure only (--no-digests)"), std::string::npos) << r.out;
    r = run({"xen-dumpctl", "verify", good_.string()});
    EXPECT_NE(r.out.find(good_.string() + ": OK\n"), std::string::npos) << r.out;
}

TEST_F(Ctl, VerifyHiddenDigestsFailWithAllowNoDigests) {
    const uint64_t chunk1 = dump_.pages_offset + 256 * 4096;
    const uint64_t trailer_hdr = dump_.section_header.at(".note.xen_trailer");
    std::vector<CorruptCase> cases = {
        {"renamed.core", [](HandBuiltDump& d) { d.bytes[d.section_name.at(".note.xen_trailer") + 6] ^= std::byte{1}; },
         "section-names", trailer_hdr},
        {"type.core", [](HandBuiltDump& d) { d.put<uint32_t>(d.digest_note_offset + 8, 0x1c); }, "trailer-notes",
         dump_.digest_note_offset},
        {"name.core", [](HandBuiltDump& d) { d.bytes[d.digest_note_offset + 12] ^= std::byte{1}; }, "trailer-notes",
         dump_.digest_note_offset},
    };
    for (const auto& c : cases) {
        auto path = corrupt_with(
            [&](HandBuiltDump& d) {
                c.corrupt(d);
                d.bytes[chunk1 + 5] ^= std::byte{4};
            },
            c.name);
        auto r = run({"xen-dumpctl", "verify", "--allow-no-digests", path});
        EXPECT_EQ(r.exit_code, 1) << c.name << ": " << r.out << r.err;
        char off[32];
        std::snprintf(off, sizeof off, "0x%llx", static_cast<unsigned long long>(c.offset));
        EXPECT_NE(r.out.find(path + ": " + c.check + ": "), std::string::npos) << c.name << ": " << r.out;
        EXPECT_NE(r.out.find(std::string("at offset ") + off + ":"), std::string::npos) << c.name << ": " << r.out;
        EXPECT_EQ(r.out.find("OK"), std::string::npos) << c.name << ": " << r.out;
    }
}

TEST_F(Ctl, InfoJson) {
    auto r = run({"xen-dumpctl", "info", "--json", good_.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["nr_pages"].get<uint64_t>(), spec_.entries.size());
    EXPECT_EQ(j["nr_runs"].get<uint64_t>(), 3u);
    EXPECT_EQ(j["format"], "v1");
    EXPECT_EQ(j["domid"].get<uint64_t>(), 7u);
    EXPECT_EQ(j["name"], "hand-built");
    EXPECT_EQ(j["digests"], "present");
    EXPECT_EQ(j["vcpus"].size(), 2u);
}

TEST_F(Ctl, InfoText) {
    auto r = run({"xen-dumpctl", "info", good_.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("hand-built"), std::string::npos) << r.out;
}

TEST_F(Ctl, InfoBadFileIsOneLineWithOffset) {
    auto path = corrupt_with([](HandBuiltDump& d) { d.put<uint64_t>(0x20, d.bytes.size()); }, "bad.core");
    auto r = run({"xen-dumpctl", "info", path});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("offset 0x20"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST_F(Ctl, UsageAndHelp) {
    EXPECT_EQ(run({"xen-dumpctl"}).exit_code, 2);
    EXPECT_EQ(run({"xen-dumpctl", "frobnicate"}).exit_code, 2);
    // No FILE or MATCH: the latest dump of the dump directory (none here), as coredumpctl.
    EXPECT_EQ(run({"xen-dumpctl", "info", "--dump-dir", (good_.parent_path() / "no-such-dir").string()}).exit_code, 1);
    EXPECT_EQ(run({"xen-dumpctl", "verify", "--bogus", good_.string()}).exit_code, 2);
    EXPECT_NE(run({"xen-dumpctl", "verify", "--help"}).out.find("--allow-no-digests"), std::string::npos);
    auto h = run({"xen-dumpctl", "--help"});
    EXPECT_EQ(h.exit_code, 0);
    EXPECT_NE(h.out.find("verify"), std::string::npos);
    EXPECT_EQ(run({"xen-dumpctl", "info", "--help"}).exit_code, 0);
    EXPECT_EQ(run({"xen-dumpctl", "verify", "--help"}).exit_code, 0);
    auto v = run({"xen-dumpctl", "--version"});
    EXPECT_EQ(v.exit_code, 0);
    EXPECT_NE(v.out.find("xen-dumpctl"), std::string::npos);
}

TEST_F(Ctl, MissingFileFails) {
    auto r = run({"xen-dumpctl", "verify", (dir_ / "nope.core").string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("nope.core"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace xendump::test
