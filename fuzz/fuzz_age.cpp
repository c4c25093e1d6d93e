// libFuzzer target: the age header parser and the random-access reader
// (libdump/src/age) over arbitrary bytes. The reader opens the input as a
// file (a memfd) with a fixed identity, to which the seeds in corpus/age are
// encrypted, so that mutations reach the MAC, the nonce and the chunks.
// Errors are the expected outcome; crashes, leaks and UB are the bugs.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "age/age.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"

namespace {
// A key made for the seeds (its recipient: age1ksfz8cde43zmkqdfz3c7qc0z8d8hs0fwrkse4mndkglfujkqt3nsw2aks8).
constexpr const char* kIdentity = "AGE-SECRET-KEY-12N2DJ9KPT7U5W4J2QYJYUGRUXRA4K9W3KYRLFC0FUFP4GFYRRP4S0E2WHE";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace xendump::age;
    static const std::vector<Identity> ids{Identity::parse(kIdentity)};
    try {
        parse_header(std::span(data, size), "fuzz.age");
    } catch (const xendump::Error&) {
    }
    xendump::UniqueFd fd(memfd_create("fuzz.age", MFD_CLOEXEC));
    if (!fd || write(fd.get(), data, size) != static_cast<ssize_t>(size)) return 0;
    try {
        Decryptor d(fd.get(), "fuzz.age", ids, 2);
        for (uint64_t i = 0; i < d.chunks(); ++i) d.chunk(i);
    } catch (const xendump::Error&) {
    }
    return 0;
}
