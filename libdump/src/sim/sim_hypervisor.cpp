// The "sim:DIR" backend of the hypervisor interface (simulated-host.md,
// "Behaviour the simulator must share with Xen").
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>

#include "hv/backends.hpp"
#include "sim/guest_abi.hpp"
#include "sim/map_cost.hpp"
#include "sim/sim_host.hpp"
#include "sim/vcpu_context.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"

namespace xendump {

namespace {

using sim::kPageSize;

// Mapping buffers are reused: a dump maps thousands of batches of the same
// size, and keeps as many mappings at once as its pipeline has batches in
// flight (pipeline.hpp: up to 32 MiB of pages). A buffer is not cleared
// (every page handed out by page_for_write is written whole), and up to
// kKeptBytes of them are kept: a pool smaller than the batches in flight
// made half of the mappings a new buffer, zeroed and faulted in page by
// page: about 4 % of an encrypted 4 GiB dump's CPU (BENCHMARKS.md, #16).
struct MappingBuffer {
    std::unique_ptr<std::byte[]> bytes;
    size_t size = 0;
};

class BufferPool {
public:
    static constexpr size_t kKeptBytes = 48u << 20;
    MappingBuffer take(size_t bytes) {
        {
            std::lock_guard lock(mutex_);
            for (auto it = free_.begin(); it != free_.end(); ++it) {
                if (it->size >= bytes) {
                    MappingBuffer b = std::move(*it);
                    free_.erase(it);
                    kept_ -= b.size;
                    return b;
                }
            }
        }
        return {std::make_unique_for_overwrite<std::byte[]>(bytes), bytes};
    }
    void give(MappingBuffer b) {
        std::lock_guard lock(mutex_);
        if (kept_ + b.size > kKeptBytes) return;
        kept_ += b.size;
        free_.push_back(std::move(b));
    }

private:
    std::mutex mutex_;
    std::vector<MappingBuffer> free_;
    size_t kept_ = 0;
};

// Read-only memory that reads as zeros, shared by every mapping: a page the
// simulated guest holds as zeros (SimDomain::reads_as_zero) is mapped there,
// as Xen maps a frame into the caller's address space without copying it.
// Never written, so the kernel backs all of it with its one zero page (no
// memory of ours). Page i of a mapping is page i % kZeroPages of it, so runs
// of zero pages stay adjacent in memory as the pages of a real mapping are.
constexpr size_t kZeroPages = 4096;  // 16 MiB of address space

const std::byte* zero_region() {
    static const std::byte* region = [] {
        void* p = ::mmap(nullptr, kZeroPages * kPageSize, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) throw_errno("cannot map the simulator's zero region");
        return static_cast<const std::byte*>(p);
    }();
    return region;
}

// A page is in one of three places: the mapping's own buffer (a page the
// simulator computes or copies), the zero region, or in place in the
// domain's memory image (SimDomain::page_in_place), mapped without a copy.
// The buffer is taken from the pool only when a page needs it.
class SimMapping : public ForeignMapping {
public:
    SimMapping(std::shared_ptr<BufferPool> pool, size_t count)
        : pool_(std::move(pool)), at_(count, nullptr), errors_(count, 0) {}
    ~SimMapping() override {
        if (pages_.bytes) pool_->give(std::move(pages_));
    }
    size_t count() const override { return errors_.size(); }
    const std::byte* page(size_t i) const override { return at_[i] ? at_[i] : pages_.bytes.get() + i * kPageSize; }
    int error(size_t i) const override { return errors_[i]; }
    std::byte* page_for_write(size_t i) {
        if (!pages_.bytes) pages_ = pool_->take(count() * kPageSize);
        at_[i] = nullptr;
        return pages_.bytes.get() + i * kPageSize;
    }
    void fail(size_t i, int err) {  // its page reads as zeros
        errors_[i] = err;
        map_zero(i);
    }
    void map_zero(size_t i) { at_[i] = zero_region() + (i % kZeroPages) * kPageSize; }
    void map_in_place(size_t i, const std::byte* page) { at_[i] = page; }

private:
    std::shared_ptr<BufferPool> pool_;
    MappingBuffer pages_;
    std::vector<const std::byte*> at_;  // page i, when not in pages_
    std::vector<int> errors_;
};

// Readable when DIR/events grew: a domain shut down, crashed or was destroyed.
class SimWatch : public DomainWatch {
public:
    explicit SimWatch(const std::filesystem::path& events) : fd_(inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
        if (!fd_) throw_errno("inotify_init1");
        if (inotify_add_watch(fd_.get(), events.c_str(), IN_MODIFY) < 0) throw_errno("cannot watch", events.string());
    }
    int fd() const override { return fd_.get(); }
    bool consume() override {
        bool any = false;
        alignas(inotify_event) char buf[4096];
        for (;;) {
            const ssize_t n = util::retry_eintr([&] { return ::read(fd_.get(), buf, sizeof buf); });
            if (n <= 0) return any;  // EAGAIN: drained
            any = true;
        }
    }

private:
    UniqueFd fd_;
};

class SimHypervisor : public Hypervisor {
public:
    explicit SimHypervisor(const std::filesystem::path& dir) : host_(dir), pool_(std::make_shared<BufferPool>()) {}

