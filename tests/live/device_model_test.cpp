// Issue 35 item 2: a consistent live dump of an HVM guest tells its device
// model (QEMU, through libxl's QMP socket qmp-libxl-DOMID) to mark the pages
// its emulated devices write, and to stop after the final round or on any
// error; a device model that refuses refuses the dump (log-dirty off again);
// PVH guests have none and are not asked. The device model here is a QMP
// server on a thread of the test, in XEN_DUMP_QMP_DIR.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dump/device_model_dirty_log.hpp"
#include "live_support.hpp"
#include "xendump/dumper.hpp"
#include "xendump/error.hpp"
#include "xendump/reader.hpp"

namespace xendump::test::live {
namespace {

using test::sim::Host;

// A QMP server on `path`: greets, answers each command with "return" (or,
// for xen-set-global-dirty-log with enable true, `enable_answer`), with an
// event line before each answer, and records the commands it got.
class FakeQmp {
public:
    FakeQmp(std::filesystem::path path, std::string enable_answer = R"({"return": {}})")
        : path_(std::move(path)), enable_answer_(std::move(enable_answer)) {
        fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strncpy(a.sun_path, path_.c_str(), sizeof(a.sun_path) - 1);
        if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd_, 4) != 0)
            throw std::runtime_error("fake QMP: cannot listen on " + path_.string());
        thread_ = std::thread([this] { serve(); });
    }
    ~FakeQmp() {
        stop_ = true;
        ::shutdown(fd_, SHUT_RDWR);
        ::close(fd_);
        thread_.join();
        std::filesystem::remove(path_);
    }
    std::vector<std::string> commands() {
        std::lock_guard lock(mutex_);
        return commands_;
    }

private:
    void say(int c, const std::string& line) {
        const std::string l = line + "\r\n";
        (void)!::write(c, l.data(), l.size());
    }
    void serve() {
        while (!stop_) {
            const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (c < 0) return;
            say(c, R"({"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}}, "capabilities": []}})");
            std::string buf;
            char chunk[512];
            for (;;) {
                const ssize_t n = ::read(c, chunk, sizeof(chunk));
                if (n <= 0) break;
                buf.append(chunk, static_cast<size_t>(n));
                for (size_t nl; (nl = buf.find('\n')) != std::string::npos;) {
                    const auto j = nlohmann::json::parse(buf.substr(0, nl), nullptr, false);
                    buf.erase(0, nl + 1);
                    std::string cmd = j.is_object() ? j.value("execute", std::string("?")) : std::string("?");
                    if (j.is_object() && j.contains("arguments")) cmd += " " + j["arguments"].dump();
                    {
                        std::lock_guard lock(mutex_);
                        commands_.push_back(cmd);
                    }
                    say(c, R"({"event": "RTC_CHANGE", "data": {"offset": 0}, "timestamp": {"seconds": 1, "microseconds": 2}})");
                    say(c, cmd == R"(xen-set-global-dirty-log {"enable":true})" ? enable_answer_ : R"({"return": {}})");
                }
            }
            ::close(c);
        }
    }

    std::filesystem::path path_;
    std::string enable_answer_;
    int fd_ = -1;
    std::atomic<bool> stop_{false};
    std::thread thread_;
    std::mutex mutex_;
    std::vector<std::string> commands_;
};

DumpOptions live() {
    DumpOptions o;
    o.precopy.on = true;
    o.precopy.max_pause = std::chrono::seconds(30);
    return o;
}

class DeviceModel : public ::testing::Test {
protected:
    void SetUp() override { ::setenv("XEN_DUMP_QMP_DIR", host_.tmp.path().c_str(), 1); }
    void TearDown() override { ::unsetenv("XEN_DUMP_QMP_DIR"); }
    Host host_{host_spec({guest(21, "hvm", 2048, 50, "random"), guest(22, "pvh", 2048, 50, "random")})};
};

const std::string kOn = R"(xen-set-global-dirty-log {"enable":true})";
const std::string kOff = R"(xen-set-global-dirty-log {"enable":false})";

