// Helpers of the age tests: files written with the StreamWriter, and files
// made by hand from the format's parts (to make the bad inputs that our
// encryptor refuses to write).
#pragma once

#include <fcntl.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "age/age.hpp"
#include "age/encoding.hpp"
#include "test_support.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"

namespace xendump::age::test {

inline Bytes random_plaintext(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    Bytes b(n);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    return b;
}

inline void write_file(const std::filesystem::path& p, std::span<const uint8_t> data, unsigned mode = 0600) {
    UniqueFd fd(::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
    if (!fd || ::write(fd.get(), data.data(), data.size()) != static_cast<ssize_t>(data.size()))
        throw std::runtime_error("cannot write " + p.string());
    ::fchmod(fd.get(), mode);
}

inline void write_text(const std::filesystem::path& p, const std::string& text, unsigned mode = 0600) {
    write_file(p, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()), mode);
}

inline Bytes read_file(const std::filesystem::path& p) {
    auto b = xendump::test::slurp(p);
    return Bytes(reinterpret_cast<const uint8_t*>(b.data()), reinterpret_cast<const uint8_t*>(b.data()) + b.size());
}

// `plain` encrypted to `recipients` with the StreamWriter, written in pieces of `piece` bytes.
inline Bytes encrypt(std::span<const Recipient> recipients, std::span<const uint8_t> plain, size_t piece = 10000) {
    Bytes out;
    StreamWriter w(recipients, [&](std::span<const uint8_t> b) { out.insert(out.end(), b.begin(), b.end()); });
    for (size_t i = 0; i < plain.size(); i += piece) w.write(plain.subspan(i, std::min(piece, plain.size() - i)));
    w.finish();
    return out;
}

// The whole plaintext of the age file `path`, through a Decryptor.
inline Bytes decrypt_file(const std::filesystem::path& path, std::span<const Identity> ids) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) throw std::runtime_error("cannot open " + path.string());
    Decryptor d(fd.get(), path.string(), ids);
    Bytes out(d.size());
    if (d.read(0, out) != out.size()) throw std::runtime_error("short read of " + path.string());
    return out;
}

// A file made by hand: a header with `stanzas` (their MAC under `file_key`),
// a nonce and the chunks given (each its plaintext and its last flag), sealed
// as STREAM seals them. Only the format's parts, none of its checks.
struct HandChunk {
    Bytes plain;
    bool last;
};
inline Bytes hand_made(const std::vector<Stanza>& stanzas, const FileKey& file_key, const std::vector<HandChunk>& chunks) {
    Bytes out = encode_header(stanzas, file_key);
    Bytes nonce = random_plaintext(kPayloadNonceSize, 7);
    out.insert(out.end(), nonce.begin(), nonce.end());
    Key32 key;
    hkdf_sha256(file_key.span(), nonce, "payload", key.span());
    for (size_t i = 0; i < chunks.size(); ++i) {
        std::array<uint8_t, kAeadNonceSize> n{};
        n[10] = static_cast<uint8_t>(i);
        n[9] = static_cast<uint8_t>(i >> 8);
        n[11] = chunks[i].last ? 1 : 0;
        Bytes sealed(chunks[i].plain.size() + kTagSize);
        aead_seal(key.span(), n, chunks[i].plain, sealed);
        out.insert(out.end(), sealed.begin(), sealed.end());
    }
    return out;
}

}  // namespace xendump::age::test
