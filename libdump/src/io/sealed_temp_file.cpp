#include "io/sealed_temp_file.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "util/util.hpp"
#include "xendump/error.hpp"

namespace xendump::io {

namespace {
constexpr size_t kNonce = age::kAeadNonceSize;
constexpr size_t kBlock = SealedTempFile::kBlock;
constexpr size_t kSealedBlock = SealedTempFile::kSealedBlock;
}  // namespace

SealedTempFile::SealedTempFile(const std::string& what, const std::string& dir)
    : file_(unnamed_temp_file(what, dir)), what_(what), sealed_(kSealedBlock) {
    age::random_bytes(key_.span());
}

SealedTempFile::~SealedTempFile() = default;

void SealedTempFile::load(uint64_t block) const {
    uint8_t* plain = plain_.bytes().data();
    const uint64_t at = block * kSealedBlock;
    const long got = util::pread_full(file_.fd.get(), sealed_.data(), kSealedBlock, at);
    if (got < 0) throw_errno("cannot read back " + what_ + " from a temporary file", file_.dir, at);
    // Past the end, or a hole: never written.
    if (static_cast<size_t>(got) < kSealedBlock) std::fill(sealed_.begin() + got, sealed_.end(), 0);
    if (std::all_of(sealed_.begin(), sealed_.end(), [](uint8_t b) { return b == 0; })) {
        std::memset(plain + 8, 0, kBlock);
        return;
    }
    const auto nonce = std::span<const uint8_t, kNonce>(sealed_.data(), kNonce);
    const bool opened =
        age::aead_open(key_.span(), nonce, std::span(sealed_).subspan(kNonce), std::span(plain, 8 + kBlock));
    uint64_t number = ~block;
    if (opened) std::memcpy(&number, plain, 8);
    if (number != block)
        throw Error("cannot read back " + what_ + " from a temporary file: block " + std::to_string(block) +
                        " was altered on disk",
                    file_.dir, at);
}

void SealedTempFile::store(uint64_t block) {
    uint8_t* plain = plain_.bytes().data();
    std::memcpy(plain, &block, 8);
    age::random_bytes(std::span(sealed_).first(kNonce));
    const auto nonce = std::span<const uint8_t, kNonce>(sealed_.data(), kNonce);
    age::aead_seal(key_.span(), nonce, std::span(plain, 8 + kBlock), std::span(sealed_).subspan(kNonce));
    const uint64_t at = block * kSealedBlock;
    const size_t done = util::pwrite_full(file_.fd.get(), sealed_.data(), kSealedBlock, at);
    if (done < kSealedBlock) throw_errno("cannot write " + what_ + " to a temporary file", file_.dir, at + done);
}

void SealedTempFile::store_run(uint64_t first, uint64_t n, const uint8_t* bytes) {
    age::Bytes run(n * kSealedBlock);
    std::array<uint8_t, kRunBlocks * kNonce> nonces{};
    age::random_bytes(std::span(nonces).first(n * kNonce));
    for (uint64_t i = 0; i < n; ++i) {
        const uint64_t number = first + i;
        uint8_t* sealed = run.data() + i * kSealedBlock;
        std::memcpy(sealed, nonces.data() + i * kNonce, kNonce);
        const std::array<std::span<const uint8_t>, 2> plain{
            std::span(reinterpret_cast<const uint8_t*>(&number), 8), std::span(bytes + i * kBlock, kBlock)};
        age::aead_seal(key_.span(), std::span<const uint8_t, kNonce>(sealed, kNonce), plain,
                       std::span(sealed + kNonce, kSealedBlock - kNonce));
    }
    const uint64_t at = first * kSealedBlock;
    const size_t done = util::pwrite_full(file_.fd.get(), run.data(), run.size(), at);
    if (done < run.size()) throw_errno("cannot write " + what_ + " to a temporary file", file_.dir, at + done);
}

void SealedTempFile::write(uint64_t offset, const void* data, size_t size) {
    std::lock_guard lock(mutex_);
    const auto* src = static_cast<const uint8_t*>(data);
    uint8_t* plain = plain_.bytes().data() + 8;
    for (uint64_t at = offset; at < offset + size;) {
        const uint64_t block = at / kBlock, in = at % kBlock;
        const size_t len = static_cast<size_t>(std::min<uint64_t>(kBlock - in, offset + size - at));
        if (len == kBlock) {
            const uint64_t n = std::min<uint64_t>((offset + size - at) / kBlock, kRunBlocks);
            store_run(block, n, src + (at - offset));
            at += n * kBlock;
            continue;
        }
        load(block);  // a block written in part keeps its other bytes
        std::memcpy(plain + in, src + (at - offset), len);
        store(block);
        at += len;
    }
    size_ = std::max(size_, offset + size);
}

void SealedTempFile::read(uint64_t offset, void* out, size_t size) const {
    std::lock_guard lock(mutex_);
    auto* dst = static_cast<uint8_t*>(out);
    const uint8_t* plain = plain_.bytes().data() + 8;
    for (uint64_t at = offset; at < offset + size;) {
        const uint64_t block = at / kBlock, in = at % kBlock;
        const size_t len = static_cast<size_t>(std::min<uint64_t>(kBlock - in, offset + size - at));
        load(block);
        std::memcpy(dst + (at - offset), plain + in, len);
        at += len;
    }
}

}  // namespace xendump::io
