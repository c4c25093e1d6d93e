// OpenSSL 3 libcrypto behind the primitives age v1 names (see crypto.hpp).
#include "age/crypto.hpp"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include <memory>
#include <string>

#include "xendump/error.hpp"

namespace xendump::age {
namespace {

// OpenSSL's reason for the last failure, then its queue cleared.
std::string openssl_reason() {
    unsigned long e = ERR_peek_last_error();
    std::string s = e ? ERR_reason_error_string(e) ? ERR_reason_error_string(e) : "unknown reason" : "no reason given";
    ERR_clear_error();
    return s;
}

[[noreturn]] void fail(const std::string& what) { throw Error("OpenSSL: " + what + ": " + openssl_reason()); }

// unique_ptr deleters that call OpenSSL's free functions.
template <auto F>
struct Free {
    template <class T>
    void operator()(T* p) const noexcept {
        F(p);
    }
};
using Pkey = std::unique_ptr<EVP_PKEY, Free<EVP_PKEY_free>>;
using Bn = std::unique_ptr<BIGNUM, Free<BN_clear_free>>;

Pkey raw_private(int type, std::span<const uint8_t, kKeySize> key) {
    Pkey p(EVP_PKEY_new_raw_private_key(type, nullptr, key.data(), key.size()));
    if (!p) fail("cannot load a private key");
    return p;
}

Point raw_public_of(EVP_PKEY* p) {
    Point out{};
    size_t n = out.size();
    if (EVP_PKEY_get_raw_public_key(p, out.data(), &n) != 1 || n != out.size()) fail("cannot get a public key");
    return out;
}

// ChaCha20-Poly1305, fetched once (an implicit fetch on every chunk costs a lookup).
const EVP_CIPHER* chacha20_poly1305() {
    static EVP_CIPHER* cipher = EVP_CIPHER_fetch(nullptr, "ChaCha20-Poly1305", nullptr);
    if (!cipher) fail("no ChaCha20-Poly1305");
    return cipher;
}

std::unique_ptr<EVP_CIPHER_CTX, Free<EVP_CIPHER_CTX_free>> cipher_ctx(std::span<const uint8_t, kKeySize> key,
                                                          std::span<const uint8_t, kAeadNonceSize> nonce,
                                                          int encrypt) {
    std::unique_ptr<EVP_CIPHER_CTX, Free<EVP_CIPHER_CTX_free>> ctx(EVP_CIPHER_CTX_new());
    if (!ctx || EVP_CipherInit_ex2(ctx.get(), chacha20_poly1305(), key.data(), nonce.data(), encrypt, nullptr) != 1)
        fail("cannot set up ChaCha20-Poly1305");
    return ctx;
}

Bn bn_from_le(std::span<const uint8_t> le) {
    Bn b(BN_lebin2bn(le.data(), static_cast<int>(le.size()), nullptr));
    if (!b) fail("BN_lebin2bn");
    return b;
}

Bn bn_new() {
    Bn b(BN_new());
    if (!b) fail("BN_new");
    return b;
}

// OpenSSL's ChaCha20-Poly1305 on a CPU with AVX-512 returns with the upper
// halves of the vector registers dirty; SSE code run after it on the same
// thread (libxxhash's XXH3, built for SSE2: the v1 digests, hashed between
// the chunks sealed) then pays on every instruction (measured: XXH3 four
// times slower). VZEROUPPER clears them, where the CPU has AVX.
void clear_upper_vectors() noexcept {
#if defined(__x86_64__) && defined(__GNUC__)
    static const bool avx = __builtin_cpu_supports("avx");
    if (avx) asm volatile("vzeroupper" ::: "memory");
#endif
}

}  // namespace

void wipe(void* p, size_t n) noexcept {
    if (n) OPENSSL_cleanse(p, n);
}

void random_bytes(std::span<uint8_t> out) {
    if (RAND_bytes(out.data(), static_cast<int>(out.size())) != 1) fail("no random bytes");
}

Key32 x25519(std::span<const uint8_t, kKeySize> scalar, std::span<const uint8_t, kKeySize> point) {
    Pkey mine = raw_private(EVP_PKEY_X25519, scalar);
    Pkey peer(EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, point.data(), point.size()));
    if (!peer) fail("cannot load an X25519 point");
    std::unique_ptr<EVP_PKEY_CTX, Free<EVP_PKEY_CTX_free>> ctx(EVP_PKEY_CTX_new_from_pkey(nullptr, mine.get(), nullptr));
    if (!ctx || EVP_PKEY_derive_init(ctx.get()) != 1 || EVP_PKEY_derive_set_peer(ctx.get(), peer.get()) != 1)
        fail("cannot set up X25519");
    Key32 out;
    size_t n = out.size();
    // OpenSSL refuses to return the all-zero shared secret of a low-order
    // point (RFC 7748 section 6.1), which age requires rejecting too.
    if (EVP_PKEY_derive(ctx.get(), out.data(), &n) != 1 || n != out.size()) {
        ERR_clear_error();
        throw Error("the X25519 shared secret is all zeros (a low-order point)");
    }
    return out;
}

