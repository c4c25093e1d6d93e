// libdump/util: the one copy of the small helpers libdump and the programs share.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "util/runs.hpp"
#include "util/util.hpp"
#include "util/vocabulary.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"

namespace xendump::test {
namespace {

TEST(Util, HexIsLowerCaseWithAPrefixAndPadsOnlyWhenAsked) {
    EXPECT_EQ(util::hex(0), "0x0");
    EXPECT_EQ(util::hex(0xABCDEF), "0xabcdef");
    EXPECT_EQ(util::hex(~uint64_t{0}), "0xffffffffffffffff");
    EXPECT_EQ(util::hex(0x1f, 16), "0x000000000000001f");
    EXPECT_EQ(util::hex(0x123456789abcdef0, 4), "0x123456789abcdef0");
}

TEST(Util, UtcTimeFormatsInUtcWhateverTheZone) {
    // 2026-12-01 10:59:53 UTC.
    const std::time_t t = 1796122793;
    EXPECT_EQ(util::utc_time(t, "%Y-%m-%dT%H:%M:%SZ"), "2026-12-01T10:59:53Z");
    EXPECT_EQ(util::utc_time(t, "%Y%m%dT%H%M%SZ"), "20261201T105953Z");
    EXPECT_EQ(util::utc_time(std::chrono::system_clock::from_time_t(t), "%Y-%m-%d %H:%M:%S"), "2026-12-01 10:59:53");
}

// The one ELF header of a core file (the v1 writer, xen-dumpctl debug's
// vmcore, the tests' hand-built files): what readers check first.
TEST(Util, CoreElfHeaderIsAnElf64LittleEndianCoreFile) {
    for (uint16_t machine : {uint16_t{EM_X86_64}, uint16_t{EM_386}}) {
        const Elf64_Ehdr eh = util::core_elf_header(machine);
        EXPECT_EQ(std::memcmp(eh.e_ident, ELFMAG, SELFMAG), 0);
        EXPECT_EQ(eh.e_ident[EI_CLASS], ELFCLASS64);
        EXPECT_EQ(eh.e_ident[EI_DATA], ELFDATA2LSB);
        EXPECT_EQ(eh.e_ident[EI_VERSION], EV_CURRENT);
        EXPECT_EQ(eh.e_ident[EI_OSABI], ELFOSABI_NONE);
        EXPECT_EQ(eh.e_type, ET_CORE);
        EXPECT_EQ(eh.e_machine, machine);
        EXPECT_EQ(eh.e_version, EV_CURRENT);
        EXPECT_EQ(eh.e_ehsize, sizeof(Elf64_Ehdr));
        EXPECT_EQ(eh.e_phentsize, sizeof(Elf64_Phdr));
        // The rest is the caller's: no program or section headers yet.
        EXPECT_EQ(eh.e_phoff, 0u);
        EXPECT_EQ(eh.e_phnum, 0u);
        EXPECT_EQ(eh.e_shoff, 0u);
        EXPECT_EQ(eh.e_shentsize, 0u);
        EXPECT_EQ(eh.e_shnum, 0u);
    }
}

TEST(Util, FileKindNamesEachType) {
    EXPECT_STREQ(util::file_kind(S_IFREG | 0644), "a regular file");
    EXPECT_STREQ(util::file_kind(S_IFDIR | 0755), "a directory");
    EXPECT_STREQ(util::file_kind(S_IFIFO), "a FIFO");
    EXPECT_STREQ(util::file_kind(S_IFSOCK), "a socket");
    EXPECT_STREQ(util::file_kind(S_IFCHR), "a character device");
    EXPECT_STREQ(util::file_kind(S_IFBLK), "a block device");
    EXPECT_STREQ(util::file_kind(S_IFLNK), "a symbolic link");
}

TEST(Util, WriteAllAndPreadFullMoveEveryByteAndStopAtTheEnd) {
    TempDir dir;
    const std::string path = (dir.path() / "f").string();
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd);
    std::vector<char> data(300000);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
    util::write_all(fd.get(), data.data(), data.size(), path);

