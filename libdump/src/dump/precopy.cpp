#include "dump/precopy.hpp"

#include <algorithm>
#include <bit>

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
    : hv_(hv), real_hv_(real_hv), domid_(domid), options_(options), logdirty_(real_hv, domid) {
    // Xen's CLEAN covers pfns [0, pages): the whole p2m (xg_sr_save.c passes
    // its p2m_size, maximum gpfn + 1).
    pages_ = hv_.maximum_gpfn(domid_) + 1;
    bitmap_.assign((pages_ + 63) / 64, 0);
    stats_.precopy = true;
    // An HVM guest's emulated devices write through its device model, which
    // must mark those pages too (PV and PVH guests have none).
    const auto info = real_hv.domain_info(domid);
    if (info && info->hvm && !info->pvh) {
        const std::filesystem::path socket = qmp_socket_of(domid);
        std::error_code ec;
        if (std::filesystem::exists(socket, ec))
            device_model_.emplace(socket);
        else if (real_hv.describe() == "xen")
            device_model_warning_ = "no device model QMP socket at " + socket.string() +
                                    " (a stub domain's, or not libxl's): its devices' writes to the guest's memory "
                                    "are not tracked by the pre-copy";
    }
}

void Precopy::pass_begins() { pass_start_ = Clock::now(); }

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
    MarkedPfns marked(bitmap_);
    while (const std::optional<uint64_t> pfn = marked.next()) {
        // A dirty pfn the dump does not hold (a hole, or one populated
        // since discovery) is left out: the file holds the pages found then.
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
    in_pause += copy_marked(slots, source, final.unreadable_pfns);
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
    return final;
}

}  // namespace xendump::dump