Point x25519_base(std::span<const uint8_t, kKeySize> scalar) {
    return raw_public_of(raw_private(EVP_PKEY_X25519, scalar).get());
}

void hkdf_sha256(std::span<const uint8_t> ikm, std::span<const uint8_t> salt, std::string_view info,
                 std::span<uint8_t> out) {
    static EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
    if (!kdf) fail("no HKDF");
    std::unique_ptr<EVP_KDF_CTX, Free<EVP_KDF_CTX_free>> ctx(EVP_KDF_CTX_new(kdf));
    if (!ctx) fail("cannot set up HKDF");
    // An empty input key (the ssh-ed25519 tweak's) is still a key to OpenSSL:
    // a 0-byte octet string, which it accepts. An empty salt is left out:
    // RFC 5869 section 2.2 then uses HashLen zeros, the same HMAC key.
    static const uint8_t nothing = 0;
    OSSL_PARAM params[5];
    size_t i = 0;
    params[i++] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, const_cast<char*>("SHA256"), 0);
    params[i++] = OSSL_PARAM_construct_octet_string(
        OSSL_KDF_PARAM_KEY, const_cast<uint8_t*>(ikm.empty() ? &nothing : ikm.data()), ikm.size());
    if (!salt.empty())
        params[i++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<uint8_t*>(salt.data()),
                                                        salt.size());
    params[i++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<char*>(info.data()), info.size());
    params[i] = OSSL_PARAM_construct_end();
    if (EVP_KDF_derive(ctx.get(), out.data(), out.size(), params) != 1) fail("HKDF failed");
}

std::array<uint8_t, 32> hmac_sha256(std::span<const uint8_t> key, std::span<const uint8_t> data) {
    std::array<uint8_t, 32> out{};
    unsigned n = 0;
    if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data.data(), data.size(), out.data(), &n) ||
        n != out.size())
        fail("HMAC-SHA-256 failed");
    return out;
}

std::array<uint8_t, 32> sha256(std::span<const uint8_t> data) {
    std::array<uint8_t, 32> out{};
    if (EVP_Digest(data.data(), data.size(), out.data(), nullptr, EVP_sha256(), nullptr) != 1) fail("SHA-256 failed");
    return out;
}

std::array<uint8_t, 64> sha512(std::span<const uint8_t> data) {
    std::array<uint8_t, 64> out{};
    if (EVP_Digest(data.data(), data.size(), out.data(), nullptr, EVP_sha512(), nullptr) != 1) fail("SHA-512 failed");
    return out;
}

bool equal_ct(std::span<const uint8_t> a, std::span<const uint8_t> b) {
    return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

void aead_seal(std::span<const uint8_t, kKeySize> key, std::span<const uint8_t, kAeadNonceSize> nonce,
               std::span<const uint8_t> plain, std::span<uint8_t> out) {
    aead_seal(key, nonce, std::span(&plain, 1), out);
}

void aead_seal(std::span<const uint8_t, kKeySize> key, std::span<const uint8_t, kAeadNonceSize> nonce,
               std::span<const std::span<const uint8_t>> plain, std::span<uint8_t> out) {
    size_t size = 0;
    for (const auto& p : plain) size += p.size();
    if (out.size() != size + kTagSize) throw Error("aead_seal: output of the wrong size");
    auto ctx = cipher_ctx(key, nonce, 1);
    // OpenSSL's ChaCha20-Poly1305 takes its input in pieces of any size:
    // the stream cipher and the MAC carry their partial blocks over.
    size_t done = 0;  // the ciphertext's bytes out so far
    for (const auto& p : plain) {
        int n = 0;
        if (!p.empty() && EVP_CipherUpdate(ctx.get(), out.data() + done, &n, p.data(), static_cast<int>(p.size())) != 1)
            fail("ChaCha20-Poly1305 encryption failed");
        done += static_cast<size_t>(n);
    }
    int m = 0;
    if (done > size || EVP_CipherFinal_ex(ctx.get(), out.data() + done, &m) != 1 || done + static_cast<size_t>(m) != size ||
        EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_GET_TAG, kTagSize, out.data() + size) != 1)
        fail("ChaCha20-Poly1305 encryption failed");
    ctx.reset();
    clear_upper_vectors();
}

