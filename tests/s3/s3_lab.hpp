// The s3-lab (tests/s3-lab/s3-lab) as a GoogleTest environment: started
// once for the test program, its variables (the endpoint, an S3 user's
// keys) put in the environment, stopped at the end. A lab that does not
// start fails every test: the store is part of what is tested, never
// skipped. S3LAB_ENV=FILE uses a lab already running (its `env` file)
// instead, left running; S3LAB_MEMSTORE_MIB=N gives the lab a memory store
// of N MiB (s3-lab start --memstore-mib) for a program that stores more.
#pragma once

#include <map>
#include <string>

#include "xendump/s3.hpp"

namespace xendump::test {

struct S3Lab {
    std::map<std::string, std::string> vars;  // S3LAB_* and AWS_*
    std::string error;                        // why it did not start
    bool up() const { return error.empty() && !vars.empty(); }
    const std::string& endpoint() const { return vars.at("S3LAB_ENDPOINT"); }
    s3::Settings settings() const;            // the lab's endpoint and user
};

// The lab of this test program (started by its environment).
const S3Lab& s3_lab();

// A new bucket with a unique name, made in the lab.
std::string new_bucket(s3::Client& client, const std::string& hint);

}  // namespace xendump::test

// In a test: fails it (with the lab's reason) unless the lab is up.
#define REQUIRE_S3_LAB()                                                                  \
    do {                                                                                  \
        if (!::xendump::test::s3_lab().up()) FAIL() << "s3-lab: " << ::xendump::test::s3_lab().error; \
    } while (0)
