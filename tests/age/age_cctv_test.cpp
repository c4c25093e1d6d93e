// The age test vectors of the C2SP test kit (CCTV, age/testdata), the ones
// that apply to what we implement: X25519 identities, no armor, no
// passphrase, no post-quantum (hybrid) identity. Each vector is one test.
// scripts/fetch-cctv-age fetches them (npm package cctv-age, pinned, sha512
// checked) and scripts/run-tests passes their directory in XENDUMP_CCTV_AGE;
// without it the test is skipped, saying so.
//
// A vector is a textual header ("expect: …", "identity: …", "payload:
// SHA-256 of the plaintext", "compressed: zlib"…), an empty line, then the
// age file. Its "expect" is matched against how our reader fails:
// "age header: …" is a header failure, "no identity matches" no match,
// "header MAC" an HMAC failure, "age payload: …" a payload failure.
#include <gtest/gtest.h>
#include <zlib.h>

#include <map>

#include "age_helpers.hpp"

namespace xendump::age {
namespace {

using namespace xendump::age::test;

const char* vectors_dir() { return std::getenv("XENDUMP_CCTV_AGE"); }

std::vector<std::string> vector_names() {
    std::vector<std::string> out;
    const char* dir = vectors_dir();
    if (dir && std::filesystem::is_directory(dir))
        for (const auto& e : std::filesystem::directory_iterator(dir))
            if (e.is_regular_file()) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    // A placeholder, so that the missing vectors show as a skipped test.
    if (out.empty()) out.push_back("none");
    return out;
}

std::string hex(std::span<const uint8_t> b) {
    static const char d[] = "0123456789abcdef";
    std::string s;
    for (uint8_t x : b) {
        s += d[x >> 4];
        s += d[x & 15];
    }
    return s;
}

Bytes inflate_zlib(std::span<const uint8_t> in) {
    z_stream z{};
    if (inflateInit(&z) != Z_OK) throw std::runtime_error("inflateInit");
    Bytes out;
    z.next_in = const_cast<Bytef*>(in.data());
    z.avail_in = static_cast<uInt>(in.size());
    int rc = Z_OK;
    while (rc == Z_OK) {
        out.resize(out.size() + (1 << 20));
        z.next_out = out.data() + out.size() - (1 << 20);
        z.avail_out = 1 << 20;
        rc = inflate(&z, Z_NO_FLUSH);
        out.resize(out.size() - z.avail_out);
    }
    inflateEnd(&z);
    if (rc != Z_STREAM_END) throw std::runtime_error("bad zlib data");
    return out;
}

struct Vector {
    std::multimap<std::string, std::string> keys;
    Bytes file;
};

Vector read_vector(const std::filesystem::path& p) {
    Bytes all = read_file(p);
    Vector v;
    size_t pos = 0;
    for (;;) {
        auto nl = std::find(all.begin() + static_cast<long>(pos), all.end(), '\n');
        if (nl == all.end()) throw std::runtime_error("no end of the vector's header");
        std::string line(all.begin() + static_cast<long>(pos), nl);
        pos = static_cast<size_t>(nl - all.begin()) + 1;
        if (line.empty()) break;
        size_t colon = line.find(": ");
        if (colon == std::string::npos) throw std::runtime_error("bad vector header line: " + line);
        v.keys.emplace(line.substr(0, colon), line.substr(colon + 2));
    }
    v.file.assign(all.begin() + static_cast<long>(pos), all.end());
    return v;
}

// How our reader fails, in the vectors' words.
std::string outcome_of(const Error& e) {
    const std::string& m = e.message();
    if (m.find("no identity matches") != std::string::npos) return "no match";
    if (m.find("header MAC") != std::string::npos) return "HMAC failure";
    if (m.starts_with("age payload:")) return "payload failure";
    if (m.starts_with("age header:")) return "header failure";
    return "unclassified error: " + std::string(e.what());
}

class Cctv : public ::testing::TestWithParam<std::string> {};

TEST_P(Cctv, Vector) {
    if (!vectors_dir())
        GTEST_SKIP() << "XENDUMP_CCTV_AGE is not set: the C2SP age vectors were not fetched "
                        "(scripts/fetch-cctv-age; scripts/run-tests sets it)";
    if (GetParam() == "none") FAIL() << "XENDUMP_CCTV_AGE=" << vectors_dir() << " holds no vectors";
    Vector v = read_vector(std::filesystem::path(vectors_dir()) / GetParam());
    static const std::set<std::string> known{"expect", "payload", "identity", "passphrase", "armored",
                                             "compressed", "file key", "comment"};
    for (const auto& [k, val] : v.keys)
        if (!known.contains(k)) GTEST_SKIP() << "unknown key \"" << k << "\" (the kit says: ignore the vector)";
    if (v.keys.count("armored") && v.keys.find("armored")->second == "yes") GTEST_SKIP() << "ASCII armor: not implemented";
    auto [first, end] = v.keys.equal_range("identity");
    if (first == end) GTEST_SKIP() << "no X25519 identity (passphrase only: scrypt is not implemented)";
    std::vector<Identity> ids;
    for (auto it = first; it != end; ++it) {
        if (!it->second.starts_with("AGE-SECRET-KEY-1"))
            GTEST_SKIP() << "identity of a type not implemented (" << it->second.substr(0, 18) << "…)";
        ids.push_back(Identity::parse(it->second));
    }
    if (v.keys.count("compressed")) {
        ASSERT_EQ(v.keys.find("compressed")->second, "zlib");
        v.file = inflate_zlib(v.file);
    }
    const std::string expect = v.keys.find("expect")->second;
    SCOPED_TRACE(v.keys.count("comment") ? v.keys.find("comment")->second : "");

    xendump::test::TempDir dir;
    auto path = dir / "v.age";
    write_file(path, v.file);
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    Bytes released;  // the plaintext our reader gave out, chunk by chunk
    std::string outcome = "success";
    try {
        Decryptor d(fd.get(), path.string(), ids);
        for (uint64_t i = 0; i < d.chunks(); ++i) {
            const SecretBuffer c = d.chunk(i);
            released.insert(released.end(), c.bytes().begin(), c.bytes().end());
        }
    } catch (const Error& e) {
        outcome = outcome_of(e);
    }
    EXPECT_EQ(outcome, expect);
    if (expect == "success") {
        ASSERT_TRUE(v.keys.count("payload"));
        EXPECT_EQ(hex(sha256(released)), v.keys.find("payload")->second);
    } else if (expect == "payload failure" && !released.empty()) {
        // What was released before the failure matches the vector's
        // payload, which is what a streaming reader releases. Ours checks
        // the last chunk before giving out any and refuses a chunk sealed
        // as last with more after it, which a streaming reader gives out
        // before it sees the bytes that follow: then ours releases fewer
        // whole chunks, never other bytes.
        if (hex(sha256(released)) != v.keys.find("payload")->second) {
            EXPECT_EQ(released.size() % kChunkSize, 0u) << "released a part of a chunk that does not match the payload";
        }
    } else {
        EXPECT_TRUE(released.empty());
    }
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
    std::string s;
    for (char c : info.param) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return s;
}

INSTANTIATE_TEST_SUITE_P(Age, Cctv, ::testing::ValuesIn(vector_names()), test_name);

}  // namespace
}  // namespace xendump::age
