// io::Sink: a write that fails part way names the file and the offset where
// it stopped; a write blocked on a stalled pipe gives up when cancelled and
// interrupted, instead of waiting for a reader that never comes.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "io/sink.hpp"
#include "test_support.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"

namespace xendump::test {
namespace {

std::vector<std::byte> bytes(size_t n, uint8_t seed) {
    std::vector<std::byte> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = std::byte(static_cast<uint8_t>(i * 31 + seed));
    return v;
}

// A sink's output: a new regular file.
class SinkFile : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_TRUE(fd) << path; }
    TempDir dir;
    const std::string path = (dir / "out").string();
    UniqueFd fd{::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)};
};

// The sparse file's head lies in a hole (the file is shorter than what the
// sink wrote), so rewriting it grows the file: past the size limit the
// rewrite stops part way, and the error names the offset where it stopped.
TEST_F(SinkFile, RewriteThatFailsPartWayNamesTheFileAndTheOffsetWhereItStopped) {
    io::Sink sink(fd.get(), true, true, path);
    ASSERT_TRUE(sink.holes());
    sink.zeros(1 << 20);
    const auto head = bytes(3 * 4096, 5);
    FileSizeLimit limit(8192);
    try {
        sink.write_at(4096, head);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.object(), path);
        EXPECT_EQ(e.offset(), std::optional<uint64_t>(8192));  // 4096 bytes went in, the next ones did not
        EXPECT_EQ(e.sys_errno(), EFBIG);
        EXPECT_NE(std::string(e.what()).find("cannot rewrite the head of the file"), std::string::npos) << e.what();
    }
    EXPECT_EQ(sink.offset(), 1u << 20);  // a rewrite leaves the position
}

TEST_F(SinkFile, WriteThatFailsPartWayNamesTheFileAndTheOffsetWhereItStopped) {
    io::Sink sink(fd.get(), true, false, path);
    const auto a = bytes(4096, 1), b = bytes(3 * 4096, 2);
    FileSizeLimit limit(3 * 4096);
    sink.write(a);
    try {
        sink.write(b);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.object(), path);
        EXPECT_EQ(e.offset(), std::optional<uint64_t>(3 * 4096));
        EXPECT_EQ(e.sys_errno(), EFBIG);
    }
    EXPECT_EQ(sink.offset(), 3u * 4096);  // what did go in counts
}

void on_signal(int) {}

// The thread's state letter in /proc ('S': asleep, here in the blocked write).
char thread_state(pid_t tid) {
    std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/stat");
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = all.rfind(')');
    return at == std::string::npos || at + 2 >= all.size() ? '?' : all[at + 2];
}

// The pipe is full before the write starts, so the write blocks having
// moved nothing; the signal then makes it fail with EINTR (no SA_RESTART).
// Cancelled by then, the sink throws instead of writing again.
// Issue 36 item 4: `xen-dumpd -o - | head` names the output as standard
// output and says that the reader went away, with the offset, not only
// "Broken pipe".
TEST(Sink, AWriteToAPipeWhoseReaderLeftSaysTheReaderWentAway) {
    struct sigaction ignore {}, old {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    ASSERT_EQ(::sigaction(SIGPIPE, &ignore, &old), 0);
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    UniqueFd read_end(p[0]), write_end(p[1]);
    io::Sink sink(write_end.get(), false, false, io::fd_name(STDOUT_FILENO));
    const auto data = bytes(4096, 5);
    sink.write(data);
    read_end.reset();
    std::string what = "no error";
    try {
        sink.write(data);
    } catch (const Error& e) {
        what = e.what();
    }
    ::sigaction(SIGPIPE, &old, nullptr);
    EXPECT_NE(what.find("standard output"), std::string::npos) << what;
    EXPECT_NE(what.find("the reader went away"), std::string::npos) << what;
    EXPECT_NE(what.find("0x1000"), std::string::npos) << what;
    EXPECT_EQ(io::fd_name(3), "fd 3");
}

TEST(Sink, WriteBlockedOnAFullPipeGivesUpWhenCancelledAndInterrupted) {
    struct sigaction sa {}, old {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: the blocked write returns EINTR
    ASSERT_EQ(::sigaction(SIGUSR1, &sa, &old), 0);

    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    UniqueFd read_end(p[0]), write_end(p[1]);
    std::atomic<bool> cancel{false};
    io::Sink sink(write_end.get(), false, false, "pipe");
    sink.cancel_on(&cancel);
    // Fill the pipe (at the size the sink gave it).
    const int flags = ::fcntl(write_end.get(), F_GETFL);
    ASSERT_EQ(::fcntl(write_end.get(), F_SETFL, flags | O_NONBLOCK), 0);
    const auto chunk = bytes(4096, 3);
    while (::write(write_end.get(), chunk.data(), chunk.size()) > 0) {
    }
    ASSERT_EQ(errno, EAGAIN);
    ASSERT_EQ(::fcntl(write_end.get(), F_SETFL, flags), 0);

    std::atomic<pid_t> tid{0};
    std::atomic<bool> done{false};
    std::string outcome = "no error";
    std::thread writer([&] {
        tid = static_cast<pid_t>(::syscall(SYS_gettid));
        try {
            sink.write(chunk);
        } catch (const Error& e) {
            outcome = e.what();
        }
        done = true;
    });
    // Wait until the writer sleeps in its write, then cancel and interrupt it.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while ((tid == 0 || thread_state(tid) != 'S') && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    cancel = true;
    const pthread_t handle = writer.native_handle();
    for (int i = 0; i < 200 && !done; ++i) {
        ::pthread_kill(handle, SIGUSR1);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const bool gave_up = done;
    if (!gave_up) {
        // The sink wrote again after the signal: drain the pipe so that the
        // write ends, and fail.
        std::vector<std::byte> sink_hole(1 << 16);
        ::fcntl(read_end.get(), F_SETFL, O_NONBLOCK);
        while (!done) {
            (void)!::read(read_end.get(), sink_hole.data(), sink_hole.size());
        }
    }
    writer.join();
    ::sigaction(SIGUSR1, &old, nullptr);
    EXPECT_TRUE(gave_up) << "the write waited for a reader after it was cancelled";
    EXPECT_NE(outcome.find("cancelled"), std::string::npos) << outcome;
    EXPECT_EQ(sink.offset(), 0u);
}

}  // namespace
}  // namespace xendump::test
