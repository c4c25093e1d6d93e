// kernel::PfnBitmap (issue 19): a bit per pfn in memory that does not grow
// with the guest. Random operations against a std::vector<bool> over many
// more blocks than the bitmap keeps in memory (so blocks are evicted to its
// temporary file and read back), copies and merge_masked across blocks in
// every state, concurrent readers, and the heap a bitmap of 2^34 bits (a
// 64 TiB guest) holds with scattered bits set: its cache and 8 bytes per
// block, not 2 GiB.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "test_support.hpp"
#include "xendump/kernel/dump_level.hpp"

namespace xendump::test {
namespace {

using kernel::PfnBitmap;

constexpr uint64_t kBlock = PfnBitmap::kBlockBits;
// The bits the cache holds at most: the sizes below are many times that.
constexpr uint64_t kCachedBits = kBlock * PfnBitmap::kCachedBlocks;

uint64_t ref_count(const std::vector<bool>& ref) { return static_cast<uint64_t>(std::count(ref.begin(), ref.end(), true)); }

void expect_equal(const PfnBitmap& bits, const std::vector<bool>& ref, const char* what) {
    ASSERT_EQ(bits.size(), ref.size()) << what;
    uint64_t wrong = 0, first_wrong = 0;
    for (uint64_t p = 0; p < ref.size(); ++p)
        if (bits.test(p) != ref[p] && wrong++ == 0) first_wrong = p;
    EXPECT_EQ(wrong, 0u) << what << ": first differing bit " << first_wrong;
    EXPECT_EQ(bits.count(), ref_count(ref)) << what;
}

class PfnBitmapTest : public ::testing::Test {
protected:
    TempDir spill_;  // the bitmaps' temporary files
    ScopedEnv tmpdir_{"TMPDIR", spill_.path().string()};
};

// Single bits and runs at random over 12 times the cache, against the
// reference: the blocks go to the file and come back; all-zero, all-one and
// mixed blocks, the partial last one included.
TEST_F(PfnBitmapTest, RandomOperationsMatchAReferenceAcrossEvictions) {
    const uint64_t n = 12 * kCachedBits + 12345;
    PfnBitmap bits(n);
    std::vector<bool> ref(n);
    std::mt19937_64 rng(19);
    for (int op = 0; op < 400000; ++op) {
        const uint64_t p = rng() % (n + 10);  // a few past the end: ignored
        switch (rng() % 8) {
            case 0: case 1: case 2:
                bits.set(p);
                if (p < n) ref[p] = true;
                break;
            case 3: case 4:
                bits.reset(p);
                if (p < n) ref[p] = false;
                break;
            case 5: {
                // Runs within a block, across blocks and whole blocks.
                const uint64_t len = rng() % 4 == 0 ? rng() % (3 * kBlock) : rng() % 300;
                bits.set_range(p, p + len);
                for (uint64_t q = p; q < p + len && q < n; ++q) ref[q] = true;
                break;
            }
            default: ASSERT_EQ(bits.test(p), p < n && ref[p]) << "op " << op << " pfn " << p;
        }
        if (op % 50000 == 0) {
            ASSERT_EQ(bits.count(), ref_count(ref)) << "op " << op;
        }
    }
    expect_equal(bits, ref, "after the operations");
    EXPECT_LE(bits.bytes(), PfnBitmap::kCachedBlocks * kBlock / 8 + (16 << 10));
}

// Blocks entirely set, then cleared bit by bit, and cleared again: a block
// that becomes all zero or all one again is read back as such.
TEST_F(PfnBitmapTest, BlocksThatBecomeUniformAgain) {
    const uint64_t n = 40 * kBlock;
    PfnBitmap bits(n);
    std::vector<bool> ref(n);
    bits.set_range(0, n);
    ref.assign(n, true);
    for (uint64_t b = 0; b < 40; b += 2)
        for (uint64_t p = b * kBlock; p < (b + 1) * kBlock; p += 3) {
            bits.reset(p);
            ref[p] = false;
        }
    expect_equal(bits, ref, "ones less every third bit of every other block");
    for (uint64_t b = 0; b < 40; b += 4)
        for (uint64_t p = b * kBlock; p < (b + 1) * kBlock; p += 3) {
            bits.set(p);
            ref[p] = true;
        }
    for (uint64_t p = 2 * kBlock; p < 3 * kBlock; ++p) {
        bits.reset(p);
        ref[p] = false;
    }
    expect_equal(bits, ref, "some blocks set again, one cleared");
}

// The first set bit at or after a pfn, over holes of every size.
TEST_F(PfnBitmapTest, NextSetFindsEachSetBitInTurn) {
    const uint64_t n = 10 * kCachedBits + 77;
    PfnBitmap bits(n);
    std::vector<uint64_t> want;
    std::mt19937_64 rng(7);
    for (uint64_t p = rng() % 1000; p < n; p += 1 + (rng() % 3 == 0 ? rng() % (4 * kBlock) : rng() % 70)) {
        bits.set(p);
        want.push_back(p);
    }
    bits.set_range(3 * kBlock, 5 * kBlock);
    for (uint64_t p = 3 * kBlock; p < 5 * kBlock; ++p) want.push_back(p);
    std::sort(want.begin(), want.end());
    want.erase(std::unique(want.begin(), want.end()), want.end());
    std::vector<uint64_t> got;
    for (uint64_t p = bits.next_set(0); p < n; p = bits.next_set(p + 1)) got.push_back(p);
    EXPECT_EQ(got, want);
    EXPECT_EQ(bits.next_set(n), n);
    EXPECT_EQ(PfnBitmap().next_set(0), 0u);
}

// this |= other & mask over blocks all zero, all one and mixed in each of
// the three, and copies that are independent of their original.
TEST_F(PfnBitmapTest, MergeMaskedAndCopiesMatchTheReference) {
    const uint64_t n = 9 * kCachedBits + 999;
    std::mt19937_64 rng(31);
    auto random_bitmap = [&](std::vector<bool>& ref) {
        PfnBitmap bits(n);
        ref.assign(n, false);
        for (uint64_t b = 0; b * kBlock < n; ++b) {
            const uint64_t first = b * kBlock, end = std::min(n, first + kBlock);
            switch (rng() % 3) {
                case 0: break;  // all zero
                case 1:
                    for (uint64_t p = first; p < end; ++p) {
                        bits.set(p);
                        ref[p] = true;
                    }
                    break;
                default:
                    for (uint64_t p = first + rng() % 5; p < end; p += 1 + rng() % 9) {
                        bits.set(p);
                        ref[p] = true;
                    }
            }
        }
        return bits;
    };
    std::vector<bool> r_this, r_other, r_mask;
    PfnBitmap a = random_bitmap(r_this);
    const PfnBitmap other = random_bitmap(r_other);
    const PfnBitmap mask = random_bitmap(r_mask);
    PfnBitmap copy = a;
    a.merge_masked(other, mask);
    for (uint64_t p = 0; p < n; ++p) r_this[p] = r_this[p] || (r_other[p] && r_mask[p]);
    expect_equal(a, r_this, "merged");
    std::vector<bool> r_copy = r_this;
    for (uint64_t p = 0; p < n; p += 2) {
        copy.reset(p);
        r_copy[p] = false;
    }
    expect_equal(a, r_this, "the original after its copy changed");
    PfnBitmap assigned;
    assigned = a;
    expect_equal(assigned, r_this, "assigned");
    expect_equal(other, r_other, "other, unchanged");
    expect_equal(mask, r_mask, "mask, unchanged");
}

// Const members from several threads at once (the pipeline's workers ask
// PageSelection::keep_pfn): every answer right while the threads evict
// each other's blocks.
TEST_F(PfnBitmapTest, ConcurrentReadersSeeTheBits) {
    const uint64_t n = 8 * kCachedBits;
    PfnBitmap bits(n);
    std::vector<bool> ref(n);
    std::mt19937_64 rng(5);
    for (uint64_t p = 0; p < n; p += 1 + rng() % 7) {
        bits.set(p);
        ref[p] = true;
    }
    const PfnBitmap& shared = bits;
    std::vector<uint64_t> wrong(4);
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            std::mt19937_64 r(t);
            for (int i = 0; i < 200000; ++i) {
                const uint64_t p = r() % n;
                if (shared.test(p) != ref[p]) ++wrong[t];
                if (i % 1000 == 0 && shared.next_set(p) < n && !ref[shared.next_set(p)]) ++wrong[t];
            }
        });
    for (auto& t : threads) t.join();
    EXPECT_EQ(wrong, std::vector<uint64_t>(4, 0));
}

