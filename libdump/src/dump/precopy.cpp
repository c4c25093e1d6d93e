#include "dump/precopy.hpp"

#include <algorithm>
#include <bit>

#include "p2m/p2m.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"

namespace xendump::dump {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kBatch = 1024;  // pages a mapping call, as the pass's

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string object_of(uint32_t domid) { return "domain " + std::to_string(domid); }

}  // namespace

PrecopyDecision precopy_decision(const DumpOptions::Precopy& policy, unsigned live_rounds, uint64_t dirty,
                                 std::optional<uint64_t> previous_dirty, double pages_per_sec, double fixed_us) {
    const double pause_us = (pages_per_sec > 0 ? static_cast<double>(dirty) * 1e6 / pages_per_sec : 0) + fixed_us;
    if (dirty == 0 || pause_us <= static_cast<double>(policy.max_pause.count())) return {PrecopyStep::pause, "fits"};
    if (live_rounds >= policy.max_rounds) return {PrecopyStep::pause, "rounds"};
    if (previous_dirty && dirty >= *previous_dirty) return {PrecopyStep::pause, "not shrinking"};
    return {PrecopyStep::copy_live, ""};
}

Precopy::Precopy(Hypervisor& hv, Hypervisor& real_hv, uint32_t domid, const DumpOptions::Precopy& options)
    : hv_(hv),
      real_hv_(real_hv),
      domid_(domid),
      options_(options),
      record_(options.records, real_hv, domid),
      logdirty_(real_hv, domid) {
    // Xen's CLEAN covers pfns [0, pages): the whole p2m (xg_sr_save.c passes
    // its p2m_size, maximum gpfn + 1), but no more than discovery examines.
    // A PV guest's maximum gpfn is its own max_pfn (Xen derives it from
    // shared_info), so a bitmap sized by it alone would be the guest's to
    // choose: 2^40 pfns would ask dom0 for 128 GiB.
    const auto info = real_hv.domain_info(domid);
    if (!info) throw Error("the domain disappeared before the pre-copy", object_of(domid_));
    max_gpfn_ = hv_.maximum_gpfn(domid_);
    pages_ = std::min(max_gpfn_ == ~uint64_t{0} ? max_gpfn_ : max_gpfn_ + 1, p2m_size_limit(*info));
    bitmap_.assign((pages_ + 63) / 64, 0);
    stats_.precopy = true;
    // An HVM guest's emulated devices write through its device model, which
    // must mark those pages too (PV and PVH guests have none).
    const std::filesystem::path socket = qmp_socket_of(domid);
    std::error_code ec;
    const bool device_model = info->hvm && !info->pvh && std::filesystem::exists(socket, ec);
    // Recorded before the device model is told, which is undone harmlessly
    // if it never was; log-dirty only once Xen turned it on for this dump.
    record_.on(uuid_to_string(info->handle), device_model);
    if (info->hvm && !info->pvh) {
        if (device_model)
            device_model_.emplace(socket);
        else if (real_hv.describe() == "xen")
            device_model_warning_ = "no device model QMP socket at " + socket.string() +
                                    " (a stub domain's, or not libxl's): its devices' writes to the guest's memory "
                                    "are not tracked by the pre-copy";
    }
}

void Precopy::discovered(DiscoveredLayout layout, unsigned restarts) {
    stats_.restarts = restarts;
    layout_ = std::move(layout);
    leaf_frames_.clear();
    leaf_pfns_.clear();
    untracked_leaves_.clear();
    if (!layout_->pv) return;
    const PvP2mShape& shape = *layout_->pv;
    anchor_ = pv_p2m_anchor(layout_->shared_info, shape.width);
    leaf_frames_ = shape.leaf_frames;
    // A p2m page is a page of the guest: its pfn's dirty bit says the guest
    // rewrote it. One whose frame the dump does not hold is read under every pause.
    for (uint64_t j = 0; j < leaf_frames_.size(); ++j) {
        if (leaf_frames_[j] == PvP2mShape::kNoLeaf) continue;
        const auto pfn = layout_->frame_to_pfn ? layout_->frame_to_pfn(leaf_frames_[j]) : std::nullopt;
        if (pfn && *pfn < pages_)
            leaf_pfns_.push_back({*pfn, j});
        else
            untracked_leaves_.push_back(j);
    }
    leaf_pfns_.shrink_to_fit();
}

