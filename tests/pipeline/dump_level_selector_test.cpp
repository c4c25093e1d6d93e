// The select stage for dump levels (pipeline/dump_level_selector.hpp): the
// pages the pipeline hands its observers and encoder are those
// kernel::select_pages() keeps on the real guest RAM fixture, page by page
// (PageSelection::keep_page), whatever the number of threads.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "guest_ram.hpp"
#include "io/sink.hpp"
#include "pipeline/dump_level_selector.hpp"
#include "pipeline/kernel_observer.hpp"
#include "pipeline/pipeline.hpp"
#include "xendump/fd.hpp"
#include "xendump/kernel/dump_level.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"

namespace xendump::test {
namespace {

// The fixture's RAM, with the pfns in `unreadable` read as unreadable
// (zeros, as a source leaves them).
class RamWithBadPages final : public RamPageSource {
public:
    using RamPageSource::RamPageSource;
    void read_pages(size_t first, size_t count, std::span<std::byte> out, std::span<uint8_t> bad) override {
        RamPageSource::read_pages(first, count, out, bad);
        for (size_t i = 0; i < count; ++i)
            if (std::binary_search(unreadable.begin(), unreadable.end(), entries()[first + i].pfn)) {
                bad[i] = 1;
                std::fill_n(out.begin() + static_cast<std::ptrdiff_t>(i * 4096), 4096, std::byte{0});
            }
    }
    std::vector<uint64_t> unreadable;  // sorted
};

// Records the pfns of the pages it is handed.
class Kept final : public pipeline::PageObserver {
public:
    void observe(const pipeline::PageBatch& b) override {
        for (size_t i = 0; i < b.count; ++i)
            if (b.keep[i]) pfns.push_back(b.pfn(i));
    }
    std::vector<uint64_t> pfns;
};

// Writes nothing: the pipeline's stages before it are under test.
class NoEncoder final : public pipeline::Encoder {
public:
    bool needs_zero_flags(const io::Sink&) const override { return false; }
    void begin(io::Sink&) override {}
    void write(pipeline::PageBatch&, io::Sink&) override {}
    void finish(const pipeline::PassOutcome& pass, const pipeline::FoundNotes&, io::Sink&) override { kept = pass.pages_kept; }
    uint64_t kept = 0;
};

std::vector<uint64_t> run_selected(PageSource& source, const pipeline::PageSelector& select, unsigned threads) {
    UniqueFd null(::open("/dev/null", O_WRONLY | O_CLOEXEC));
    if (!null) throw std::runtime_error("cannot open /dev/null");
    io::Sink sink(null.get(), false, false, "/dev/null");
    Kept kept;
    NoEncoder encoder;
    WriteOptions opt;
    opt.threads = threads;
    pipeline::run({source, &select, {&kept}, encoder}, sink, opt);
    EXPECT_EQ(encoder.kept, kept.pfns.size());
    return kept.pfns;
}

kernel::PageSelection fixture_selection(PageSource& source, unsigned level) {
    kernel::DumpLevelInput in;
    in.present = kernel::borrowed(source);
    in.reader = ram_reader(guest_ram());
    in.vmcoreinfo = &fixture_vmcoreinfo();
    kernel::PageSelection s = kernel::select_pages(in, level);
    EXPECT_EQ(s.level, level);
    return s;
}

std::span<const std::byte> ram_page(uint64_t pfn) { return guest_ram().subspan(pfn * 4096, 4096); }

TEST(DumpLevelSelector, KeepsThePagesSelectPagesKeepsAtLevel31) {
    RamWithBadPages source(guest_ram());
    const kernel::PageSelection selection = fixture_selection(source, 31);
    std::vector<uint64_t> want;
    uint64_t zero_kept = 0;
    for (const PageEntry& e : source.entries()) {
        if (!selection.keep_pfn(e.pfn)) continue;
        want.push_back(e.pfn);
        if (kernel::is_zero_page(ram_page(e.pfn))) ++zero_kept;
    }
    // struct page flags drop pages of this guest; its zero pages stay (a
    // compact file points them at its shared zero page: xen-dump-core(5)).
    ASSERT_LT(want.size(), source.entries().size());
    ASSERT_GT(zero_kept, 0u);

    const pipeline::DumpLevelSelector select(selection);
    EXPECT_FALSE(select.needs_zero_flags());  // decided by pfn: no page read
    for (unsigned threads : {1u, 3u}) EXPECT_EQ(run_selected(source, select, threads), want) << threads << " threads";
}

TEST(DumpLevelSelector, LevelBitOneKeepsZeroPagesAndUnreadablePages) {
    RamWithBadPages source(guest_ram());
    const kernel::PageSelection selection = fixture_selection(source, kernel::kExcludeFree);
    std::vector<uint64_t> want;
    for (const PageEntry& e : source.entries())
        if (selection.keep_pfn(e.pfn)) want.push_back(e.pfn);
    ASSERT_LT(want.size(), source.entries().size());  // free pages go
    const pipeline::DumpLevelSelector select(selection);
    EXPECT_FALSE(select.needs_zero_flags());
    EXPECT_EQ(run_selected(source, select, 2), want);

    // Level 1 on the same pages: nothing more goes, not the zero pages, not
    // the unreadable ones (read as zeros).
    kernel::PageSelection zeros_only = selection;
    zeros_only.level = kernel::kExcludeZero;
    for (uint64_t pfn : {want.front(), want.back()}) source.unreadable.push_back(pfn);
    const auto zero_at = std::find_if(want.begin() + 1, want.end() - 1, [](uint64_t pfn) {
        return kernel::is_zero_page(ram_page(pfn));
    });
    ASSERT_NE(zero_at, want.end() - 1);
    const auto kept = run_selected(source, pipeline::DumpLevelSelector(zeros_only), 2);
    EXPECT_EQ(kept, want);
    EXPECT_TRUE(std::binary_search(kept.begin(), kept.end(), *zero_at));
}

// Counts the pages read.
class CountingRam final : public RamPageSource {
public:
    using RamPageSource::RamPageSource;
    void read_pages(size_t first, size_t count, std::span<std::byte> out, std::span<uint8_t> bad) override {
        pages += count;
        RamPageSource::read_pages(first, count, out, bad);
    }
    uint64_t pages = 0;
};

// The scan before a live level dump (pipeline::find_vmcoreinfo) ends once
// the text it holds is witnessed by init_uts_ns and seen in both forms, and
// chooses what the full scan (kernel::find_vmcoreinfo) chooses.
TEST(DumpLevelSelector, VmcoreinfoScanEndsAtAWitnessedTextInBothForms) {
    CountingRam source(guest_ram());
    const auto full = kernel::find_vmcoreinfo(source);
    ASSERT_TRUE(full);
    ASSERT_TRUE(full->witnessed);
    ASSERT_TRUE(full->confirmed_by_note);
    const uint64_t all = source.pages;
    source.pages = 0;
    const auto found = pipeline::find_vmcoreinfo(source);
    ASSERT_TRUE(found);
    EXPECT_EQ(found->info.text(), full->info.text());
    EXPECT_EQ(found->pfn, full->pfn);
    EXPECT_TRUE(found->witnessed);
    EXPECT_TRUE(found->confirmed_by_note);
    EXPECT_FALSE(found->ambiguous);
    // The fixture's two copies lie below pfn 21504 of 32768: the scan
    // stops after the batch of 1024 pages that holds the second.
    EXPECT_LT(source.pages, all - 10000) << "read " << source.pages << " pages of " << source.entries().size();
}

}  // namespace
}  // namespace xendump::test
