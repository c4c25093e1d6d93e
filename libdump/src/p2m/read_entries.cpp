// Reads the p2m pages of a PV guest and turns their entries into the list of
// present pages: ~0 entries are holes, implausible values and frames the
// domain does not own become holes with a warning, and a frame claimed twice
// keeps its lowest pfn (xg_core.c skips INVALID_PFN and gmfn > max_mfn; the
// rest is ours, because the guest writes these pages).
#include <algorithm>
#include <unordered_map>

#include "p2m/p2m_walk.hpp"
#include "xendump/error.hpp"

namespace xendump::p2m_detail {

std::string counted(const AnomalyCount& a, const std::string& what, const std::string& consequence) {
    return std::to_string(a.count) + " " + what + " (first: " + a.first + "); " + consequence;
}

namespace {

// p2m pages per mapping call: 512 pages hold 256Ki (64-bit) or 512Ki
// (32-bit) entries.
constexpr size_t kP2mPagesPerChunk = 512;

}  // namespace

void read_p2m_entries(Walk& walk, std::span<const uint64_t> frames, const P2mOptions& options,
                      P2mMap& map) {
    const uint64_t fpp = walk.entries_per_page();
    AnomalyCount unmappable, implausible, not_owned, duplicate;
    std::unordered_map<uint64_t, uint64_t> owner;  // mfn -> pfn, verified frames only

    // The leaf pages must not double as structure pages (a loop).
    {
        std::unordered_map<uint64_t, bool> seen;
        for (uint64_t mfn : frames) {
            if (mfn == kNoFrame || !seen.emplace(mfn, true).second) continue;
            walk.claim(mfn, "p2m page");
            map.p2m_frames.push_back(mfn);
        }
    }

    for (size_t chunk = 0; chunk < frames.size(); chunk += kP2mPagesPerChunk) {
        const size_t chunk_end = std::min(frames.size(), chunk + kP2mPagesPerChunk);
        std::vector<uint64_t> distinct;
        std::unordered_map<uint64_t, size_t> slot;
        for (size_t j = chunk; j < chunk_end; ++j)
            if (frames[j] != kNoFrame && slot.emplace(frames[j], distinct.size()).second)
                distinct.push_back(frames[j]);
        if (distinct.empty()) continue;
        auto mapping = walk.hv.map_foreign(walk.domid, distinct);

        // Candidates of this chunk in ascending pfn order, each mfn once.
        std::vector<PageEntry> candidates;
        std::unordered_map<uint64_t, uint64_t> chunk_owner;
        for (size_t j = chunk; j < chunk_end; ++j) {
            if (frames[j] == kNoFrame) continue;
            const size_t s = slot.at(frames[j]);
            if (mapping->error(s) != 0) {
                unmappable.add([&] {
                    return "p2m page " + std::to_string(j) + " at mfn " + hex(frames[j]) + ", pfns " +
                           hex(j * fpp) + "…";
                });
                continue;
            }
            const std::byte* page = mapping->page(s);
            for (uint64_t k = 0; k < fpp; ++k) {
                const uint64_t pfn = j * fpp + k;
                if (pfn >= walk.p2m_size) break;
                const uint64_t value = read_word(page, k, walk.width);
                if (walk.invalid_entry(value)) continue;
                if (!walk.plausible_mfn(value)) {
                    implausible.add([&] { return "pfn " + hex(pfn) + " = " + hex(value); });
                    continue;
                }
                const uint64_t* earlier = nullptr;
                if (auto it = owner.find(value); it != owner.end())
                    earlier = &it->second;
                else if (auto in_chunk = chunk_owner.find(value); in_chunk != chunk_owner.end())
                    earlier = &in_chunk->second;
                if (earlier) {
                    duplicate.add([&] {
                        return "pfn " + hex(pfn) + " -> mfn " + hex(value) + ", already pfn " + hex(*earlier);
                    });
                    continue;
                }
                chunk_owner.emplace(value, pfn);
                candidates.push_back({pfn, value});
            }
        }
        mapping.reset();

        if (!options.verify_frames) {
            for (const PageEntry& e : candidates) owner.emplace(e.gmfn, e.pfn);
            map.pages.insert(map.pages.end(), candidates.begin(), candidates.end());
            continue;
        }
        std::vector<uint64_t> mfns(candidates.size());
        std::transform(candidates.begin(), candidates.end(), mfns.begin(), [](const PageEntry& e) { return e.gmfn; });
        map_batches(walk.hv, walk.domid, mfns, kMapBatch, [&](size_t first, const ForeignMapping& m) {
            for (size_t i = 0; i < m.count(); ++i) {
                const PageEntry& e = candidates[first + i];
                if (m.error(i) != 0) {
                    not_owned.add([&] { return "pfn " + hex(e.pfn) + " -> mfn " + hex(e.gmfn); });
                    continue;
                }
                owner.emplace(e.gmfn, e.pfn);
                map.pages.push_back(e);
            }
        });
    }

    if (unmappable.count)
        map.warnings.push_back(counted(unmappable, "p2m pages could not be mapped",
                                       "their pfns are treated as holes"));
    if (implausible.count)
        map.warnings.push_back(counted(implausible, "p2m entries hold values that are not machine frames",
                                       "treated as holes"));
    if (not_owned.count)
        map.warnings.push_back(counted(not_owned, "pfns name frames the domain does not own",
                                       "treated as holes"));
    if (duplicate.count)
        map.warnings.push_back(counted(duplicate, "pfns name a frame a lower pfn already names",
                                       "dropped"));
}

}  // namespace xendump::p2m_detail