void Precopy::pass_begins() { pass_start_ = Clock::now(); }

void Precopy::changed(const std::string& why) const { throw LayoutChanged{why}; }

void Precopy::check_counts() {
    if (!layout_) return;
    const uint64_t max_gpfn = hv_.maximum_gpfn(domid_);
    if (max_gpfn != max_gpfn_)
        changed("its highest gfn went from " + util::hex(max_gpfn_) + " to " + util::hex(max_gpfn));
    const auto info = real_hv_.domain_info(domid_);
    if (!info) throw Error("the domain disappeared during the pre-copy", object_of(domid_));
    if (info->tot_pages != layout_->tot_pages)
        changed("its pages went from " + std::to_string(layout_->tot_pages) + " to " +
                std::to_string(info->tot_pages));
}

std::vector<bool> Precopy::populated(std::span<const uint64_t> gfns) {
    std::vector<bool> out;
    out.reserve(gfns.size());
    try {
        for (size_t done = 0; done < gfns.size(); done += kGfnTypesPerCall) {
            const auto batch = gfns.subspan(done, std::min(kGfnTypesPerCall, gfns.size() - done));
            for (GfnType t : hv_.gfn_types(domid_, batch)) out.push_back(t == GfnType::present);
        }
        return out;
    } catch (const Error& e) {
        if (e.sys_errno() == 0) throw;  // a cancel, no refusal
    }
    // Refused (an XSM policy, say): a gfn that maps is populated.
    out.clear();
    for (size_t done = 0; done < gfns.size(); done += kBatch) {
        const auto batch = gfns.subspan(done, std::min(kBatch, gfns.size() - done));
        auto m = hv_.map_foreign(domid_, batch);
        for (size_t i = 0; i < batch.size(); ++i) out.push_back(m->error(i) == 0);
    }
    return out;
}

void Precopy::check_marked(const PageSource& source, bool paused) {
    if (!layout_) return;
    // The marked pfns the dump does not hold.
    std::vector<uint64_t> outside;
    for (uint64_t w = 0; w < bitmap_.size(); ++w) {
        for (uint64_t bits = bitmap_[w]; bits; bits &= bits - 1) {
            const uint64_t pfn = w * 64 + static_cast<uint64_t>(std::countr_zero(bits));
            if (!layout_->pv && translated_gfn_never_dumped(pfn)) continue;  // video RAM, say
            if (!source.index_of_pfn(pfn)) outside.push_back(pfn);
        }
    }
    if (!layout_->pv) {
        // A gfn populated since discovery is dirty (Xen marks what it adds).
        const std::vector<bool> now = populated(outside);
        for (size_t i = 0; i < outside.size(); ++i)
            if (now[i]) changed("gfn " + util::hex(outside[i]) + " was populated: ballooned in");
        return;
    }
    const PvP2mShape& shape = *layout_->pv;
    std::vector<uint64_t> leaves;
    for (uint64_t pfn : outside) leaves.push_back(pfn / shape.entries_per_page());
    for (const auto& [pfn, leaf] : leaf_pfns_)
        if (marked(pfn)) leaves.push_back(leaf);
    if (paused) {
        leaves.insert(leaves.end(), untracked_leaves_.begin(), untracked_leaves_.end());
        leaves.insert(leaves.end(), deferred_leaves_.begin(), deferred_leaves_.end());
        // The p2m's anchor, then its upper levels: walked again unless the
        // guest publishes a generation (with its linear list) that did not move.
        const uint64_t frame = real_hv_.domain_info(domid_).value_or(DomainInfo{}).shared_info_frame;
        auto m = hv_.map_foreign(domid_, std::span(&frame, 1));
        if (m->error(0)) throw Error("cannot map shared_info in the final round", object_of(domid_));
        const PvP2mAnchor now = pv_p2m_anchor(std::span(m->page(0), format::kPageSize), shape.width);
        m.reset();
        if (!now.same_structure(anchor_)) changed("its p2m moved: shared_info's p2m fields changed");
        const bool generation = shape.kind == format::P2mKind::linear;
        if (!generation || now.p2m_generation != anchor_.p2m_generation) {
            std::vector<uint64_t> frames = pv_p2m_leaf_frames(hv_, domid_, shape, now);
            for (uint64_t j = 0; j < frames.size() && j < leaf_frames_.size(); ++j)
                if (frames[j] != leaf_frames_[j]) leaves.push_back(j);
            leaf_frames_ = std::move(frames);
        }
    }
    check_leaves(source, std::move(leaves), !paused);
}

