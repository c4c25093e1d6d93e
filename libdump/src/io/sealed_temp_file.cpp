#include "io/sealed_temp_file.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "util/util.hpp"
#include "xendump/error.hpp"

namespace xendump::io {

namespace {
constexpr uint64_t kSealedBlock = SealedTempFile::kBlock + age::kTagSize;

std::array<uint8_t, age::kAeadNonceSize> block_nonce(uint64_t block, uint32_t count) {
    std::array<uint8_t, age::kAeadNonceSize> n{};
    for (int i = 0; i < 8; ++i) n[i] = static_cast<uint8_t>(block >> (8 * i));
    for (int i = 0; i < 4; ++i) n[8 + i] = static_cast<uint8_t>(count >> (8 * i));
    return n;
}
}  // namespace

SealedTempFile::SealedTempFile(const std::string& what)
    : file_(unnamed_temp_file(what)), what_(what), cipher_(kSealedBlock) {
    age::random_bytes(key_.span());
}

SealedTempFile::~SealedTempFile() = default;

void SealedTempFile::load(uint64_t block, uint8_t* plain) const {
    if (block >= sealed_.size() || sealed_[block] == 0) {
        std::memset(plain, 0, kBlock);
        return;
    }
    const uint64_t at = block * kSealedBlock;
    const long got = util::pread_full(file_.fd.get(), cipher_.data(), kSealedBlock, at);
    if (got < 0) throw_errno("cannot read back " + what_ + " from a temporary file", file_.dir, at);
    if (static_cast<uint64_t>(got) != kSealedBlock)
        throw Error("cannot read back " + what_ + " from a temporary file: it is shorter than written", file_.dir, at);
    if (!age::aead_open(key_.span(), block_nonce(block, sealed_[block]), cipher_, std::span(plain, kBlock)))
        throw Error("cannot read back " + what_ + " from a temporary file: block " + std::to_string(block) +
                        " was altered on disk",
                    file_.dir, at);
}

void SealedTempFile::store(uint64_t block, const uint8_t* plain) {
    if (block >= sealed_.size()) sealed_.resize(block + 1, 0);
    if (sealed_[block] == UINT32_MAX)
        throw Error("internal error: a block of a temporary file rewritten 2^32 times", file_.dir, block * kSealedBlock);
    const uint32_t count = sealed_[block] + 1;
    age::aead_seal(key_.span(), block_nonce(block, count), std::span(plain, kBlock), cipher_);
    const uint64_t at = block * kSealedBlock;
    const size_t done = util::pwrite_full(file_.fd.get(), cipher_.data(), kSealedBlock, at);
    if (done < kSealedBlock) throw_errno("cannot write " + what_ + " to a temporary file", file_.dir, at + done);
    sealed_[block] = count;
}

void SealedTempFile::write(uint64_t offset, const void* data, size_t size) {
    std::lock_guard lock(mutex_);
    const auto* src = static_cast<const uint8_t*>(data);
    uint8_t* plain = plain_.bytes().data();
    for (uint64_t at = offset; at < offset + size;) {
        const uint64_t block = at / kBlock, in = at % kBlock;
        const size_t len = static_cast<size_t>(std::min<uint64_t>(kBlock - in, offset + size - at));
        if (len != kBlock) load(block, plain);  // a block written in part keeps its other bytes
        std::memcpy(plain + in, src + (at - offset), len);
        store(block, plain);
        at += len;
    }
    size_ = std::max(size_, offset + size);
}

void SealedTempFile::read(uint64_t offset, void* out, size_t size) const {
    std::lock_guard lock(mutex_);
    auto* dst = static_cast<uint8_t*>(out);
    uint8_t* plain = plain_.bytes().data();
    for (uint64_t at = offset; at < offset + size;) {
        const uint64_t block = at / kBlock, in = at % kBlock;
        const size_t len = static_cast<size_t>(std::min<uint64_t>(kBlock - in, offset + size - at));
        load(block, plain);
        std::memcpy(dst + (at - offset), plain + in, len);
        at += len;
    }
}

}  // namespace xendump::io
