// The compact writer's chunk digests held a window at a time (issue 19,
// writer/digest_table.hpp): its note area comes after the pages, at an
// offset known only then, so the windows go to an unlinked temporary file
// and are copied into NT_XEN_DIGEST; the file is the one written with the
// table held whole, and verifies.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>

#include "io/sink.hpp"
#include "kdump/encoder.hpp"
#include "mixed_pages.hpp"
#include "pipeline/pipeline.hpp"
#include "test_support.hpp"
#include "xendump/fd.hpp"
#include "xendump/kdump.hpp"
#include "xendump/reader.hpp"

namespace xendump::test {
namespace {

// A guest of compressible, incompressible and zero pages with holes: 2996
// pages, 12 digest chunks.
std::vector<PageEntry> holey_entries() {
    std::vector<PageEntry> list;
    for (uint64_t pfn = 0; pfn < 3000; ++pfn)
        if (pfn % 700 != 5) list.push_back({pfn, pfn});
    return list;
}

DumpSpec hvm_spec() {
    DumpSpec spec;
    spec.type = format::GuestType::hvm;
    spec.domain.set(keys::kDomid, "3");
    spec.domain.set(keys::kName, "windows");
    spec.domain.set(keys::kType, "hvm");
    spec.vcpus.push_back({0, std::vector<std::byte>(format::kVcpuContextSize64, std::byte{7})});
    return spec;
}

TEST(KdumpDigestWindows, SpilledDigestsGiveTheFileOfATableHeldWhole) {
    TempDir dir, spill;
    std::optional<ScopedEnv> tmpdir(std::in_place, "TMPDIR", spill.path());
    const DumpSpec spec = hvm_spec();

    MixedSource whole_src(holey_entries());
    write_kdump_file(dir / "whole", spec, whole_src, kdump_options(Compression::zstd, 2));

    MixedSource src(holey_entries());
    {
        kdump::KdumpEncoder encoder(spec, src, nullptr, Compression::zstd, true, 0, src, "windowed", 5);
        UniqueFd fd(::open((dir / "windowed").c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
        ASSERT_TRUE(fd);
        io::Sink sink(fd.get(), true, true, "windowed");
        pipeline::run({src, nullptr, {}, encoder}, sink, kdump_options(Compression::zstd, 2).write);
        EXPECT_TRUE(encoder.chunk_digests().spilled());
        EXPECT_EQ(encoder.chunk_digests().size(), 12u);
        EXPECT_LE(encoder.chunk_digests().resident_bytes(), 5u * 16);
    }
    tmpdir.reset();
    EXPECT_TRUE(std::filesystem::is_empty(spill.path())) << "the spill file has no name";
    EXPECT_TRUE(slurp(dir / "windowed") == slurp(dir / "whole")) << "digests spilled in windows change the file";
    EXPECT_TRUE(DumpReader::verify_file(dir / "windowed").empty());
}

}  // namespace
}  // namespace xendump::test
