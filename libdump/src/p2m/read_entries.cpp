// Reads the p2m pages of a PV guest and turns their entries into the list of
// present pages: ~0 entries are holes, implausible values and frames the
// domain does not own become holes with a warning, and a frame claimed twice
// keeps its lowest pfn (xg_core.c skips INVALID_PFN and gmfn > max_mfn; the
// rest is ours, because the guest writes these pages).
#include <algorithm>
#include <optional>
#include <unordered_map>

#include "p2m/p2m_walk.hpp"
#include "xendump/error.hpp"

namespace xendump::p2m_detail {

std::string counted(const AnomalyCount& a, const std::string& what, const std::string& consequence) {
    return std::to_string(a.count) + " " + what + " (first: " + a.first + "); " + consequence;
}

// Drops every entry whose gmfn a lower pfn already names. Sorting in place
// keeps the memory at the 16 bytes per page the list needs anyway (a hash set
// of frames would cost three times that); the usual guest, whose frames rise
// with its pfns, is recognised in one scan and not sorted at all.
void drop_duplicate_frames(std::vector<PageEntry>& pages, AnomalyCount& duplicate) {
    auto by_frame = [](const PageEntry& a, const PageEntry& b) {
        return a.gmfn != b.gmfn ? a.gmfn < b.gmfn : a.pfn < b.pfn;
    };
    if (gmfns_ascending(pages)) return;
    std::sort(pages.begin(), pages.end(), by_frame);
    // The duplicate with the lowest pfn and the pfn that keeps its frame, by
    // value: the compaction below overwrites the slots behind it.
    std::optional<PageEntry> first_dup;
    uint64_t first_dup_owner = 0;
    size_t kept = 0;
    for (size_t i = 0; i < pages.size(); ++i) {
        if (kept > 0 && pages[kept - 1].gmfn == pages[i].gmfn) {
            ++duplicate.count;
            if (!first_dup || pages[i].pfn < first_dup->pfn) {
                first_dup = pages[i];
                first_dup_owner = pages[kept - 1].pfn;
            }
            continue;
        }
        pages[kept++] = pages[i];
    }
    if (first_dup)
        duplicate.first = "pfn " + hex(first_dup->pfn) + " -> mfn " + hex(first_dup->gmfn) + ", already pfn " +
                          hex(first_dup_owner);
    pages.resize(kept);
    std::sort(pages.begin(), pages.end(), [](const PageEntry& a, const PageEntry& b) { return a.pfn < b.pfn; });
}

EntryReader::EntryReader(Walk& walk, std::span<const uint64_t> frames, const P2mOptions& options)
    : walk_(walk), frames_(frames), options_(options) {}

void EntryReader::claim_leaves(std::vector<uint64_t>& p2m_frames) {
    // The leaf pages must not double as structure pages (a loop).
    std::unordered_map<uint64_t, bool> seen;
    for (uint64_t mfn : frames_) {
        if (mfn == kNoFrame || !seen.emplace(mfn, true).second) continue;
        walk_.claim(mfn, "p2m page");
        p2m_frames.push_back(mfn);
    }
}

bool EntryReader::read_next(std::vector<PageEntry>& out) {
    const uint64_t fpp = walk_.entries_per_page();
    while (next_ < frames_.size()) {
        const size_t chunk = next_;
        const size_t chunk_end = std::min(frames_.size(), chunk + kP2mPagesPerChunk);
        next_ = chunk_end;
        std::vector<uint64_t> distinct;
        std::unordered_map<uint64_t, size_t> slot;
        for (size_t j = chunk; j < chunk_end; ++j)
            if (frames_[j] != kNoFrame && slot.emplace(frames_[j], distinct.size()).second)
                distinct.push_back(frames_[j]);
        if (distinct.empty()) continue;
        auto mapping = walk_.hv.map_foreign(walk_.domid, distinct);

        // Candidates of this chunk in ascending pfn order.
        const size_t chunk_first = out.size();
        for (size_t j = chunk; j < chunk_end; ++j) {
            if (frames_[j] == kNoFrame) continue;
            const size_t s = slot.at(frames_[j]);
            if (mapping->error(s) != 0) {
                unmappable_.add([&] {
                    return "p2m page " + std::to_string(j) + " at mfn " + hex(frames_[j]) + ", pfns " +
                           hex(j * fpp) + "…";
                });
                continue;
            }
            const std::byte* page = mapping->page(s);
            for (uint64_t k = 0; k < fpp; ++k) {
                const uint64_t pfn = j * fpp + k;
                if (pfn >= walk_.p2m_size) break;
                const uint64_t value = read_word(page, k, walk_.width);
                if (walk_.invalid_entry(value)) continue;
                if (!walk_.plausible_mfn(value)) {
                    implausible_.add([&] { return "pfn " + hex(pfn) + " = " + hex(value); });
                    continue;
                }
                if (kept_ == walk_.frames_owned) {
                    beyond_owned_.add([&] { return "pfn " + hex(pfn) + " = " + hex(value); });
                    continue;
                }
                ++kept_;
                out.push_back({pfn, value});
            }
        }
        mapping.reset();
        if (options_.verify_frames) {
            // Keep only the frames that map for this domain.
            std::vector<uint64_t> mfns(out.size() - chunk_first);
            std::transform(out.begin() + static_cast<ptrdiff_t>(chunk_first), out.end(), mfns.begin(),
                           [](const PageEntry& e) { return e.gmfn; });
            size_t kept = chunk_first;
            map_batches(walk_.hv, walk_.domid, mfns, kMapBatch, [&](size_t first, const ForeignMapping& m) {
                for (size_t i = 0; i < m.count(); ++i) {
                    const PageEntry e = out[chunk_first + first + i];
                    if (m.error(i) != 0) {
                        not_owned_.add([&] { return "pfn " + hex(e.pfn) + " -> mfn " + hex(e.gmfn); });
                        continue;
                    }
                    out[kept++] = e;
                }
            });
            out.resize(kept);
        }
        return true;
    }
    return false;
}

void EntryReader::add_warnings(std::vector<std::string>& warnings) const {
    if (unmappable_.count)
        warnings.push_back(counted(unmappable_, "p2m pages could not be mapped", "their pfns are treated as holes"));
    if (implausible_.count)
        warnings.push_back(counted(implausible_, "p2m entries hold values that are not machine frames",
                                   "treated as holes"));
    if (not_owned_.count)
        warnings.push_back(counted(not_owned_, "pfns name frames the domain does not own", "treated as holes"));
    if (beyond_owned_.count)
        warnings.push_back(counted(beyond_owned_,
                                   "p2m entries name frames beyond the " + std::to_string(walk_.frames_owned) +
                                       " the domain can own",
                                   "the p2m lies: treated as holes"));
}

std::string duplicate_warning(const AnomalyCount& duplicate) {
    return counted(duplicate, "pfns name a frame a lower pfn already names", "dropped");
}

void read_p2m_entries(Walk& walk, std::span<const uint64_t> frames, const P2mOptions& options,
                      P2mMap& map) {
    EntryReader reader(walk, frames, options);
    reader.claim_leaves(map.p2m_frames);
    // One allocation of the list's final size for an ordinary guest (growing
    // by doubling would briefly hold three times the list).
    map.pages.reserve(static_cast<size_t>(
        std::min({walk.p2m_size, frames.size() * walk.entries_per_page(), walk.frames_owned})));
    while (reader.read_next(map.pages)) {
    }
    AnomalyCount duplicate;
    drop_duplicate_frames(map.pages, duplicate);
    if (map.pages.capacity() - map.pages.size() > map.pages.size() / 4) map.pages.shrink_to_fit();
    reader.add_warnings(map.warnings);
    if (duplicate.count) map.warnings.push_back(duplicate_warning(duplicate));
}

}  // namespace xendump::p2m_detail