    std::vector<char> back(data.size());
    EXPECT_EQ(util::pread_full(fd.get(), back.data(), back.size(), 0), static_cast<long>(data.size()));
    EXPECT_EQ(back, data);
    // Past the end: what there is, then nothing.
    EXPECT_EQ(util::pread_full(fd.get(), back.data(), 1000, data.size() - 10), 10);
    EXPECT_EQ(util::pread_full(fd.get(), back.data(), 1000, data.size()), 0);
    // A descriptor not open for reading: -1 and errno.
    UniqueFd wo(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    EXPECT_EQ(util::pread_full(wo.get(), back.data(), 10, 0), -1);
    EXPECT_EQ(errno, EBADF);
}

TEST(Util, WriteAllNamesTheFileWhenAWriteFails) {
    UniqueFd ro(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(ro);
    try {
        util::write_all(ro.get(), "x", 1, "/dev/null");
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.object(), "/dev/null");
        EXPECT_EQ(e.sys_errno(), EBADF);
    }
}

// A write cut short (the file size limit here; a full disk or quota alike)
// moves what it can and says how far it got, so that the caller can name
// the offset where the file stops.
TEST(Util, WriteFullAndPwriteFullSayHowFarTheyGotWhenAWriteFails) {
    TempDir dir;
    const std::string path = (dir.path() / "f").string();
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd);
    std::vector<char> data(3 * 4096);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 13);
    {
        FileSizeLimit limit(8192);
        errno = 0;
        EXPECT_EQ(util::write_full(fd.get(), data.data(), data.size()), 8192u);
        EXPECT_EQ(errno, EFBIG);
        errno = 0;
        EXPECT_EQ(util::pwrite_full(fd.get(), data.data(), data.size(), 4096), 4096u);
        EXPECT_EQ(errno, EFBIG);
        EXPECT_EQ(util::pwrite_full(fd.get(), data.data(), 4096, 0), 4096u);  // below the limit: all of it
        // write_all throws, naming the file.
        try {
            util::write_all(fd.get(), data.data(), data.size(), path);
            FAIL() << "no error";
        } catch (const Error& e) {
            EXPECT_EQ(e.object(), path);
            EXPECT_EQ(e.sys_errno(), EFBIG);
        }
    }
    // write_full moved the file offset, pwrite_full did not.
    EXPECT_EQ(::lseek(fd.get(), 0, SEEK_CUR), 8192);
    // Without the limit: every byte, where it was meant to go.
    EXPECT_EQ(util::pwrite_full(fd.get(), data.data(), data.size(), 100000), data.size());
    std::vector<char> back(data.size());
    EXPECT_EQ(util::pread_full(fd.get(), back.data(), back.size(), 100000), static_cast<long>(data.size()));
    EXPECT_EQ(back, data);
    EXPECT_EQ(util::pread_full(fd.get(), back.data(), 4096, 4096), 4096);
    EXPECT_EQ(0, std::memcmp(back.data(), data.data(), 4096));  // the pwrite_full at 4096 before the limit
}

// The hook between tries: a sink gives up there when it was cancelled while
// a write blocked (io::Sink::cancel_on).
TEST(Util, RetryEintrRunsItsHookBeforeEachNewTryAndTheHookMayGiveUp) {
    int calls = 0, hooks = 0;
    const int r = util::retry_eintr(
        [&] {
            EXPECT_EQ(hooks, calls);  // the hook ran after each interruption, before the next try
            if (++calls < 4) {
                errno = EINTR;
                return -1;
            }
            return 7;
        },
        [&] { ++hooks; });
    EXPECT_EQ(r, 7);
    EXPECT_EQ(hooks, 3);
    calls = 0;
    EXPECT_THROW(util::retry_eintr(
                     [&] {
                         ++calls;
                         errno = EINTR;
                         return -1;
                     },
                     [&] {
                         if (calls == 2) throw Error("cancelled");
                     }),
                 Error);
    EXPECT_EQ(calls, 2);
}

