// What the format writer consumes: the present pages of a guest, in
// ascending pfn order, and a batch reader of their contents. The dumper (live
// guest through a hypervisor) and the converter (an old file) are both page
// sources; the writer knows neither.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "xendump/format.hpp"

namespace xendump {

using PageEntry = format::P2mEntry;  // {pfn, gmfn}

// True when every gmfn is above the one before (the usual guest, whose frames
// rise with its pfns): then no gmfn repeats and pfn order is gmfn order.
inline bool gmfns_ascending(std::span<const PageEntry> entries) {
    for (size_t i = 1; i < entries.size(); ++i)
        if (entries[i].gmfn <= entries[i - 1].gmfn) return false;
    return true;
}

class PageSource {
public:
    virtual ~PageSource() = default;

    // The present pages: strictly ascending pfn. For HVM/PVH gmfn == pfn.
    virtual std::span<const PageEntry> entries() const = 0;

    // Reads `count` pages starting at entry index `first` into `out`
    // (count * kPageSize bytes). A page that cannot be read gets
    // unreadable[i] = 1 and its bytes in `out` must be zeroed by the source.
    // Throws Error for failures that end the dump.
    virtual void read_pages(size_t first, size_t count, std::span<std::byte> out,
                            std::span<uint8_t> unreadable) = 0;

    // How many pages the source prefers per read_pages call.
    virtual size_t preferred_batch() const { return 1024; }
};

}  // namespace xendump
