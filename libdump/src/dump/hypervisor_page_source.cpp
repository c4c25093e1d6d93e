#include "dump/hypervisor_page_source.hpp"

#include <cstring>

#include "xendump/error.hpp"
#include "xendump/format.hpp"

namespace xendump::dump {

using format::kPageSize;

HypervisorPageSource::HypervisorPageSource(Hypervisor& hv, uint32_t domid, PageExtents pages, size_t batch_pages,
                                           bool pages_change)
    : hv_(hv),
      domid_(domid),
      pages_(std::move(pages)),
      batch_(batch_pages ? batch_pages : 1024),
      pages_change_(pages_change) {}

namespace {

class LentMapping final : public LentPages {
public:
    explicit LentMapping(std::unique_ptr<ForeignMapping> m) : m_(std::move(m)) {}
    const std::byte* page(size_t i) const override { return m_->error(i) == 0 ? m_->page(i) : nullptr; }

private:
    std::unique_ptr<ForeignMapping> m_;
};

}  // namespace

std::unique_ptr<ForeignMapping> HypervisorPageSource::map(size_t first, size_t count) {
    if (first > pages_.size() || count > pages_.size() - first)
        throw Error("page batch out of range", "domain " + std::to_string(domid_));
    window_.resize(count);
    pages_.read(first, window_);
    return map(window_);
}

std::unique_ptr<ForeignMapping> HypervisorPageSource::map(std::span<const PageEntry> entries) {
    frames_.resize(entries.size());
    for (size_t i = 0; i < entries.size(); ++i) frames_[i] = entries[i].gmfn;
    return hv_.map_foreign(domid_, frames_);
}

std::unique_ptr<LentPages> HypervisorPageSource::lend_entries(std::span<const PageEntry> entries) {
    if (entries.size() > batch_) return nullptr;
    return std::make_unique<LentMapping>(map(entries));
}

std::unique_ptr<LentPages> HypervisorPageSource::lend_pages(size_t first, size_t count) {
    if (count > batch_) return nullptr;
    return std::make_unique<LentMapping>(map(first, count));
}

void HypervisorPageSource::read_pages(size_t first, size_t count, std::span<std::byte> out,
                                      std::span<uint8_t> unreadable) {
    if (out.size() < count * kPageSize || unreadable.size() < count)
        throw Error("page batch buffer too small", "domain " + std::to_string(domid_));
    // The caller's batch may be larger than one mapping call should be; map in
    // slices of batch_ frames (the mapping is an mmap on a real host).
    for (size_t done = 0; done < count;) {
        size_t n = std::min(batch_, count - done);
        auto mapping = map(first + done, n);
        for (size_t i = 0; i < n; ++i) {
            std::byte* dst = out.data() + (done + i) * kPageSize;
            if (mapping->error(i) != 0) {
                std::memset(dst, 0, kPageSize);
                unreadable[done + i] = 1;
            } else {
                std::memcpy(dst, mapping->page(i), kPageSize);
                unreadable[done + i] = 0;
            }
        }
        done += n;
    }
}

}  // namespace xendump::dump
