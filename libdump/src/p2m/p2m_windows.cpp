// The windowed p2m walk and the out-of-core duplicate-frame check
// (p2m_windows.hpp). The windows are the chunks discover_p2m() reads (512
// p2m pages, or 256Ki gfns probed), so their concatenation, less
// FrameDuplicates' drops, is discover_p2m()'s page list.
#include "p2m/p2m_windows.hpp"

#include <algorithm>
#include <optional>
#include <set>

#include "p2m/p2m_walk.hpp"
#include "util/runs.hpp"
#include "xendump/error.hpp"

namespace xendump {

using namespace p2m_detail;

namespace {
constexpr uint64_t kGfnsPerWindow = uint64_t{kP2mPagesPerChunk} * 512;  // as many entries as a PV window
}  // namespace

struct P2mWindows::Impl {
    DomainInfo info;
    P2mOptions options;
    P2mMap header;
    std::optional<PvStart> pv;
    std::optional<EntryReader> entries;
    std::optional<TranslatedProber> prober;
    uint64_t pages = 0;
    bool finished = false;
};

P2mWindows::P2mWindows(Hypervisor& hv, const DomainInfo& info, const P2mOptions& options)
    : impl_(std::make_unique<Impl>()) {
    Impl& d = *impl_;
    d.info = info;
    d.options = options;
    if (info.hvm) {
        start_translated(hv, info, d.header);
        d.prober.emplace(hv, info, d.header.p2m_size);
    } else {
        d.pv.emplace(start_pv(hv, info, d.header));
        d.entries.emplace(d.pv->walk, d.pv->frames, d.options);
        d.entries->claim_leaves(d.header.p2m_frames);
    }
}

P2mWindows::~P2mWindows() = default;

const P2mMap& P2mWindows::header() const { return impl_->header; }

bool P2mWindows::next(std::vector<PageEntry>& window) {
    Impl& d = *impl_;
    window.clear();
    while (window.empty()) {
        const bool more = d.entries ? d.entries->read_next(window) : d.prober->read_next(window, kGfnsPerWindow);
        if (!more) break;
    }
    d.pages += window.size();
    return !window.empty();
}

std::span<const uint64_t> P2mWindows::leaf_frames() const {
    if (!impl_->pv) return {};
    return impl_->pv->frames;
}

uint64_t P2mWindows::examined() const {
    const Impl& d = *impl_;
    return d.entries ? d.entries->examined() : d.prober->examined();
}

std::vector<std::string> P2mWindows::warnings(const FrameDuplicates* duplicates) {
    Impl& d = *impl_;
    if (!d.finished) {
        d.finished = true;
        if (d.entries) d.entries->add_warnings(d.header.warnings);
        if (d.prober) d.prober->add_warnings(d.header.warnings);
        if (duplicates && !duplicates->warning().empty()) d.header.warnings.push_back(duplicates->warning());
        if (d.pv) finish_pv(*d.pv, d.info, d.header);
    }
    check_not_empty(d.header, d.pages, d.info.domid);
    return d.header.warnings;
}

void FrameDuplicates::add(std::span<const PageEntry> window) {
    for (const PageEntry& e : window) {
        if (!stretches_.empty()) {
            Stretch& s = stretches_.back();
            if (e.gmfn <= s.gmfn + s.count - 1) ascending_ = false;
            if (e.pfn == s.pfn + s.count && e.gmfn == s.gmfn + s.count) {
                ++s.count;
                continue;
            }
        }
        stretches_.push_back({e.pfn, e.gmfn, 1});
    }
}

bool FrameDuplicates::contains(uint64_t pfn) const {
    const auto it = util::run_at_or_before(dropped_, pfn, &Range::first);
    return it != dropped_.end() && pfn < it->end;
}

// A sweep over frame numbers: at each frame the stretch with the lowest pfn
// for it (pfn = frame + offset, offset = pfn - gmfn of the stretch) keeps
// it, every other stretch over that frame loses it. Only starts, ends and
// changes of the winner change who loses, so the work is O(s log s) for s
// stretches, whatever a hostile p2m holds.
void FrameDuplicates::finish() {
    dropped_.clear();
    dropped_pages_ = 0;
    warning_.clear();
    if (ascending_) return;
    const size_t n = stretches_.size();
    auto offset = [&](size_t i) { return static_cast<int64_t>(stretches_[i].pfn) - static_cast<int64_t>(stretches_[i].gmfn); };
    struct Event {
        uint64_t at;
        bool start;
        size_t id;
    };
    std::vector<Event> events;
    events.reserve(2 * n);
    for (size_t i = 0; i < n; ++i) {
        events.push_back({stretches_[i].gmfn, true, i});
        events.push_back({stretches_[i].gmfn + stretches_[i].count, false, i});
    }
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
        return a.at != b.at ? a.at < b.at : a.start < b.start;  // ends first
    });
    std::set<std::pair<int64_t, size_t>> active;  // by offset: begin() wins
    std::vector<std::optional<uint64_t>> losing_since(n);
    std::vector<Range> lost;
    auto stop_losing = [&](size_t i, uint64_t at) {
        if (losing_since[i] && *losing_since[i] < at) {
            const uint64_t from = *losing_since[i];
            lost.push_back({static_cast<uint64_t>(static_cast<int64_t>(from) + offset(i)),
                            static_cast<uint64_t>(static_cast<int64_t>(at) + offset(i))});
        }
        losing_since[i].reset();
    };
    for (size_t k = 0; k < events.size();) {
        const uint64_t at = events[k].at;
        constexpr size_t kNobody = SIZE_MAX;
        const size_t winner_before = active.empty() ? kNobody : active.begin()->second;
        for (; k < events.size() && events[k].at == at; ++k) {
            const size_t i = events[k].id;
            if (events[k].start) {
                active.insert({offset(i), i});
                losing_since[i] = at;  // until it turns out to win
            } else {
                active.erase({offset(i), i});
                stop_losing(i, at);
            }
        }
        if (active.empty()) continue;
        const size_t winner = active.begin()->second;
        stop_losing(winner, at);
        if (winner_before != kNobody && winner_before != winner && active.count({offset(winner_before), winner_before}))
            losing_since[winner_before] = at;
    }
    std::sort(lost.begin(), lost.end(), [](const Range& a, const Range& b) { return a.first < b.first; });
    for (const Range& r : lost) {
        if (!dropped_.empty() && r.first <= dropped_.back().end)
            dropped_.back().end = std::max(dropped_.back().end, r.end);
        else
            dropped_.push_back(r);
    }
    for (const Range& r : dropped_) dropped_pages_ += r.end - r.first;
    if (dropped_.empty()) return;
    // discover_p2m()'s line: the lowest dropped pfn, its frame, and the
    // lowest pfn that names that frame.
    const uint64_t pfn = dropped_.front().first;
    uint64_t frame = 0, owner = UINT64_MAX;
    for (const Stretch& s : stretches_)
        if (pfn >= s.pfn && pfn - s.pfn < s.count) frame = s.gmfn + (pfn - s.pfn);
    for (const Stretch& s : stretches_)
        if (frame >= s.gmfn && frame - s.gmfn < s.count) owner = std::min(owner, s.pfn + (frame - s.gmfn));
    AnomalyCount a;
    a.count = dropped_pages_;
    a.first = "pfn " + hex(pfn) + " -> mfn " + hex(frame) + ", already pfn " + hex(owner);
    warning_ = duplicate_warning(a);
}

}  // namespace xendump