void Precopy::check_failed(const PageSource& source, std::span<const uint64_t> failed) {
    if (!layout_ || failed.empty()) return;
    if (!layout_->pv) {
        const std::vector<bool> now = populated(failed);
        for (size_t i = 0; i < failed.size(); ++i)
            if (!now[i]) changed("gfn " + util::hex(failed[i]) + " was unpopulated: ballooned out");
        return;
    }
    std::vector<uint64_t> leaves;
    for (uint64_t pfn : failed) leaves.push_back(pfn / layout_->pv->entries_per_page());
    check_leaves(source, std::move(leaves), false);
}

void Precopy::check_leaves(const PageSource& source, std::vector<uint64_t> leaves, bool defer) {
    std::sort(leaves.begin(), leaves.end());
    leaves.erase(std::unique(leaves.begin(), leaves.end()), leaves.end());
    if (!defer) deferred_leaves_.clear();
    const PvP2mShape& shape = *layout_->pv;
    // The dump's entry of each pfn against the p2m's now: a pfn given back
    // (a hole now), taken back (a frame now, not a duplicate the discovery
    // dropped), or moved to another frame.
    auto compare = [&](uint64_t pfn, std::optional<uint64_t> frame) {
        PageEntry held{};
        const std::optional<uint64_t> index = source.index_of_pfn(pfn);
        if (index) source.read_entries(*index, std::span(&held, 1));
        if (!frame) {
            if (index) changed("pfn " + util::hex(pfn) + " was given back: ballooned out");
            return;
        }
        if (index) {
            if (held.gmfn != *frame)
                changed("pfn " + util::hex(pfn) + " moved from mfn " + util::hex(held.gmfn) + " to " +
                        util::hex(*frame));
            return;
        }
        const auto owner = layout_->frame_to_pfn ? layout_->frame_to_pfn(*frame) : std::nullopt;
        if (!owner || *owner >= pfn) changed("pfn " + util::hex(pfn) + " was taken back: ballooned in");
    };
    std::vector<uint64_t> batch, frames;
    auto flush = [&] {
        if (frames.empty()) return;
        auto m = hv_.map_foreign(domid_, frames);
        for (size_t i = 0; i < batch.size(); ++i) {
            if (m->error(i) && defer) {
                deferred_leaves_.push_back(batch[i]);
                continue;
            }
            for_each_p2m_entry(shape, batch[i], m->error(i) ? nullptr : m->page(i), compare);
        }
        batch.clear();
        frames.clear();
    };
    for (uint64_t j : leaves) {
        const uint64_t frame = j < leaf_frames_.size() ? leaf_frames_[j] : PvP2mShape::kNoLeaf;
        if (frame == PvP2mShape::kNoLeaf) {
            for_each_p2m_entry(shape, j, nullptr, compare);
            continue;
        }
        batch.push_back(j);
        frames.push_back(frame);
        if (frames.size() == kBatch) flush();
    }
    flush();
}
namespace {

// The set bits of a dirty bitmap, in order. Zero words are skipped eight at
// a time: in the pause, a large guest's bitmap (1 Mi words at 256 GiB) is
// nearly all zeros, and it is walked twice (0.27 ms a walk instead of
// 0.78 ms word by word, for 4096 bits set at 256 GiB, on the bench's VM).
class MarkedPfns {
public:
    explicit MarkedPfns(std::span<const uint64_t> bitmap) : words_(bitmap) {}
    std::optional<uint64_t> next() {
        while (bits_ == 0) {
            if (next_word_ >= words_.size()) return std::nullopt;
            while (next_word_ + 8 <= words_.size() && !any_of_eight(next_word_)) next_word_ += 8;
            if (next_word_ >= words_.size()) return std::nullopt;
            word_ = next_word_++;
            bits_ = words_[word_];
        }
        const uint64_t pfn = word_ * 64 + static_cast<uint64_t>(std::countr_zero(bits_));
        bits_ &= bits_ - 1;
        return pfn;
    }

private:
    bool any_of_eight(size_t w) const {
        const uint64_t* p = words_.data() + w;
        return (p[0] | p[1] | p[2] | p[3] | p[4] | p[5] | p[6] | p[7]) != 0;
    }
    std::span<const uint64_t> words_;
    size_t next_word_ = 0, word_ = 0;
    uint64_t bits_ = 0;
};

}  // namespace

