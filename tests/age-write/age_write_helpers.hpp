// Helpers of the age-write suite (issue 33 item 2): an identity made by
// age-keygen, decryption by the age tool (Debian's age 1.1.1, the reference
// implementation), and a scan of directories and of this process's open
// files for a marker that must never lie on disk in clear.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace xendump::test::agewrite {

inline const std::string kAge = "/usr/bin/age", kKeygen = "/usr/bin/age-keygen";
inline const std::string kAgeMagic = "age-encryption.org/v1\n";

// An X25519 identity from age-keygen, in `dir`, and its recipient (age1…).
struct AgeKey {
    std::filesystem::path identity;
    std::string recipient;
};
inline AgeKey age_keygen(const std::filesystem::path& dir, const std::string& name = "key.txt") {
    AgeKey k{dir / name, {}};
    RunResult r = run({kKeygen, "-o", k.identity.string()});
    if (r.exit_code != 0) throw std::runtime_error("age-keygen: " + r.err);
    r = run({kKeygen, "-y", k.identity.string()});
    if (r.exit_code != 0) throw std::runtime_error("age-keygen -y: " + r.err);
    k.recipient = r.out.substr(0, r.out.find('\n'));
    return k;
}

// `age -d -i IDENTITY FILE`: the plaintext, or a test failure and empty.
inline std::vector<std::byte> age_decrypt(const AgeKey& key, const std::filesystem::path& file,
                                          const std::filesystem::path& scratch) {
    std::filesystem::remove(scratch);
    RunResult r = run({kAge, "-d", "-i", key.identity.string(), "-o", scratch.string(), file.string()});
    EXPECT_EQ(r.exit_code, 0) << "age -d " << file << ": " << r.err;
    std::vector<std::byte> plain = slurp(scratch);
    std::filesystem::remove(scratch);
    return plain;
}

inline bool contains(const std::vector<std::byte>& hay, const std::string& needle) {
    const auto* n = reinterpret_cast<const std::byte*>(needle.data());
    return std::search(hay.begin(), hay.end(), n, n + needle.size()) != hay.end();
}

inline bool starts_with_age_magic(const std::filesystem::path& p) {
    const std::vector<std::byte> b = slurp(p);
    return b.size() >= kAgeMagic.size() &&
           std::equal(kAgeMagic.begin(), kAgeMagic.end(), reinterpret_cast<const char*>(b.data()));
}

// Every file holding `marker` in clear: the regular files under `dirs`, and
// the files process `pid` ("self": this one) has open that lie in them
// (unnamed temporary files and AtomicFile's unpublished one included:
// /proc/PID/fd reads them).
inline std::vector<std::string> files_with_marker(const std::vector<std::filesystem::path>& dirs,
                                                  const std::string& marker, const std::string& pid = "self") {
    std::vector<std::string> found;
    auto inside = [&](const std::string& target) {
        return std::any_of(dirs.begin(), dirs.end(), [&](const auto& d) { return target.starts_with(d.string()); });
    };
    for (const auto& d : dirs) {
        std::error_code ec;
        for (auto it = std::filesystem::recursive_directory_iterator(d, ec); !ec && it != std::filesystem::end(it);
             it.increment(ec))
            if (it->is_regular_file(ec) && contains(slurp(it->path()), marker)) found.push_back(it->path().string());
    }
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc/" + pid + "/fd", ec)) {
        std::error_code lec;
        const std::string target = std::filesystem::read_symlink(e.path(), lec).string();
        // Only files: the service also holds the dump directory open (its fsync).
        if (lec || !inside(target) || !std::filesystem::is_regular_file(e.path(), lec)) continue;
        if (contains(slurp(e.path()), marker)) found.push_back(target + " (open as " + e.path().string() + ")");
    }
    return found;
}

}  // namespace xendump::test::agewrite
