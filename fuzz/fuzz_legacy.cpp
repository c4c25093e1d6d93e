// libFuzzer target: the legacy xc_core parser and the layout decision (p2m
// tree search included) over arbitrary bytes held in memory. Errors are the
// expected outcome for most inputs; crashes, leaks and UB are the bugs.
#include <cstddef>
#include <cstdint>
#include <span>

#include "legacy/layout.hpp"
#include "legacy/xc_core.hpp"
#include "xendump/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace xendump::legacy;
    MemoryByteSource src(std::as_bytes(std::span(data, size)), "fuzz.core");
    try {
        XcCoreFile file = parse_xc_core(src);
        decide_layout(src, file, {.allow_inferred = (size & 1) != 0});
    } catch (const xendump::Error&) {
    }
    return 0;
}