uint64_t Precopy::copy_marked(writer::SlotRewriter& slots, const PageSource& source, std::vector<uint64_t>& unreadable) {
    std::vector<uint64_t> indices, frames, pfns;
    uint64_t copied = 0;
    auto flush = [&] {
        if (frames.empty()) return;
        auto mapping = hv_.map_foreign(domid_, frames);
        static const std::vector<std::byte> zeros(format::kPageSize);
        for (size_t i = 0; i < frames.size(); ++i) {
            if (mapping->error(i)) {
                unreadable.push_back(pfns[i]);
                slots.rewrite(indices[i], zeros);
            } else {
                slots.rewrite(indices[i], std::span(mapping->page(i), format::kPageSize));
            }
        }
        copied += frames.size();
        indices.clear();
        frames.clear();
        pfns.clear();
    };
    PageEntry e{};
    MarkedPfns dirty(bitmap_);
    while (const std::optional<uint64_t> pfn = dirty.next()) {
        // A dirty pfn the dump does not hold is left out: check_marked
        // found it still outside the guest's layout (a change ends the copy).
        const std::optional<uint64_t> index = source.index_of_pfn(*pfn);
        if (!index) continue;
        source.read_entries(*index, std::span(&e, 1));
        indices.push_back(*index);
        frames.push_back(e.gmfn);
        pfns.push_back(*pfn);
        if (frames.size() == kBatch) flush();
    }
    flush();
    return copied;
}

