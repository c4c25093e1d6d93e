// Issue 32.4: every trailer layout v1 allows (xen-dump-core(5) "Trailer
// notes": the specification's first one and today's reserved room) verifies
// and reads page for page, for each kind of guest, with and without
// unreadable pages, and with more than 65535 program headers (PN_XNUM). The
// files come from spec_writer, an independent writer of the specification's
// text; the project's reader and xen-dumpctl read them.
#include <gtest/gtest.h>

#include <elf.h>

#include <tuple>

#include "../reader/findings.hpp"
#include "spec_writer.hpp"
#include "test_support.hpp"
#include "xendump/reader.hpp"

namespace xendump::test::compat {
namespace {

using Case = std::tuple<Trailer, Guest, bool /*unreadable*/, bool /*pn_xnum*/>;

SpecFile spec_of(const Case& c) {
    const auto [trailer, guest, unreadable, xnum] = c;
    SpecFile s;
    s.guest = guest;
    s.trailer = trailer;
    // 600 pages: three digest chunks, the last one short. PN_XNUM: 65535
    // one-page runs, 65536 program headers; a pattern on one page in 64.
    s.entries = xnum ? single_page_runs(65535, guest) : sample_entries(600, guest);
    if (xnum) s.pattern_every = 128;  // pfns are even: one page in 64
    s.seed = 11 + static_cast<uint64_t>(guest);
    if (unreadable) {
        const auto& e = s.entries;
        s.unreadable = {e[1].pfn, e[e.size() / 2].pfn, e.back().pfn};
    }
    return s;
}

// The reader gives back, page for page, what the writer wrote.
void expect_pages(const SpecFile& spec, const std::filesystem::path& p) {
    auto r = DumpReader::open(p);
    EXPECT_EQ(r.format(), FileFormat::v1);
    EXPECT_EQ(r.nr_pages(), spec.entries.size());
    EXPECT_EQ(r.guest_width(), spec.guest == Guest::pv32 ? 4u : 8u);
    const auto want_type = spec.guest == Guest::hvm   ? format::GuestType::hvm
                           : spec.guest == Guest::pvh ? format::GuestType::pvh
                                                      : format::GuestType::pv;
    EXPECT_EQ(r.type(), want_type);
    EXPECT_EQ(r.has_digests(), spec.digests);
    EXPECT_EQ(r.unreadable_pfns(), spec.unreadable);
    EXPECT_EQ(r.vcpus().size(), spec.nr_vcpus);
    std::vector<std::byte> want(4096), got(4096), by_gmfn(4096);
    uint64_t differ = 0;
    for (const auto& e : spec.entries) {
        if (std::binary_search(spec.unreadable.begin(), spec.unreadable.end(), e.pfn))
            std::fill(want.begin(), want.end(), std::byte{0});
        else
            guest_page(spec, e.pfn, want);
        ASSERT_TRUE(r.read_page_by_pfn(e.pfn, got)) << "pfn " << e.pfn;
        ASSERT_TRUE(r.read_page_by_gmfn(e.gmfn, by_gmfn)) << "gmfn " << e.gmfn;
        if (got != want || by_gmfn != want) ++differ;
    }
    EXPECT_EQ(differ, 0u) << "pages that differ from what was written";
    // A pfn the writer left out is not in the dump (§2: never stored as zeros).
    EXPECT_FALSE(r.read_page_by_pfn(spec.entries.back().pfn + 1, got));
}

class TrailerLayouts : public ::testing::TestWithParam<Case> {
protected:
    TempDir dir_;
};

TEST_P(TrailerLayouts, VerifiesAndReadsPageForPage) {
    const SpecFile spec = spec_of(GetParam());
    const auto p = dir_ / "compat.core";
    const Written w = write_spec_file(spec, p);
    if (std::get<3>(GetParam())) {
        ASSERT_EQ(read_value<uint16_t>(p, offsetof(Elf64_Ehdr, e_phnum)), PN_XNUM);
        ASSERT_EQ(w.phnum, 65536u);
    }
    const auto fs = DumpReader::verify_file(p);
    EXPECT_TRUE(fs.empty()) << describe(fs);
    expect_pages(spec, p);
    if (!std::get<3>(GetParam())) {  // and through the operator's tool
        auto v = run({"xen-dumpctl", "verify", "--quiet", p.string()});
        EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
    }
}

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
    const auto [trailer, guest, unreadable, xnum] = i.param;
    return std::string(name_of(trailer)) + "_" + name_of(guest) + (unreadable ? "_unreadable" : "_allread") +
           (xnum ? "_pnxnum" : "");
}

INSTANTIATE_TEST_SUITE_P(Compat, TrailerLayouts,
                         ::testing::Combine(::testing::Values(Trailer::first_spec, Trailer::reserved_room),
                                            ::testing::Values(Guest::pv64, Guest::pv32, Guest::hvm, Guest::pvh),
                                            ::testing::Bool(), ::testing::Bool()),
                         case_name);

// The first specification without digests: a trailer of NT_XEN_UNREADABLE
// alone, or (every page read) no trailer section at all. It is a file
// without digests: digests-absent unless allowed, nothing else.
class FirstSpecNoDigests : public ::testing::TestWithParam<std::tuple<Guest, bool>> {
protected:
    TempDir dir_;
};

TEST_P(FirstSpecNoDigests, VerifiesWhenAllowed) {
    SpecFile spec = spec_of({Trailer::first_spec, std::get<0>(GetParam()), std::get<1>(GetParam()), false});
    spec.digests = false;
    const auto p = dir_ / "compat.core";
    const Written w = write_spec_file(spec, p);
    EXPECT_EQ(w.trailer_size == 0, spec.unreadable.empty());
    VerifyOptions allow;
    allow.allow_no_digests = true;
    const auto fs = DumpReader::verify_file(p, allow);
    EXPECT_TRUE(fs.empty()) << describe(fs);
    const auto strict = DumpReader::verify_file(p);
    ASSERT_EQ(strict.size(), 1u) << describe(strict);
    EXPECT_EQ(strict[0].check, "digests-absent");
    expect_pages(spec, p);
}

INSTANTIATE_TEST_SUITE_P(Compat, FirstSpecNoDigests,
                         ::testing::Combine(::testing::Values(Guest::pv64, Guest::pv32, Guest::hvm, Guest::pvh),
                                            ::testing::Bool()),
                         [](const auto& i) {
                             return std::string(name_of(std::get<0>(i.param))) +
                                    (std::get<1>(i.param) ? "_unreadable" : "_allread");
                         });

}  // namespace
}  // namespace xendump::test::compat