    std::string describe() const override { return "sim:" + host_.paths().dir.string(); }

    std::vector<DomainInfo> list_domains() override {
        std::vector<DomainInfo> out;
        for (uint32_t id : host_.domids()) {
            auto s = host_.state(id);
            if (!s->destroyed) out.push_back(host_.info(*host_.find(id), *s));
        }
        return out;
    }

    std::optional<DomainInfo> domain_info(uint32_t domid) override {
        const sim::SimDomain* d = host_.find(domid);
        if (!d) return std::nullopt;
        auto s = host_.state(domid);
        if (s->destroyed) return std::nullopt;
        return host_.info(*d, *s);
    }

    std::string domain_name(uint32_t domid) override {
        const sim::SimDomain* d = host_.find(domid);
        if (!d || host_.state(domid)->destroyed) return {};
        return d->spec().name;
    }

    unsigned guest_width(uint32_t domid) override { return host_.live(domid).spec().guest_width; }

    uint64_t maximum_gpfn(uint32_t domid) override { return host_.live(domid).spec().p2m_size - 1; }

    std::optional<std::vector<std::byte>> vcpu_context(uint32_t domid, uint32_t vcpu) override {
        const sim::SimDomain& d = host_.live(domid);
        if (vcpu >= d.spec().vcpus) return std::nullopt;
        return sim::build_vcpu_context(domid, vcpu, d.spec().guest_width, d.spec().is_pv(), d.cr3());
    }

    std::unique_ptr<ForeignMapping> map_foreign(uint32_t domid, std::span<const uint64_t> frames) override {
        const sim::SimDomain& d = host_.live(domid);
        const sim::DomainSpec& spec = d.spec();
        // A guest with a writer runs while it is mapped (simulated-host.md
        // "Log-dirty and the writer"): its writes and these reads are one
        // step of the host, under the host's lock.
        std::optional<sim::HostLock> lock;
        if (spec.writer.enabled()) lock.emplace(host_.paths());
        auto state = lock ? host_.run_writer(d, frames.size()) : host_.state(domid);
        auto mapping = std::make_unique<SimMapping>(pool_, frames.size());
        auto map_pfn = [&](size_t i, uint64_t pfn) {
            if (lock) {
                if (const uint64_t generation = host_.written_generation(d, pfn)) {
                    sim::fill_written_page(pfn, generation, mapping->page_for_write(i));
                    return;
                }
            }
            if (d.reads_as_zero(pfn))
                mapping->map_zero(i);
            else if (const std::byte* in_place = d.page_in_place(pfn))
                mapping->map_in_place(i, in_place);
            else
                d.read_page(pfn, mapping->page_for_write(i));
        };
        for (size_t i = 0; i < frames.size(); ++i) {
            const uint64_t frame = frames[i];
            if (spec.is_pv() && frame == d.derived().shared_info_mfn) {
                std::byte* page = mapping->page_for_write(i);
                std::memcpy(page, d.shared_info_page().data(), kPageSize);
                // The generation the guest keeps now (SimHost::p2m_generation).
                const uint64_t generation = host_.p2m_generation(d, *state);
                const unsigned w = spec.guest_width;
                const size_t arch = w == 8 ? sim::abi::kSharedInfoArch64 : sim::abi::kSharedInfoArch32;
                std::memcpy(page + arch + sim::abi::kP2mGeneration * w, &generation, w);  // little-endian
                continue;
            }
            const Frame f = frame_of(d, *state, frame);
            if (f.error)
                mapping->fail(i, f.error);
            else
                map_pfn(i, f.pfn);
        }
        sim::wait_map_cost(spec.per_call_us, spec.per_page_ns, frames.size());
        return mapping;
    }

