// Atomic publication: nothing under the final name (nor a leftover
// temporary) unless the whole file was written and committed.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "dump_check.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/reader.hpp"
#include "xendump/writer.hpp"

namespace xendump::test {
namespace {

using format::GuestType;

std::vector<uint64_t> first_pfns(uint64_t n) {
    std::vector<uint64_t> v(n);
    for (uint64_t i = 0; i < n; ++i) v[i] = i;
    return v;
}

// Fails (like a domain that died) after `good_calls` batches.
class FailingSource : public PatternPageSource {
public:
    FailingSource(std::vector<PageEntry> e, int good_calls) : PatternPageSource(std::move(e)), left_(good_calls) {}
    void read_pages(size_t first, size_t count, std::span<std::byte> out, std::span<uint8_t> bad) override {
        if (left_-- <= 0) throw Error("domain vanished", "domain 7");
        PatternPageSource::read_pages(first, count, out, bad);
    }

private:
    int left_;
};

std::string read_text(const std::filesystem::path& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(AtomicFile, FailingSourceLeavesNothing) {
    TempDir dir;
    const DumpSpec spec = make_spec(GuestType::pv, 8, 1);
    FailingSource source(entries_for(first_pfns(5000), GuestType::pv), 2);
    EXPECT_THROW(write_dump_file(dir / "dump", spec, source), Error);
    EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(AtomicFile, ExistingFinalNameIsAnErrorAndUntouched) {
    TempDir dir;
    { std::ofstream(dir / "dump") << "precious"; }
    const DumpSpec spec = make_spec(GuestType::pv, 8, 1);
    PatternPageSource source(entries_for(first_pfns(10), GuestType::pv));
    EXPECT_THROW(write_dump_file(dir / "dump", spec, source), Error);
    EXPECT_EQ(read_text(dir / "dump"), "precious");
    size_t entries = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
    EXPECT_EQ(entries, 1u);
}

TEST(AtomicFile, NameTakenDuringTheWriteIsNotReplaced) {
    TempDir dir;
    AtomicFile f(dir / "x");
    ASSERT_EQ(::write(f.fd(), "new", 3), 3);
    { std::ofstream(dir / "x") << "old"; }
    EXPECT_THROW(f.commit(), Error);
    EXPECT_EQ(read_text(dir / "x"), "old");
}

TEST(AtomicFile, UncommittedLeavesNothingCommittedAppearsWithMode0600) {
    TempDir dir;
    {
        AtomicFile f(dir / "a");
        ASSERT_EQ(::write(f.fd(), "abc", 3), 3);
        EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
    }
    EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
    {
        AtomicFile f(dir / "b");
        ASSERT_EQ(::write(f.fd(), "abc", 3), 3);
        f.commit();
    }
    EXPECT_EQ(read_text(dir / "b"), "abc");
    struct stat st {};
    ASSERT_EQ(::stat((dir / "b").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    size_t entries = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
    EXPECT_EQ(entries, 1u);
}

TEST(AtomicFile, CheckSeesTheWholeFileAndARejectedOneIsNeverPublished) {
    TempDir dir;
    const DumpSpec spec = make_spec(GuestType::pv, 8, 1);
    PatternPageSource source(entries_for(first_pfns(3000), GuestType::pv));
    WriteOptions wo;
    std::string seen;
    wo.check_before_publish = [&](const std::filesystem::path& p, const VerifyOptions&) {
        EXPECT_FALSE(std::filesystem::exists(dir / "good"));  // not yet published
        seen = read_text(p);
    };
    const WriteResult r = write_dump_file(dir / "good", spec, source, wo);
    EXPECT_EQ(seen.size(), r.file_size);
    EXPECT_EQ(seen, read_text(dir / "good"));

    wo.check_before_publish = [](const std::filesystem::path&, const VerifyOptions&) { throw Error("rejected by the check"); };
    try {
        write_dump_file(dir / "bad", spec, source, wo);
        ADD_FAILURE() << "a rejected file was published";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("rejected by the check"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(dir / "bad"));
    size_t entries = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
    EXPECT_EQ(entries, 1u);  // "good" only: no temporary left behind
}

// Without /proc an unnamed temporary cannot be reopened for the check: the
// check then reads the published file, and one it rejects is removed. Run in
// a child with a mount namespace of its own, /proc hidden under a tmpfs.
TEST(AtomicFile, WithoutProcTheCheckReadsThePublishedFileAndARejectedOneIsRemoved) {
    TempDir dir;
    const DumpSpec spec = make_spec(GuestType::pv, 8, 1);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
            ::mount("none", "/proc", "tmpfs", 0, nullptr) != 0)
            ::_exit(77);  // not allowed here: skipped
        if (::access("/proc/self/fd", F_OK) == 0) ::_exit(78);
        try {
            PatternPageSource source(entries_for(first_pfns(300), GuestType::pv));
            WriteOptions wo;
            std::filesystem::path seen;
            bool published_when_checked = false;
            wo.check_before_publish = [&](const std::filesystem::path& p, const VerifyOptions&) {
                seen = p;
                published_when_checked = std::filesystem::exists(dir / "good");
            };
            write_dump_file(dir / "good", spec, source, wo);
            if (seen != dir / "good" || !published_when_checked) ::_exit(1);
            wo.check_before_publish = [](const std::filesystem::path&, const VerifyOptions&) {
                throw Error("rejected by the check");
            };
            try {
                write_dump_file(dir / "bad", spec, source, wo);
                ::_exit(2);  // a rejected file was reported as written
            } catch (const Error& e) {
                if (std::string(e.what()).find("rejected by the check") == std::string::npos) ::_exit(3);
            }
            ::_exit(std::filesystem::exists(dir / "bad") ? 4 : 0);
        } catch (...) {
            ::_exit(5);  // never back into the test runner in the child
        }
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot hide /proc here (needs CAP_SYS_ADMIN)";
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: checked an unpublished path, 2: rejected file published, "
                                         "3: another error, 4: rejected file left, 5: unexpected exception, "
                                         "78: /proc still there";
    EXPECT_TRUE(std::filesystem::exists(dir / "good"));
    EXPECT_FALSE(std::filesystem::exists(dir / "bad"));
}

// A device that runs out of room under the filesystem (a thin volume, here an
// ext4 image on a loop device backed by a file on a tmpfs smaller than it):
// the filesystem accepts the writes, writing them back fails. The write
// fails with an error naming the output, and nothing is published.
class ThinVolume {
public:
    explicit ThinVolume(const std::filesystem::path& dir) : backing_(dir / "backing"), mnt_(dir / "mnt") {
        std::filesystem::create_directories(backing_);
        std::filesystem::create_directories(mnt_);
        if (!ok({"/usr/bin/mount", "-t", "tmpfs", "-o", "size=24m", "none", backing_.string()})) return;
        tmpfs_ = true;
        const auto image = (backing_ / "image").string();
        if (!ok({"/usr/bin/truncate", "-s", "256M", image})) return;
        auto r = run({"/usr/sbin/losetup", "-f", "--show", image});
        if (r.exit_code != 0) return;
        loop_ = r.out.substr(0, r.out.find('\n'));
        if (!ok({"/usr/sbin/mkfs.ext4", "-q", loop_}) || !ok({"/usr/bin/mount", loop_, mnt_.string()})) return;
        mounted_ = true;
    }
    ~ThinVolume() {
        if (mounted_) ok({"/usr/bin/umount", mnt_.string()});
        if (!loop_.empty()) ok({"/usr/sbin/losetup", "-d", loop_});
        if (tmpfs_) ok({"/usr/bin/umount", backing_.string()});
    }
    bool ready() const { return mounted_; }
    const std::filesystem::path& mount_point() const { return mnt_; }

private:
    static bool ok(const std::vector<std::string>& argv) { return run(argv).exit_code == 0; }
    std::filesystem::path backing_, mnt_;
    std::string loop_;
    bool tmpfs_ = false, mounted_ = false;
};

TEST(AtomicFile, DeviceOutOfRoomUnderTheFilesystemFailsTheWriteAndPublishesNothing) {
    if (::geteuid() != 0 || !std::filesystem::exists("/usr/sbin/losetup") ||
        !std::filesystem::exists("/usr/sbin/mkfs.ext4"))
        GTEST_SKIP() << "needs root, losetup and mkfs.ext4";
    TempDir dir;
    ThinVolume volume(dir.path());
    if (!volume.ready()) GTEST_SKIP() << "cannot set up a loop device here";
    const auto out = volume.mount_point() / "d.core";
    PatternPageSource source(entries_for(first_pfns(32768), GuestType::pv));  // 128 MiB on 24 MiB
    try {
        write_dump_file(out, make_spec(GuestType::pv, 8, 1), source);
        ADD_FAILURE() << "a write that did not reach the device succeeded";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(out.string()), std::string::npos) << e.what();
        EXPECT_NE(e.sys_errno(), 0) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(out));
}

// Blocks forever on its second batch after telling the parent it got there.
class StallingSource : public PatternPageSource {
public:
    StallingSource(std::vector<PageEntry> e, int fd) : PatternPageSource(std::move(e)), fd_(fd) {}
    void read_pages(size_t first, size_t count, std::span<std::byte> out, std::span<uint8_t> bad) override {
        if (first > 0) {
            char c = 'x';
            if (::write(fd_, &c, 1) != 1) _exit(3);
            for (;;) ::pause();
        }
        PatternPageSource::read_pages(first, count, out, bad);
    }

private:
    int fd_;
};

TEST(AtomicFile, KillDuringTheWriteLeavesNothing) {
    TempDir dir;
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::close(p[0]);
        try {
            const DumpSpec spec = make_spec(GuestType::pv, 8, 1);
            StallingSource source(entries_for(first_pfns(4000), GuestType::pv), p[1]);
            write_dump_file(dir / "dump", spec, source);
        } catch (...) {
        }
        _exit(2);
    }
    ::close(p[1]);
    char c = 0;
    ASSERT_EQ(::read(p[0], &c, 1), 1);  // the child is inside the page pass
    ::close(p[0]);
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status));
    EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace xendump::test
