// The encoders' heap over a large guest (issue 19): the chunk digests of
// NT_XEN_DIGEST are held a window at a time (writer/digest_table.hpp), not
// 16 bytes per 256 pages for the whole guest.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "dump_check.hpp"
#include "io/sink.hpp"
#include "kdump/encoder.hpp"
#include "pipeline/page_batch.hpp"
#include "writer/v1_encoder.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/kdump.hpp"

namespace xendump::test {
namespace {

using format::GuestType;

// An HVM guest of `n` pages, pfns 0..n-1, every page zeros, computed as
// asked: nothing held per page.
class LargeZeroGuest final : public PageSource {
public:
    explicit LargeZeroGuest(uint64_t n) : n_(n) {}
    std::span<const PageEntry> entries() const override { throw Error("test: entries() of a large guest"); }
    uint64_t nr_entries() const override { return n_; }
    void read_entries(uint64_t first, std::span<PageEntry> out) const override {
        for (uint64_t i = 0; i < out.size(); ++i) out[i] = {first + i, first + i};
    }
    std::optional<uint64_t> index_of_pfn(uint64_t pfn) const override {
        return pfn < n_ ? std::optional<uint64_t>(pfn) : std::nullopt;
    }
    void read_pages(size_t, size_t, std::span<std::byte> out, std::span<uint8_t> bad) override {
        std::fill(out.begin(), out.end(), std::byte{0});
        std::fill(bad.begin(), bad.end(), uint8_t{0});
    }

private:
    uint64_t n_;
};

// What an encoder made by `make` holds on the heap once batches of `n`
// zero pages have gone through it (prepare, write) as the pass sends them,
// into a sparse file: its state after the last page, before finish().
template <class Make>
size_t heap_after_pages(LargeZeroGuest& guest, uint64_t n, Make make) {
    TempDir dir, spill;
    ScopedEnv tmpdir("TMPDIR", spill.path());
    UniqueFd fd(::open((dir / "d").c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd) throw Error("test: cannot create the output");
    io::Sink sink(fd.get(), true, true, "d");
    static const std::vector<std::byte> zero_page(4096);
    constexpr size_t kBatch = 1024;
    pipeline::PageBatch b;
    b.reserve(kBatch);
    b.page.assign(kBatch, zero_page.data());
    b.zero.assign(kBatch, 1);
    b.keep.assign(kBatch, 1);
    b.unreadable.assign(kBatch, 0);
    b.entry_window.resize(kBatch);

    const size_t before = mallinfo2().uordblks;
    auto encoder = make();
    encoder->begin(sink);
    for (uint64_t first = 0; first < n; first += kBatch) {
        b.first = first;
        b.count = static_cast<size_t>(std::min<uint64_t>(kBatch, n - first));
        guest.read_entries(first, std::span(b.entry_window).first(b.count));
        b.entries = std::span<const PageEntry>(b.entry_window).first(b.count);
        encoder->prepare(b);
        encoder->write(b, sink);
    }
    const size_t after = mallinfo2().uordblks;
    return after - std::min(after, before);
}

// What the encoder of `make(guest)` holds after the pages of a 1 GiB guest
// and of a `gib` GiB one: the second must not hold more (16 bytes a chunk
// would be 16 KiB per GiB).
template <class Make>
void expect_flat(uint64_t gib, Make make) {
    const uint64_t small = uint64_t{1} << 18, large = gib << 18;
    LargeZeroGuest g1(small), g2(large);
    const size_t held_small = heap_after_pages(g1, small, [&] { return make(g1); });
    const size_t held_large = heap_after_pages(g2, large, [&] { return make(g2); });
    EXPECT_LT(held_large, held_small + (size_t{48} << 10))
        << "holds " << held_small << " bytes after " << small / 256 << " digest chunks, " << held_large << " after "
        << large / 256;
}

// The v1 encoder: 64 GiB (64Ki chunks, 1 MiB of digests held whole).
TEST(DigestWindows, EncoderHeapStaysFlatOverALargeGuest) {
    const DumpSpec spec = make_spec(GuestType::hvm, 8, 1);
    expect_flat(64, [&](LargeZeroGuest& g) { return std::make_unique<writer::V1Encoder>(spec, g, true, false, "d"); });
}

// The compact encoder, pages stored raw (every page is hashed: a smaller
// guest): 16 GiB (16Ki chunks, 256 KiB of digests held whole).
TEST(DigestWindows, CompactEncoderHeapStaysFlatOverALargeGuest) {
    const DumpSpec spec = make_spec(GuestType::hvm, 8, 1);
    expect_flat(16, [&](LargeZeroGuest& g) {
        return std::make_unique<kdump::KdumpEncoder>(spec, g, nullptr, Compression::none, true, 0, g, "d");
    });
}

}  // namespace
}  // namespace xendump::test
