#include "s3_lab.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <fstream>
#include <sstream>

#include "test_support.hpp"

namespace xendump::test {

namespace {

S3Lab g_lab;
bool g_own = false;

void parse_vars(const std::string& text) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        const auto eq = line.find('=');
        if (eq == std::string::npos || eq == 0) continue;
        g_lab.vars[line.substr(0, eq)] = line.substr(eq + 1);
    }
}

class LabEnvironment : public ::testing::Environment {
public:
    void SetUp() override {
        if (const char* file = std::getenv("S3LAB_ENV")) {
            parse_vars(slurp_text(file));
        } else {
            std::vector<std::string> argv{(source_root() / "tests" / "s3-lab" / "s3-lab").string(), "start"};
            // A program that stores more than the default 512 MiB says so (meson's env).
            if (const char* mib = std::getenv("S3LAB_MEMSTORE_MIB")) argv.insert(argv.end(), {"--memstore-mib", mib});
            const RunResult r = run(argv);
            if (r.exit_code != 0) {
                g_lab.error = "the store did not start: " + r.err;
                return;
            }
            parse_vars(r.out);
            g_own = true;
        }
        for (const char* k : {"S3LAB_DIR", "S3LAB_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"})
            if (!g_lab.vars.count(k)) g_lab.error = std::string("the lab did not say ") + k;
        if (!g_lab.error.empty()) return;
        // The programs under test read these, as an operator's would.
        for (const char* k : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL"})
            ::setenv(k, g_lab.vars[k].c_str(), 1);
        ::unsetenv("AWS_SESSION_TOKEN");
        ::unsetenv("AWS_PROFILE");
        ::setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent", 1);
    }
    void TearDown() override {
        if (!g_own) return;
        const RunResult r =
            run({(source_root() / "tests" / "s3-lab" / "s3-lab").string(), "stop", g_lab.vars["S3LAB_DIR"]});
        EXPECT_EQ(r.exit_code, 0) << r.err;
    }
};

[[maybe_unused]] const auto* g_env = ::testing::AddGlobalTestEnvironment(new LabEnvironment);

}  // namespace

const S3Lab& s3_lab() { return g_lab; }

s3::Settings S3Lab::settings() const {
    s3::Settings s;
    s.endpoint = vars.at("S3LAB_ENDPOINT");
    s.region = "us-east-1";
    s.credentials.access_key_id = vars.at("AWS_ACCESS_KEY_ID");
    s.credentials.secret_access_key = vars.at("AWS_SECRET_ACCESS_KEY");
    s.credentials.source = "s3-lab";
    return s;
}

std::string new_bucket(s3::Client& client, const std::string& hint) {
    static std::atomic<unsigned> n{0};
    const std::string name = hint + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
    client.create_bucket(name);
    return name;
}

}  // namespace xendump::test
