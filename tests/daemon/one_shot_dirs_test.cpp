// `xen-dumpd --domain` (a one-shot dump, by itself when no service runs)
// against a simulated host, and `xen-dumpctl list` on what it wrote: only
// the programs are used, so these run against any version of them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "service_harness.hpp"
#include "test_support.hpp"

using xendump::test::TempDir;

namespace {

class OneShot : public ::testing::Test {
protected:
    void SetUp() override {
        xendump::test::create_sim_host(tmp_ / "host", {{1, "web01", "00000000-0000-4000-8000-000000000001", 64},
                                                       {2, ".hidden", "00000000-0000-4000-8000-000000000002", 64},
                                                       {3, "evil\n\x1b[31mred", "00000000-0000-4000-8000-000000000003", 64}});
        std::ofstream(config_) << "[Dump]\n";
        std::filesystem::create_directory(dumps_);
    }
    xendump::test::RunResult dump(std::vector<std::string> extra, const std::string& domain = "1") {
        // A socket nobody listens on: the command dumps by itself.
        std::vector<std::string> argv{"xen-dumpd", "--domain", domain, "--host", "sim:" + (tmp_ / "host").string(),
                                      "--socket", (tmp_ / "no.sock").string(), "-q"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        return xendump::test::run(argv);
    }
    TempDir tmp_;
    std::filesystem::path config_ = tmp_ / "xen-dumpd.conf";
    std::filesystem::path dumps_ = tmp_ / "dumps";
};

TEST_F(OneShot, WritesIntoAnExistingDumpDir) {
    auto r = dump({"--config", config_.string(), "--dump-dir", dumps_.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(std::filesystem::path(r.out.substr(0, r.out.find('\n'))).parent_path(), dumps_) << r.out;
}

TEST_F(OneShot, NamedConfigFileThatIsMissingFails) {
    auto missing = tmp_ / "mistyped.conf";
    auto r = dump({"--config", missing.string(), "--dump-dir", dumps_.string()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find(missing.string()), std::string::npos) << r.err;
    EXPECT_TRUE(std::filesystem::is_empty(dumps_)) << "dumped with the defaults";
}

TEST_F(OneShot, ConfigFileThatIsADirectoryFails) {
    auto r = dump({"--config", tmp_.path().string(), "--dump-dir", dumps_.string()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("directory"), std::string::npos) << r.err;
    EXPECT_TRUE(std::filesystem::is_empty(dumps_)) << "dumped with the defaults";
}

TEST_F(OneShot, MistypedDumpDirIsNotCreated) {
    auto mistyped = tmp_ / "nonexistent" / "dir";
    auto r = dump({"--config", config_.string(), "--dump-dir", mistyped.string()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find(mistyped.string()), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(tmp_ / "nonexistent")) << "created a mistyped directory";
}

TEST_F(OneShot, OutputIntoMistypedDirectoryIsNotCreated) {
    auto mistyped = tmp_ / "nonexistent" / "web.core";
    auto r = dump({"--config", config_.string(), "-o", mistyped.string()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_FALSE(std::filesystem::exists(tmp_ / "nonexistent")) << "created a mistyped directory";
}

TEST_F(OneShot, HostileNamesAreDumpedVisiblyAndListedEscaped) {
    for (const char* domid : {"2", "3"}) {
        auto r = dump({"--config", config_.string(), "--dump-dir", dumps_.string()}, domid);
        ASSERT_EQ(r.exit_code, 0) << domid << ": " << r.err;
        std::string path = r.out.substr(0, r.out.find('\n'));
        EXPECT_EQ(std::filesystem::path(path).parent_path(), dumps_) << r.out;
        EXPECT_FALSE(std::filesystem::path(path).filename().string().starts_with(".")) << path;
        EXPECT_EQ(path.find('\x1b'), std::string::npos) << path;
    }
    auto list = xendump::test::run(
        {"xen-dumpctl", "list", "--json", "--config", config_.string(), "--dump-dir", dumps_.string()});
    ASSERT_EQ(list.exit_code, 0) << list.err;
    auto j = nlohmann::json::parse(list.out, nullptr, false);
    ASSERT_TRUE(j.is_array()) << list.out;
    ASSERT_EQ(j.size(), 2u) << "a dump is hidden from list (and from MaxUse): " << list.out;
    EXPECT_EQ(j[0]["domain"].get<std::string>() + j[1]["domain"].get<std::string>(), ".hiddenevil\n\x1b[31mred");
    auto text = xendump::test::run({"xen-dumpctl", "list", "--config", config_.string(), "--dump-dir", dumps_.string()});
    EXPECT_EQ(text.out.find('\x1b'), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("evil\\n\\x1b[31mred"), std::string::npos) << text.out;
}

}  // namespace