bool aead_open(std::span<const uint8_t, kKeySize> key, std::span<const uint8_t, kAeadNonceSize> nonce,
               std::span<const uint8_t> sealed, std::span<uint8_t> out) {
    if (sealed.size() < kTagSize || out.size() != sealed.size() - kTagSize)
        throw Error("aead_open: output of the wrong size");
    auto ctx = cipher_ctx(key, nonce, 0);
    const size_t len = sealed.size() - kTagSize;
    int n = 0, m = 0;
    if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_SET_TAG, kTagSize,
                            const_cast<uint8_t*>(sealed.data() + len)) != 1 ||
        EVP_CipherUpdate(ctx.get(), out.data(), &n, sealed.data(), static_cast<int>(len)) != 1)
        fail("ChaCha20-Poly1305 decryption failed");
    if (EVP_CipherFinal_ex(ctx.get(), out.data() + n, &m) != 1) {
        ERR_clear_error();
        wipe(out.data(), out.size());
        return false;
    }
    ctx.reset();
    clear_upper_vectors();  // the chunk is hashed next (verify -i)
    return true;
}

Point ed25519_public(std::span<const uint8_t, kKeySize> seed) {
    return raw_public_of(raw_private(EVP_PKEY_ED25519, seed).get());
}

Point ed25519_to_x25519(std::span<const uint8_t, kKeySize> ed) {
    // RFC 8032 section 5.1.3: y is the little-endian number with the top bit
    // (the sign of x) cleared; it must be below p and on the curve, that is
    // (y^2 - 1) / (d y^2 + 1) must be a square mod p.
    std::array<uint8_t, kKeySize> y_le{};
    std::copy(ed.begin(), ed.end(), y_le.begin());
    y_le[31] &= 0x7f;
    std::unique_ptr<BN_CTX, Free<BN_CTX_free>> ctx(BN_CTX_new());
    if (!ctx) fail("BN_CTX_new");
    Bn p = bn_new(), one = bn_new(), y = bn_from_le(y_le), num = bn_new(), den = bn_new(), inv = bn_new(),
       u = bn_new(), d = bn_new(), t = bn_new(), y2 = bn_new();
    // p = 2^255 - 19; d = -121665 / 121666 mod p.
    if (!BN_set_bit(p.get(), 255) || !BN_sub_word(p.get(), 19) || !BN_one(one.get()))
        fail("BIGNUM arithmetic");
    if (BN_cmp(y.get(), p.get()) >= 0) throw Error("the Ed25519 public key is not canonical (y >= p)");
    if (!BN_set_word(t.get(), 121666) || !BN_mod_inverse(t.get(), t.get(), p.get(), ctx.get()) ||
        !BN_set_word(d.get(), 121665) || !BN_mod_mul(d.get(), d.get(), t.get(), p.get(), ctx.get()) ||
        !BN_mod_sub(d.get(), p.get(), d.get(), p.get(), ctx.get()))
        fail("BIGNUM arithmetic");
    if (!BN_mod_sqr(y2.get(), y.get(), p.get(), ctx.get()) ||
        !BN_mod_sub(num.get(), y2.get(), one.get(), p.get(), ctx.get()) ||
        !BN_mod_mul(den.get(), d.get(), y2.get(), p.get(), ctx.get()) ||
        !BN_mod_add(den.get(), den.get(), one.get(), p.get(), ctx.get()))
        fail("BIGNUM arithmetic");
    if (!BN_is_zero(num.get())) {
        if (!BN_mod_inverse(inv.get(), den.get(), p.get(), ctx.get()) ||
            !BN_mod_mul(t.get(), num.get(), inv.get(), p.get(), ctx.get()))
            fail("BIGNUM arithmetic");
        // Euler's criterion: t^((p-1)/2) = 1 for a non-zero square.
        Bn e = bn_new(), r = bn_new();
        if (!BN_sub(e.get(), p.get(), one.get()) || !BN_rshift1(e.get(), e.get()) ||
            !BN_mod_exp(r.get(), t.get(), e.get(), p.get(), ctx.get()))
            fail("BIGNUM arithmetic");
        if (!BN_is_one(r.get())) throw Error("the Ed25519 public key is not a point of the curve");
    }
    // u = (1 + y) / (1 - y); y = 1 is the neutral element, which has no u.
    if (!BN_mod_add(num.get(), one.get(), y.get(), p.get(), ctx.get()) ||
        !BN_mod_sub(den.get(), one.get(), y.get(), p.get(), ctx.get()))
        fail("BIGNUM arithmetic");
    if (BN_is_zero(den.get())) throw Error("the Ed25519 public key is the neutral point");
    if (!BN_mod_inverse(inv.get(), den.get(), p.get(), ctx.get()) ||
        !BN_mod_mul(u.get(), num.get(), inv.get(), p.get(), ctx.get()))
        fail("BIGNUM arithmetic");
    Point out{};
    if (BN_bn2lebinpad(u.get(), out.data(), static_cast<int>(out.size())) != static_cast<int>(out.size()))
        fail("BN_bn2lebinpad");
    return out;
}

}  // namespace xendump::age