// The heap a bitmap of 2^34 bits holds with a bit set every few million
// (each in a block of its own, so every block is mixed and stored): under
// its cache, 8 bytes per block and a little, not the 2 GiB of a bit per pfn.
TEST_F(PfnBitmapTest, HeapOfAHugeBitmapStaysUnderTheBudget) {
    const uint64_t n = uint64_t{1} << 34;
    const size_t budget = PfnBitmap::kCachedBlocks * kBlock / 8 + n / kBlock * 8 + (64 << 10);
    auto heap = [] {
        const struct mallinfo2 m = mallinfo2();
        return m.uordblks + m.hblkhd;  // arena and mmapped chunks
    };
    const size_t before = heap();
    {
        PfnBitmap bits(n);
        std::mt19937_64 rng(3);
        std::vector<uint64_t> set;
        for (uint64_t p = rng() % 5000; p < n; p += 3000000 + rng() % 1000000) {
            bits.set(p);
            set.push_back(p);
        }
        const size_t held = heap() - std::min(heap(), before);
        EXPECT_LT(held, budget + set.capacity() * sizeof(uint64_t)) << "holds " << held << " bytes";
        EXPECT_EQ(bits.count(), set.size());
        for (uint64_t p : set) ASSERT_TRUE(bits.test(p)) << p;
        EXPECT_FALSE(bits.test(set[set.size() / 2] + 1));
    }
}

}  // namespace
}  // namespace xendump::test
