// The encoders' heap over a large guest (issue 19): the chunk digests of
// NT_XEN_DIGEST are held a window at a time (writer/digest_table.hpp), not
// 16 bytes per 256 pages for the whole guest; the read-back behind the
// writer folds its chunks' digests into one; a PV guest's machine frames
// that do not rise with its pfns are ranked through a bitmap in a
// temporary file (kdump::KeyRanks), not one in memory.
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
#include "io/sealed_temp_file.hpp"
#include "io/sink.hpp"
#include "kdump/encoder.hpp"
#include "pipeline/page_batch.hpp"
#include "pipeline/read_behind.hpp"
#include "writer/v1_encoder.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/kdump.hpp"

namespace xendump::test {
namespace {

using format::GuestType;

// A guest of `n` pages, pfns 0..n-1, every page zeros, computed as asked:
// nothing held per page. The frames are the pfns, or with `frame_bits` (a
// PV guest, n a power of two) the pfns shuffled and spread over frames
// [0, 2^frame_bits), the highest close to the top.
class LargeZeroGuest final : public PageSource {
public:
    explicit LargeZeroGuest(uint64_t n, unsigned frame_bits = 0) : n_(n), frame_bits_(frame_bits) {}
    std::span<const PageEntry> entries() const override { throw Error("test: entries() of a large guest"); }
    uint64_t nr_entries() const override { return n_; }
    void read_entries(uint64_t first, std::span<PageEntry> out) const override {
        for (uint64_t i = 0; i < out.size(); ++i) out[i] = {first + i, frame(first + i)};
    }
    uint64_t frame(uint64_t pfn) const {
        if (frame_bits_ == 0) return pfn;
        // An odd multiplier permutes [0, n); the stride spreads them.
        return (pfn * 0x9e3779b1u) % n_ * ((uint64_t{1} << frame_bits_) / n_) + 7;
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
    unsigned frame_bits_;
};

// Bytes malloc has handed out and not had back: in its arenas and mapped
// on their own (large blocks).
size_t heap_in_use() {
    const struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

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

    const size_t before = heap_in_use();
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
    const size_t after = heap_in_use();
    return after - std::min(after, before);
}

// What the encoder of `make(guest)` holds after the pages of a 1 GiB guest
// and of a `gib` GiB one: the second must not hold more (16 bytes a chunk
// would be 16 KiB per GiB).
template <class Make>
void expect_flat(uint64_t gib, Make make) {
    // The spilled digests go through a sealed temporary file
    // (io/sealed_temp_file.hpp), whose first use initialises OpenSSL once
    // for the process (its random generator and ciphers: some 270 KiB that
    // do not grow with anything): done here, before either is measured.
    io::SealedTempFile("OpenSSL's first use").write(0, "x", 1);
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

// A PV guest's compact file when its machine frames do not rise with its
// pfns: the descriptors' slots (ranks of the frames) come from the frames'
// bitmap in a temporary file, not from one in memory (1.125 bits a frame up
// to the highest: 288 MiB for frames up to 2^31, 8 TiB of host memory).
// What the encoder holds is the same for frames up to 2^24 and 2^31 but for
// the count of set bits per 32768 frames (512 KiB at 2^31).
TEST(DigestWindows, CompactEncoderHeapDoesNotGrowWithAPvGuestsFrames) {
    const DumpSpec spec = make_spec(GuestType::pv, 8, 1);
    constexpr uint64_t n = 4096;
    LargeZeroGuest low(n, 24), high(n, 31);
    ASSERT_GT(high.frame(1), high.frame(2));  // the frames do not rise
    auto make = [&](LargeZeroGuest& g) {
        return [&] { return std::make_unique<kdump::KdumpEncoder>(spec, g, nullptr, Compression::none, true, 0, g, "d"); };
    };
    const size_t held_low = heap_after_pages(low, n, make(low));
    const size_t held_high = heap_after_pages(high, n, make(high));
    EXPECT_LT(held_high, held_low + (size_t{1} << 20)) << "holds " << held_low << " bytes for frames up to 2^24, "
                                                       << held_high << " for frames up to 2^31";
}

// What the read-back behind the writer holds once it has hashed `bytes` of
// .xen_pages (a hole past the end of an empty file: zeros, nothing read).
size_t read_back_heap(uint64_t bytes) {
    TempDir dir;
    UniqueFd fd(::open((dir / "d").c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd) throw Error("test: cannot create the file");
    constexpr uint64_t kPagesAt = 8192, kChunk = 1u << 20, kRange = 8u << 20;
    const size_t before = heap_in_use();
    pipeline::ReadBehind behind(fd.get(), kPagesAt, bytes, kChunk, "d");
    for (uint64_t at = 0; at < kPagesAt + bytes; at += kRange) behind.take(at, std::min(kRange, kPagesAt + bytes - at));
    const PagesReadBack rb = behind.result();
    EXPECT_EQ(rb.chunks, bytes / kChunk);
    const size_t after = heap_in_use();
    return after - std::min(after, before);
}

// 256 MiB and 16 GiB of pages read back (16 bytes a chunk would be 256 KiB
// more).
TEST(DigestWindows, ReadBackHeapStaysFlatOverALargeGuest) {
    const size_t held_small = read_back_heap(uint64_t{256} << 20);
    const size_t held_large = read_back_heap(uint64_t{16} << 30);
    EXPECT_LT(held_large, held_small + (size_t{48} << 10))
        << "holds " << held_small << " bytes after 256 chunks, " << held_large << " after 16384";
}

}  // namespace
}  // namespace xendump::test