writer::LiveFinal Precopy::run(writer::SlotRewriter& slots, const PageSource& source,
                               std::span<const uint64_t> unreadable_in_pass, const std::vector<VcpuContext>& vcpus, bool pv, uint64_t shared_info_frame,
                               const std::function<void(const std::string&)>& on_warning,
                               const std::function<void(const WriteProgress&)>& on_progress) {
    writer::LiveFinal final;
    if (!record_.released().empty() && on_warning) on_warning(record_.released());
    if (!device_model_warning_.empty() && on_warning) on_warning(device_model_warning_);
    // The pass's rate (reading, hashing and writing every page) is the first
    // measure of what a page costs; each round then measures its own.
    const double pass_seconds = seconds_since(pass_start_);
    double rate = pass_seconds > 0 ? static_cast<double>(source.nr_entries()) / pass_seconds : 0;
    std::optional<uint64_t> previous;
    PrecopyDecision decision;
    // What the running guest's hypervisor would not map (the real Xen lab
    // saw a few hundred pages of a writing PVH guest refused in the pass),
    // read again under the pause; only what fails there is unreadable.
    std::vector<uint64_t> retry(unreadable_in_pass.begin(), unreadable_in_pass.end());
    // What the pause costs besides its pages, measured while the guest runs:
    // reading the vcpu state (the same calls, answers dropped) and a CLEAN
    // (each round's; the pause makes the FINAL one). On the real Xen lab a
    // 1 GiB HVM guest's pause overran a 100 ms target by 15 % without them.
    const auto vcpu_start = Clock::now();
    for (const VcpuContext& v : vcpus) (void)hv_.vcpu_context(domid_, v.id);
    const double vcpu_us = seconds_since(vcpu_start) * 1e6;
    for (;;) {
        const auto clean_start = Clock::now();
        const uint64_t dirty = hv_.read_dirty(domid_, DirtyRead::clean, bitmap_, pages_);
        const double fixed_us = vcpu_us + seconds_since(clean_start) * 1e6;
        // A layout that changed ends the pre-copy here, before the pause.
        check_counts();
        check_marked(source, false);
        decision = precopy_decision(options_, stats_.rounds, dirty, previous, rate, fixed_us);
        if (on_progress) {
            WriteProgress progress;
            progress.live_round = stats_.rounds + 1;
            progress.dirty_pages = dirty;
            progress.live_final = decision.step == PrecopyStep::pause;
            on_progress(progress);
        }
        if (decision.step == PrecopyStep::pause) break;
        const auto start = Clock::now();
        const uint64_t copied = copy_marked(slots, source, retry);
        const double s = seconds_since(start);
        if (copied && s > 0) rate = static_cast<double>(copied) / s;
        stats_.pages_recopied += copied;
        ++stats_.rounds;
        previous = dirty;
    }
    if (decision.why != std::string_view("fits") && on_warning)
        on_warning("pre-copy stopped after " + std::to_string(stats_.rounds) + " round(s) (" + decision.why +
                   "): the guest dirties memory about as fast as it is copied, and its pause may exceed --max-pause");

    // The final round, paused: the last CLEAN's pages, then FINAL's (what the
    // guest wrote between that CLEAN and the pause), the vcpu state and
    // shared_info. Pauses nest (PausedDomain), so a domain paused by its
    // operator stays paused.
    PausedDomain paused(real_hv_, domid_);
    const auto pause_start = Clock::now();
    for (uint64_t pfn : retry) mark(pfn);
    uint64_t in_pause = copy_marked(slots, source, final.unreadable_pfns);
    hv_.read_dirty(domid_, DirtyRead::final_clean, bitmap_, pages_);
    // The layout of the paused guest, for certain: a change unpauses it at once.
    check_counts();
    check_marked(source, true);
    in_pause += copy_marked(slots, source, final.unreadable_pfns);
    check_failed(source, final.unreadable_pfns);
    for (const VcpuContext& v : vcpus) {
        auto ctx = hv_.vcpu_context(domid_, v.id);
        if (!ctx || ctx->size() != v.bytes.size())
            throw Error("vcpu " + std::to_string(v.id) + " changed while the guest ran (onlined, offlined or resized)",
                        object_of(domid_));
        final.vcpus.push_back(VcpuContext{v.id, std::move(*ctx)});
    }
    if (pv) {
        const uint64_t frame = shared_info_frame;
        auto m = hv_.map_foreign(domid_, std::span(&frame, 1));
        if (m->error(0)) throw Error("cannot map shared_info in the final round", object_of(domid_));
        final.shared_info.assign(m->page(0), m->page(0) + format::kPageSize);
    }
    if (device_model_) {
        try {
            device_model_->release();
        } catch (const Error& e) {
            if (on_warning) on_warning(std::string("the device model's dirty logging: ") + e.what());
        }
    }
    logdirty_.release();
    record_.off();
    stats_.pages_recopied += in_pause;
    stats_.pages_in_pause = in_pause;
    stats_.pause_usec = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - pause_start).count());
    if (options_.leave_paused) {
        paused.leave_paused();
        stats_.left_paused = true;
    } else {
        paused.release();
        stats_.pause_usec = static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - pause_start).count());
    }
    std::sort(final.unreadable_pfns.begin(), final.unreadable_pfns.end());

    final.domain_keys.set(keys::kLive, "precopy");
    final.domain_keys.set(keys::kPauseUsec, std::to_string(stats_.pause_usec));
    final.domain_keys.set(keys::kLiveRounds, std::to_string(stats_.rounds));
    final.domain_keys.set(keys::kPagesRecopied, std::to_string(stats_.pages_recopied));
    if (stats_.restarts) final.domain_keys.set(keys::kLiveRestarts, std::to_string(stats_.restarts));
    return final;
}

}  // namespace xendump::dump
