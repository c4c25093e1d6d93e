// The v1 encoder's heap over a large guest (issue 19): the chunk digests of
// NT_XEN_DIGEST are held a window at a time (writer/digest_table.hpp), not
// 16 bytes per 256 pages for the whole guest.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <span>
#include <vector>

#include "dump_check.hpp"
#include "io/sink.hpp"
#include "pipeline/page_batch.hpp"
#include "writer/v1_encoder.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"

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

// The v1 encoder over a 64 GiB guest (64Ki digest chunks: 1 MiB of digests
// held whole), its batches of zero pages fed as the pass does, into a sparse
// file: what it holds on the heap after the last page stays within a window
// of digests (64 KiB) and the plan, not 16 bytes per chunk.
TEST(DigestWindows, EncoderHeapStaysFlatOverALargeGuest) {
    TempDir dir;
    const uint64_t n = uint64_t{16} << 20;  // 64 GiB of pages
    LargeZeroGuest guest(n);
    const DumpSpec spec = make_spec(GuestType::hvm, 8, 1);
    UniqueFd fd(::open((dir / "d").c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd);
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
    writer::V1Encoder encoder(spec, guest, true, false, "d");
    encoder.begin(sink);
    for (uint64_t first = 0; first < n; first += kBatch) {
        b.first = first;
        b.count = static_cast<size_t>(std::min<uint64_t>(kBatch, n - first));
        guest.read_entries(first, std::span(b.entry_window).first(b.count));
        b.entries = std::span<const PageEntry>(b.entry_window).first(b.count);
        encoder.prepare(b);
        encoder.write(b, sink);
    }
    const size_t after = mallinfo2().uordblks;
    EXPECT_LT(after - std::min(after, before), size_t{256} << 10)
        << "the encoder holds " << (after - before) << " bytes after " << n / 256 << " digest chunks";
}

}  // namespace
}  // namespace xendump::test
