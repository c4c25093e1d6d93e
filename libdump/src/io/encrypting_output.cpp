#include "io/encrypting_output.hpp"

#include <algorithm>
#include <cstring>

#include "xendump/error.hpp"

namespace xendump::io {

namespace {
constexpr uint64_t kChunk = age::kChunkSize;

const uint8_t* zero_chunk() {
    static const std::vector<uint8_t> zeros(kChunk);
    return zeros.data();
}
}  // namespace

EncryptingOutput::EncryptingOutput(std::span<const age::Recipient> recipients, Emit emit, std::string name)
    : enc_(recipients), emit_(std::move(emit)), name_(std::move(name)), sealed_buf_(age::kSealedChunkSize) {}

EncryptingOutput::~EncryptingOutput() = default;

void EncryptingOutput::begin() { emit_(0, enc_.head()); }

uint64_t EncryptingOutput::file_offset(uint64_t plain) const noexcept {
    return enc_.chunk_offset(plain / kChunk) + plain % kChunk;
}

EncryptingOutput::Pending& EncryptingOutput::pending(uint64_t index, uint64_t at) {
    if (sealed(index))
        throw Error("internal error: writing into chunk " + std::to_string(index) +
                        " of the encrypted file, sealed already (a chunk is sealed once: its nonce is used once)",
                    name_, at);
    auto [it, added] = pending_.try_emplace(index);
    if (added) peak_ = std::max(peak_, pending_.size());
    return it->second;
}

bool EncryptingOutput::held(uint64_t index) const {
    const uint64_t b = index * kChunk, e = b + kChunk;
    return std::any_of(holds_.begin(), holds_.end(), [&](const auto& h) { return h.first < e && b < h.second; });
}

void EncryptingOutput::seal(uint64_t index, std::span<const uint8_t> plain, bool last) {
    if (index >= sealed_.size()) sealed_.resize(std::max<uint64_t>(index + 1, sealed_.size() * 2));
    sealed_[index] = true;
    const std::span<uint8_t> out(sealed_buf_.data(), plain.size() + age::kTagSize);
    enc_.seal(index, plain, last, out);
    emit_(enc_.chunk_offset(index), out);
}

// A chunk is sealed (not as the last) once its 64 KiB are final, no hold
// covers it and something lies past it.
void EncryptingOutput::try_seal(uint64_t index) {
    auto it = pending_.find(index);
    if (it == pending_.end() || it->second.final_bytes != kChunk) return;
    if (extent_ <= (index + 1) * kChunk || held(index)) return;
    seal(index, it->second.plain.bytes(), false);
    pending_.erase(it);
}

void EncryptingOutput::grow_extent(uint64_t end) {
    if (end <= extent_) return;
    const uint64_t before = extent_;
    extent_ = end;
    // The chunk that ended the file so far is not the last any more.
    if (before > 0) try_seal((before - 1) / kChunk);
}

void EncryptingOutput::put(uint64_t offset, const std::byte* data, uint64_t n) {
    if (finished_) throw Error("internal error: writing after the end of the encrypted file", name_, offset);
    if (n == 0) return;
    grow_extent(offset + n);
    const auto* src = reinterpret_cast<const uint8_t*>(data);
    uint64_t at = offset;
    while (at < offset + n) {
        const uint64_t index = at / kChunk, in = at % kChunk;
        const uint64_t len = std::min(kChunk - in, offset + n - at);
        const uint8_t* from = src ? src + (at - offset) : nullptr;
        if (len == kChunk && !pending_.count(index) && extent_ > (index + 1) * kChunk && !held(index)) {
            // A whole chunk at once: sealed from the caller's bytes.
            if (sealed(index)) pending(index, at);  // throws
            seal(index, std::span(from ? from : zero_chunk(), kChunk), false);
        } else {
            Pending& p = pending(index, at);
            uint8_t* to = p.plain.bytes().data() + in;
            if (from)
                std::memcpy(to, from, len);
            else
                std::memset(to, 0, len);
            p.final_bytes += len;
            try_seal(index);
        }
        at += len;
    }
}

void EncryptingOutput::reserve(uint64_t offset, uint64_t n) {
    if (finished_) throw Error("internal error: writing after the end of the encrypted file", name_, offset);
    if (n == 0) return;
    auto next = reserved_.lower_bound(offset);
    if (next != reserved_.begin() && std::prev(next)->second == offset) {
        std::prev(next)->second = offset + n;  // extends the one before
    } else {
        reserved_.emplace(offset, offset + n);
    }
    grow_extent(offset + n);
}

void EncryptingOutput::hold(uint64_t offset, uint64_t n) {
    if (n > 0) holds_.emplace_back(offset, offset + n);
}

// [b, e) lies in the held ranges (else an internal Error).
void EncryptingOutput::check_held(uint64_t b, uint64_t e) const {
    while (b < e) {
        const auto h = std::find_if(holds_.begin(), holds_.end(), [&](const auto& r) { return r.first <= b && b < r.second; });
        if (h == holds_.end())
            throw Error("internal error: rewriting bytes of the encrypted file that were neither reserved nor held", name_,
                        b);
        b = std::min(h->second, e);
    }
}

void EncryptingOutput::rewrite(uint64_t offset, std::span<const std::byte> data) {
    if (data.empty()) return;
    const uint64_t end = offset + data.size();
    const auto* src = reinterpret_cast<const uint8_t*>(data.data());
    for (uint64_t index = offset / kChunk; index <= (end - 1) / kChunk; ++index)
        if (sealed(index)) pending(index, std::max(offset, index * kChunk));  // throws: sealed already
    // Every byte rewritten is reserved (not filled yet) or held: collect the
    // reserved pieces taken (they become final), then check the rest is held.
    std::vector<std::pair<uint64_t, uint64_t>> taken;
    auto it = reserved_.upper_bound(offset);
    if (it != reserved_.begin()) --it;
    while (it != reserved_.end() && it->first < end) {
        const uint64_t b = std::max(it->first, offset), e = std::min(it->second, end);
        if (b >= e) {
            ++it;
            continue;
        }
        taken.emplace_back(b, e);
        const uint64_t rb = it->first, re = it->second;
        it = reserved_.erase(it);
        if (rb < b) reserved_.emplace(rb, b);
        if (e < re) it = reserved_.emplace(e, re).first;
    }
    uint64_t at = offset;
    for (const auto& [b, e] : taken) {
        check_held(at, b);
        at = e;
    }
    check_held(at, end);
    // Copy, chunk by chunk; the reserved pieces count as final now.
    for (uint64_t a = offset; a < end;) {
        const uint64_t index = a / kChunk, in = a % kChunk;
        const uint64_t len = std::min(kChunk - in, end - a);
        Pending& p = pending(index, a);
        std::memcpy(p.plain.bytes().data() + in, src + (a - offset), len);
        a += len;
    }
    for (const auto& [b, e] : taken)
        for (uint64_t a = b; a < e;) {
            const uint64_t index = a / kChunk;
            const uint64_t len = std::min((index + 1) * kChunk, e) - a;
            pending_.at(index).final_bytes += len;
            a += len;
        }
    for (uint64_t index = offset / kChunk; index <= (end - 1) / kChunk; ++index) try_seal(index);
}

void EncryptingOutput::finish(uint64_t size) {
    if (finished_) return;
    if (extent_ > size) throw Error("internal error: bytes written past the end of the encrypted file", name_, size);
    finished_ = true;
    holds_.clear();
    const uint64_t last = size == 0 ? 0 : (size - 1) / kChunk;
    for (uint64_t index = 0; index <= last; ++index) {
        if (sealed(index)) continue;
        const uint64_t len = index == last ? size - index * kChunk : kChunk;
        auto it = pending_.find(index);
        const uint8_t* plain = it == pending_.end() ? zero_chunk() : it->second.plain.bytes().data();
        seal(index, std::span(plain, len), index == last);
        if (it != pending_.end()) pending_.erase(it);
    }
    pending_.clear();
    reserved_.clear();
}

}  // namespace xendump::io
