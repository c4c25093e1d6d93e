// The legacy converter's out-of-core pieces (issue 19): records spilled to a
// temporary file, the external sort over several runs, the bitmap whose
// pages exist only where a bit is set, the page list kept as runs, and the
// index sorted by MFN.
#include <gtest/gtest.h>

#include <random>

#include "legacy/page_table.hpp"
#include "legacy/pfn_map.hpp"
#include "legacy/spill.hpp"
#include "legacy/xc_core.hpp"
#include "xendump/error.hpp"

namespace xendump::legacy {
namespace {

struct Pair {
    uint64_t key, value;
};

TEST(RecordFile, ReadsBackWhatWasPushedAcrossTheSpill) {
    RecordFile<Pair> f;
    const uint64_t n = 3 * RecordFile<Pair>::kBuffer + 17;
    for (uint64_t i = 0; i < n; ++i) f.push({i, i * 3});
    EXPECT_TRUE(f.on_disk());
    ASSERT_EQ(f.size(), n);
    std::vector<Pair> w(1000);
    for (uint64_t first : {uint64_t{0}, RecordFile<Pair>::kBuffer - 500, n - 1000}) {
        f.read(first, w);
        for (size_t k = 0; k < w.size(); ++k) {
            ASSERT_EQ(w[k].key, first + k);
            ASSERT_EQ(w[k].value, (first + k) * 3);
        }
    }
}

TEST(ExternalSorter, SortsMoreThanOneRunLikeStdSort) {
    auto less = [](const Pair& a, const Pair& b) { return a.key != b.key ? a.key < b.key : a.value < b.value; };
    ExternalSorter<Pair, decltype(less)> sorter(less);
    const size_t n = 2 * (ExternalSorter<Pair, decltype(less)>::kRunBytes / sizeof(Pair)) + 12345;  // three runs
    std::mt19937_64 rng(5);
    std::vector<Pair> all(n);
    for (auto& p : all) {
        p = {rng() % 100000, rng()};
        sorter.push(p);
    }
    std::sort(all.begin(), all.end(), less);
    size_t i = 0;
    bool same = true;
    sorter.drain([&](const Pair& p) {
        same = same && i < n && p.key == all[i].key && p.value == all[i].value;
        ++i;
    });
    EXPECT_TRUE(same);
    EXPECT_EQ(i, n);
}

TEST(SparseBitmap, SetsTestsAndClearsOverAHugeRange) {
    SparseBitmap b(1000, uint64_t{1} << 36);  // 8 GiB of address space, almost none of it used
    EXPECT_FALSE(b.test(999));
    EXPECT_FALSE(b.test(1000));
    EXPECT_FALSE(b.test_and_set(1000));
    EXPECT_TRUE(b.test_and_set(1000));
    EXPECT_FALSE(b.test_and_set(1000 + (uint64_t{1} << 35)));
    EXPECT_TRUE(b.test(1000 + (uint64_t{1} << 35)));
    EXPECT_FALSE(b.test(1000 + (uint64_t{1} << 36)));  // past the range
    b.clear();
    EXPECT_FALSE(b.test(1000));
}

// Entries that break runs every few pages, past one block of runs: every
// entry and every pfn found again.
TEST(PageTable, RunsGiveBackEveryEntryAndPfn) {
    PageTable::Builder b;
    std::vector<PageEntry> entries;
    std::vector<uint64_t> slots;
    uint64_t pfn = 3, gmfn = 100, slot = 50;
    for (uint64_t i = 0; i < 20000; ++i) {
        entries.push_back({pfn, gmfn});
        slots.push_back(slot);
        b.add(pfn, gmfn, slot);
        ++pfn, ++gmfn, ++slot;
        if (i % 3 == 0) pfn += 2;           // a pfn hole
        if (i % 7 == 0) gmfn += 1000;       // another extent
        if (i % 11 == 0) slot = 1000000 - slot;  // out of slot order
    }
    const auto t = b.finish();
    ASSERT_EQ(t->size(), entries.size());
    EXPECT_GT(t->nr_runs(), 4096u);
    EXPECT_LT(t->nr_runs(), entries.size());
    std::vector<PageEntry> got(entries.size());
    std::vector<uint64_t> got_slots(entries.size());
    t->read(0, got, got_slots);
    for (size_t i = 0; i < entries.size(); ++i) {
        ASSERT_EQ(got[i].pfn, entries[i].pfn) << i;
        ASSERT_EQ(got[i].gmfn, entries[i].gmfn) << i;
        ASSERT_EQ(got_slots[i], slots[i]) << i;
        ASSERT_EQ(t->index_of_pfn(entries[i].pfn), std::optional<uint64_t>(i));
    }
    EXPECT_FALSE(t->index_of_pfn(0).has_value());
    EXPECT_FALSE(t->index_of_pfn(entries[0].pfn + 1).has_value());  // hole after entry 0
    EXPECT_FALSE(t->index_of_pfn(entries.back().pfn + 1).has_value());
    EXPECT_EQ(t->slot(12345), slots[12345]);
    EXPECT_THROW(t->read(entries.size() - 1, std::span(got).first(2)), Error);
}

// The index sorted by MFN: every slot found from its MFN, ~0 left out, the
// first duplicate reported as the in-memory table reports it.
TEST(MfnIndex, FindsEverySlotAndTheFirstDuplicate) {
    std::vector<uint64_t> index;
    for (uint64_t s = 0; s < 100000; ++s) index.push_back(s % 5 == 4 ? ~uint64_t{0} : (s * 7919) % 1000003 + 77);
    auto bytes = std::as_bytes(std::span(index));
    MemoryByteSource src(bytes, "mem");
    MfnIndex m;
    EXPECT_FALSE(MfnIndex::build(IndexTable(src, 0, index.size(), 8), m).has_value());
    EXPECT_EQ(m.size(), 80000u);
    for (uint64_t s = 0; s < index.size(); ++s) {
        if (index[s] == ~uint64_t{0}) continue;
        ASSERT_TRUE(m.contains(index[s]));
        ASSERT_EQ(m.slot_of(index[s]), std::optional<uint64_t>(s));
    }
    EXPECT_FALSE(m.contains(76));
    EXPECT_FALSE(m.slot_of(~uint64_t{0}).has_value());

    index[9000] = index[70000];
    index[500] = index[2];
    index[600] = index[2];
    bytes = std::as_bytes(std::span(index));
    MemoryByteSource src2(bytes, "mem");
    const auto dup = MfnIndex::build(IndexTable(src2, 0, index.size(), 8), m);
    ASSERT_TRUE(dup.has_value());
    EXPECT_EQ(dup->mfn, index[2]);
    EXPECT_EQ(dup->first_slot, 2u);
    EXPECT_EQ(dup->second_slot, 500u);
}

TEST(MfnIndex, RefusesAFramePastThePhysicalAddressSpace) {
    std::vector<uint64_t> index = {5, uint64_t{1} << 41, 6};
    MemoryByteSource src(std::as_bytes(std::span(index)), "mem");
    MfnIndex m;
    try {
        MfnIndex::build(IndexTable(src, 0, index.size(), 8), m);
        ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.object(), "mem");
        EXPECT_EQ(e.offset(), std::optional<uint64_t>(8));
    }
}

}  // namespace
}  // namespace xendump::legacy