    // Answered from what map_foreign would map (the domain's populated gfns,
    // less the ballooned ones); nothing is mapped, and a guest's writer does
    // not run (its clock is pages mapped). Costs one mapping call's fixed
    // cost a kGfnTypesPerCall gfns (a hypercall each, as on Xen) and a tenth
    // of the per-page cost a gfn: Xen looks the gfn up and writes 8 bytes
    // back, with no page-table entry to write and flush (man xen-dump-sim,
    // map_cost).
    std::vector<GfnType> gfn_types(uint32_t domid, std::span<const uint64_t> gfns) override {
        const sim::SimDomain& d = host_.live(domid);
        const sim::DomainSpec& spec = d.spec();
        auto state = host_.state(domid);
        std::vector<GfnType> types;
        types.reserve(gfns.size());
        for (uint64_t gfn : gfns) types.push_back(frame_of(d, *state, gfn).error ? GfnType::absent : GfnType::present);
        for (size_t done = 0; done < gfns.size(); done += kGfnTypesPerCall)
            sim::wait_map_cost(spec.per_call_us, spec.per_page_ns / 10,
                               std::min(kGfnTypesPerCall, gfns.size() - done));
        return types;
    }

    void pause(uint32_t domid) override { host_.pause(domid); }
    void unpause(uint32_t domid) override { host_.unpause(domid); }
    void destroy(uint32_t domid) override { host_.destroy(domid); }
    format::XenVersionDesc xen_version() override { return host_.xen_version(); }
    std::unique_ptr<DomainWatch> watch_domains() override {
        return std::make_unique<SimWatch>(host_.paths().events());
    }
    void enable_logdirty(uint32_t domid) override { host_.enable_logdirty(domid); }
    uint64_t read_dirty(uint32_t domid, DirtyRead how, std::span<uint64_t> bitmap, uint64_t pages) override {
        return host_.read_dirty(domid, how, bitmap, pages);
    }
    void disable_logdirty(uint32_t domid) override { host_.disable_logdirty(domid); }

private:
    // A frame as the guest's: PV guests are mapped by mfn, which must be the
    // domain's own (else EPERM); HVM/PVH by gfn, which must be populated
    // (else EINVAL). The shared_info frame is the caller's to handle.
    struct Frame {
        uint64_t pfn = 0;
        int error = 0;
    };
    static Frame frame_of(const sim::SimDomain& d, const sim::DomainState& state, uint64_t frame) {
        const sim::DomainSpec& spec = d.spec();
        if (spec.is_pv()) {
            auto pfn = d.pfn_of_mfn(frame);
            if (!pfn || state.is_ballooned(*pfn)) return {0, EPERM};
            return {*pfn, 0};
        }
        if (frame >= spec.p2m_size || !spec.extent_of_pfn(frame) || state.is_ballooned(frame)) return {0, EINVAL};
        return {frame, 0};
    }

    sim::SimHost host_;
    std::shared_ptr<BufferPool> pool_;
};

}  // namespace

std::unique_ptr<Hypervisor> open_sim_backend(const std::filesystem::path& dir) {
    return std::make_unique<SimHypervisor>(dir);
}

}  // namespace xendump