TEST_F(DeviceModel, AnHvmGuestsDeviceModelLogsItsWritesForTheWholePreCopy) {
    FakeQmp qemu(dump::qmp_socket_of(21));
    EXPECT_EQ(dump::qmp_socket_of(21), host_.tmp / "qmp-libxl-21");
    std::vector<std::string> seen_in_pass;
    DumpOptions o = live();
    o.write.on_progress = [&](const WriteProgress& p) {
        if (seen_in_pass.empty() && p.bytes_done > 0) seen_in_pass = qemu.commands();
    };
    const auto file = host_.tmp / "hvm.core";
    const DumpResult r = dump_domain_to_file(*host_.hv, 21, file, o);
    ASSERT_TRUE(r.live);
    // On before the first page was written, off after the final round.
    EXPECT_EQ(seen_in_pass, (std::vector<std::string>{"qmp_capabilities", kOn}));
    EXPECT_EQ(qemu.commands(), (std::vector<std::string>{"qmp_capabilities", kOn, kOff}));
    EXPECT_TRUE(DumpReader::open(file).verify().empty());
    EXPECT_FALSE(sim_info(host_, 21).at("logdirty").get<bool>());
}

TEST_F(DeviceModel, APvhGuestHasNoDeviceModelToAsk) {
    FakeQmp qemu(dump::qmp_socket_of(22));
    dump_domain_to_file(*host_.hv, 22, host_.tmp / "pvh.core", live());
    EXPECT_TRUE(qemu.commands().empty());
}

TEST_F(DeviceModel, ARefusalRefusesTheDumpAndLogDirtyIsOffAgain) {
    FakeQmp qemu(dump::qmp_socket_of(21), R"({"error": {"class": "GenericError", "desc": "no dirty logging here"}})");
    const auto file = host_.tmp / "refused.core";
    try {
        dump_domain_to_file(*host_.hv, 21, file, live());
        ADD_FAILURE() << "the dump was not refused";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("no dirty logging here"), std::string::npos) << m;
        EXPECT_NE(m.find((host_.tmp / "qmp-libxl-21").string()), std::string::npos) << m;
    }
    EXPECT_FALSE(std::filesystem::exists(file));
    EXPECT_FALSE(sim_info(host_, 21).at("logdirty").get<bool>());
    EXPECT_FALSE(sim_info(host_, 21).at("paused").get<bool>());
}

TEST_F(DeviceModel, ACancelTurnsItOffToo) {
    FakeQmp qemu(dump::qmp_socket_of(21));
    std::atomic<bool> cancel{false};
    DumpOptions o = live();
    o.write.cancel = &cancel;
    o.write.on_progress = [&](const WriteProgress&) { cancel = true; };
    EXPECT_THROW(dump_domain_to_file(*host_.hv, 21, host_.tmp / "cancelled.core", o), Error);
    EXPECT_EQ(qemu.commands(), (std::vector<std::string>{"qmp_capabilities", kOn, kOff}));
    EXPECT_FALSE(sim_info(host_, 21).at("logdirty").get<bool>());
}

// What the socket says is untrusted: junk and a silent peer are errors
// naming the socket, never a hang.
TEST(DeviceModelSocket, JunkAndSilenceAreErrorsNamingTheSocket) {
    TempDir dir;
    const auto path = dir / "qmp";
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ASSERT_EQ(::listen(fd, 4), 0);
    std::thread peer([fd] {
        const int c1 = ::accept(fd, nullptr, nullptr);  // junk
        (void)!::write(c1, "\x1b[31mnot qmp\n", 13);
        const int c2 = ::accept(fd, nullptr, nullptr);  // silence
        ::sleep(2);
        ::close(c1);
        ::close(c2);
    });
    auto message = [&](std::chrono::milliseconds timeout) {
        try {
            dump::DeviceModelDirtyLog dm(path, timeout);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    };
    std::string m = message(std::chrono::seconds(5));
    EXPECT_NE(m.find("did not greet as QMP"), std::string::npos) << m;
    EXPECT_NE(m.find(path.string()), std::string::npos) << m;
    EXPECT_EQ(m.find('\x1b'), std::string::npos) << m;
    m = message(std::chrono::milliseconds(300));
    EXPECT_NE(m.find("did not answer"), std::string::npos) << m;
    peer.join();
    ::close(fd);
    m = message(std::chrono::seconds(1));
    EXPECT_NE(m.find("cannot connect"), std::string::npos) << m;
}

}  // namespace
}  // namespace xendump::test::live