TEST(Util, RetryEintrReturnsTheFirstResultThatIsNotAnInterruption) {
    int calls = 0;
    const int r = util::retry_eintr([&] {
        if (++calls < 3) {
            errno = EINTR;
            return -1;
        }
        return 5;
    });
    EXPECT_EQ(r, 5);
    EXPECT_EQ(calls, 3);
    calls = 0;
    EXPECT_EQ(util::retry_eintr([&] {
                  ++calls;
                  errno = EAGAIN;
                  return -1;
              }),
              -1);
    EXPECT_EQ(calls, 1);
}

// The one search over runs (a dump's page runs, the dumper's page extents,
// the simulator's extents): the run holding a number, none in a gap, before
// the first run or past the last; the run at or before a number.
TEST(Util, RunSearchFindsTheRunHoldingANumberAndNoneInTheGaps) {
    struct Run {
        uint64_t first, count, tag;
    };
    const std::vector<Run> runs = {{10, 5, 0}, {15, 1, 1}, {100, 50, 2}, {~uint64_t{0} - 4, 4, 3}};
    auto holding = [&](uint64_t key) -> int {
        const auto it = util::run_holding(runs, key, &Run::first, &Run::count);
        return it == runs.end() ? -1 : static_cast<int>(it->tag);
    };
    auto before = [&](uint64_t key) -> int {
        const auto it = util::run_at_or_before(runs, key, &Run::first);
        return it == runs.end() ? -1 : static_cast<int>(it->tag);
    };
    for (uint64_t k : {0ULL, 9ULL}) EXPECT_EQ(holding(k), -1) << k;
    for (uint64_t k = 10; k < 15; ++k) EXPECT_EQ(holding(k), 0) << k;
    EXPECT_EQ(holding(15), 1);
    for (uint64_t k : {16ULL, 99ULL, 150ULL, 1000ULL}) EXPECT_EQ(holding(k), -1) << k;
    EXPECT_EQ(holding(100), 2);
    EXPECT_EQ(holding(149), 2);
    EXPECT_EQ(holding(~uint64_t{0} - 5), -1);
    EXPECT_EQ(holding(~uint64_t{0} - 4), 3);
    EXPECT_EQ(holding(~uint64_t{0} - 1), 3);
    EXPECT_EQ(holding(~uint64_t{0}), -1);  // first + count would wrap: the count decides
    EXPECT_EQ(before(9), -1);
    EXPECT_EQ(before(10), 0);
    EXPECT_EQ(before(16), 1);
    EXPECT_EQ(before(99), 1);
    EXPECT_EQ(before(~uint64_t{0}), 3);
    const std::vector<Run> none;
    EXPECT_TRUE(util::run_holding(none, 5, &Run::first, &Run::count) == none.end());
    EXPECT_TRUE(util::run_at_or_before(none, 5, &Run::first) == none.end());
}

// The names each place gives a fact are the ones users already rely on
// (doc/keys.md): the journal's DOMAIN and DUMP_REASON, the note's NAME and TYPE.
TEST(Vocabulary, KeepsTheNamesEachPlaceHasAlwaysUsed) {
    EXPECT_STREQ(vocab::kDomainName.note, "NAME");
    EXPECT_STREQ(vocab::kDomainName.journal, "DOMAIN");
    EXPECT_STREQ(vocab::kDomainName.sidecar, "domain");
    EXPECT_STREQ(vocab::kGuestType.note, "TYPE");
    EXPECT_STREQ(vocab::kReason.journal, "DUMP_REASON");
    EXPECT_STREQ(vocab::kReason.note, "REASON");
    EXPECT_STREQ(vocab::kUuid.journal, "DOMAIN_UUID");
    EXPECT_STREQ(vocab::kDumpPath.sidecar, "dump_file");
    EXPECT_STREQ(vocab::kDumpPath.json, "path");
}

}  // namespace
}  // namespace xendump::test
