// The cryptographic primitives of age v1 (C2SP age, "Primitives"), all from
// OpenSSL 3's libcrypto: X25519, HKDF-SHA-256, ChaCha20-Poly1305,
// HMAC-SHA-256, SHA-256/512 and the system's random bytes. Nothing here is
// home-made: these are thin wrappers that turn OpenSSL's failures into Error.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace xendump::age {

using Bytes = std::vector<uint8_t>;

// Zeroes `n` bytes at `p` in a way the compiler does not remove (OPENSSL_cleanse).
void wipe(void* p, size_t n) noexcept;

// A secret of N bytes, wiped when it goes away (copies too).
template <size_t N>
class Secret {
public:
    Secret() = default;
    Secret(const Secret& o) : b_(o.b_) {}
    Secret& operator=(const Secret& o) {
        b_ = o.b_;
        return *this;
    }
    ~Secret() { wipe(b_.data(), N); }
    uint8_t* data() noexcept { return b_.data(); }
    const uint8_t* data() const noexcept { return b_.data(); }
    static constexpr size_t size() noexcept { return N; }
    std::span<uint8_t, N> span() noexcept { return b_; }
    std::span<const uint8_t, N> span() const noexcept { return b_; }

private:
    std::array<uint8_t, N> b_{};
};

// A byte vector of secrets (a chunk's plaintext), wiped when it goes away.
class SecretBuffer {
public:
    explicit SecretBuffer(size_t n = 0) : b_(n) {}
    SecretBuffer(SecretBuffer&& o) noexcept = default;
    SecretBuffer& operator=(SecretBuffer&& o) noexcept {
        clear();
        b_ = std::move(o.b_);
        return *this;
    }
    SecretBuffer(const SecretBuffer&) = delete;
    SecretBuffer& operator=(const SecretBuffer&) = delete;
    ~SecretBuffer() { clear(); }
    void clear() noexcept {
        wipe(b_.data(), b_.size());
        b_.clear();
    }
    Bytes& bytes() noexcept { return b_; }
    const Bytes& bytes() const noexcept { return b_; }

private:
    Bytes b_;
};

inline constexpr size_t kKeySize = 32;  // X25519 scalars and points, ChaCha20 keys
using Key32 = Secret<kKeySize>;
using Point = std::array<uint8_t, kKeySize>;

// `n` random bytes from OpenSSL's CSPRNG (RAND_bytes).
void random_bytes(std::span<uint8_t> out);

// X25519(scalar, point) (RFC 7748). Throws Error when the result is the
// all-zero value (a low-order point: age rejects it).
Key32 x25519(std::span<const uint8_t, kKeySize> scalar, std::span<const uint8_t, kKeySize> point);
// X25519(scalar, basepoint): the public key of a secret scalar.
Point x25519_base(std::span<const uint8_t, kKeySize> scalar);

// HKDF-SHA-256 (RFC 5869) of `ikm` with `salt` (empty: none) and `info`, `out.size()` bytes.
void hkdf_sha256(std::span<const uint8_t> ikm, std::span<const uint8_t> salt, std::string_view info,
                 std::span<uint8_t> out);

// HMAC-SHA-256 of `data` under `key`.
std::array<uint8_t, 32> hmac_sha256(std::span<const uint8_t> key, std::span<const uint8_t> data);
std::array<uint8_t, 32> sha256(std::span<const uint8_t> data);
std::array<uint8_t, 64> sha512(std::span<const uint8_t> data);
// Constant-time equality of two byte strings of the same size.
bool equal_ct(std::span<const uint8_t> a, std::span<const uint8_t> b);

// ChaCha20-Poly1305 (RFC 8439) without additional data: `out` gets the
// ciphertext then the 16-byte tag (plain.size() + 16 bytes).
inline constexpr size_t kTagSize = 16;
inline constexpr size_t kAeadNonceSize = 12;
void aead_seal(std::span<const uint8_t, kKeySize> key, std::span<const uint8_t, kAeadNonceSize> nonce,
               std::span<const uint8_t> plain, std::span<uint8_t> out);
// The same, the plaintext given in pieces that follow each other (a chunk
// gathered from the pages where they lie, not copied together first).
void aead_seal(std::span<const uint8_t, kKeySize> key, std::span<const uint8_t, kAeadNonceSize> nonce,
               std::span<const std::span<const uint8_t>> plain, std::span<uint8_t> out);
// The reverse: false (and `out` wiped) when the tag does not authenticate.
// `out` has sealed.size() - 16 bytes.
[[nodiscard]] bool aead_open(std::span<const uint8_t, kKeySize> key,
                             std::span<const uint8_t, kAeadNonceSize> nonce, std::span<const uint8_t> sealed,
                             std::span<uint8_t> out);

// The public key of an Ed25519 private key's 32-byte seed (RFC 8032).
Point ed25519_public(std::span<const uint8_t, kKeySize> seed);
// The Montgomery u-coordinate of an Ed25519 public key: u = (1 + y) / (1 - y)
// mod 2^255 - 19 (RFC 7748 section 4.1), computed with OpenSSL's BIGNUM.
// Throws Error for an encoding that is not a valid y (y >= p, or y = 1).
Point ed25519_to_x25519(std::span<const uint8_t, kKeySize> ed25519_public);

}  // namespace xendump::age
