// XXH3-128 over a stream of bytes, cut into digests in their stored
// (canonical) form: the writer's page chunks, the read-back behind it and
// the verifier's recomputation all hash this way.
#pragma once

#include <xxhash.h>

#include <cstddef>
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
    XXH128_canonical_t finish_and_reset() {
        XXH128_canonical_t c;
        XXH128_canonicalFromHash(&c, XXH3_128bits_digest(state_.get()));
        XXH3_128bits_reset(state_.get());
        return c;
    }

private:
    std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> state_;
};

}  // namespace xendump
