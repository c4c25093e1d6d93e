// XXH3-128 over a stream of bytes, cut into digests in their stored
// (canonical) form: the writer's page chunks, the read-back behind it and
// the verifier's recomputation all hash this way.
#pragma once

#include <xxhash.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "xendump/error.hpp"

namespace xendump {

class StreamHash {
public:
    StreamHash() : state_(XXH3_createState(), XXH3_freeState) {
        if (!state_) throw Error("out of memory for an XXH3 state");
        XXH3_128bits_reset(state_.get());
    }
    void update(const void* p, size_t n) { XXH3_128bits_update(state_.get(), p, n); }
    // The digest of the bytes so far; more may follow.
    XXH128_canonical_t digest() const {
        XXH128_canonical_t c;
        XXH128_canonicalFromHash(&c, XXH3_128bits_digest(state_.get()));
        return c;
    }
    XXH128_canonical_t finish_and_reset() {
        const XXH128_canonical_t c = digest();
        XXH3_128bits_reset(state_.get());
        return c;
    }

private:
    std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> state_;
};

// Chunk digests (canonical XXH3-128) folded, in order, into one XXH3-128
// of them all, and counted: what the read-back behind the writer keeps of
// the chunks it hashed, and what the check folds the stored digests into
// to compare (xendump/pages_read_back.hpp).
class DigestFold {
public:
    void add(const XXH128_canonical_t& d) {
        hash_.update(&d, sizeof d);
        ++count_;
    }
    uint64_t count() const noexcept { return count_; }
    XXH128_canonical_t digest() const { return hash_.digest(); }

private:
    StreamHash hash_;
    uint64_t count_ = 0;
};

// Bytes fed in order and cut into chunks of `chunk` bytes, a digest each.
class ChunkedHash {
public:
    explicit ChunkedHash(uint64_t chunk) : chunk_(chunk) {}
    // Calls on_chunk(digest) for every chunk these bytes complete.
    template <class OnChunk>
    void update(const std::byte* p, uint64_t n, OnChunk on_chunk) {
        while (n > 0) {
            const uint64_t take = std::min(n, chunk_ - in_chunk_);
            hash_.update(p, static_cast<size_t>(take));
            p += take;
            n -= take;
            in_chunk_ += take;
            if (in_chunk_ == chunk_) {
                on_chunk(hash_.finish_and_reset());
                in_chunk_ = 0;
            }
        }
    }
    uint64_t pending() const noexcept { return in_chunk_; }  // bytes of an unfinished chunk
    XXH128_canonical_t finish() {                            // the unfinished chunk's digest
        in_chunk_ = 0;
        return hash_.finish_and_reset();
    }

private:
    uint64_t chunk_;
    uint64_t in_chunk_ = 0;
    StreamHash hash_;
};

}  // namespace xendump
