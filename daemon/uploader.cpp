#include "uploader.hpp"

#include "crash_signature.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <ctime>
#include <deque>
#include <future>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli.hpp"
#include "dump_dir.hpp"
#include "journal_log.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/s3.hpp"

namespace xendump::daemon {

namespace fs = std::filesystem;

namespace {

// S3 takes at most this many parts in one upload: a file larger than
// PartSize= times this goes in larger parts (whole MiB).
constexpr uint64_t kMaxParts = 10000;
constexpr std::chrono::seconds kFirstBackoff{10};
constexpr std::chrono::seconds kMaxBackoff{600};
// The state directory is looked at again at least this often (a dump that
// xen-dumpctl vacuum removed is dropped from the waiting uploads).
constexpr std::chrono::seconds kRefreshInterval{30};
// Metadata values are cut to this (S3 allows 2 KiB of them in all).
constexpr size_t kMaxMetadataValue = 512;

// The service stops: the upload goes on at the next start.
struct Stopped {};

int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

using Md5 = std::array<unsigned char, 16>;

Md5 md5_of(std::span<const std::byte> data) {
    Md5 out{};
    unsigned int len = 0;
    if (EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_md5(), nullptr) != 1 || len != out.size())
        throw Error("MD5 failed (OpenSSL)");
    return out;
}

std::string hex_of(std::span<const unsigned char> bytes) {
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (unsigned char c : bytes) {
        out += hex[c >> 4];
        out += hex[c & 15];
    }
    return out;
}

// An ETag as S3 sends it ("HEX" in quotes), bare and in lower case.
std::string bare_etag(std::string etag) {
    etag.erase(std::remove(etag.begin(), etag.end(), '"'), etag.end());
    for (char& c : etag) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return etag;
}

// A metadata value: printable ASCII as it is but '%', every other byte (and
// a space at either end, which HTTP would drop) as %XX; at most `max` bytes.
// A file name of the dump directory is such already (encode_file_name_part),
// its '%' kept: `keep_percent`.
std::string metadata_value(std::string_view v, size_t max = kMaxMetadataValue, bool keep_percent = false) {
    return percent_encode(v, max, [&](size_t i, unsigned char c) {
        const bool edge_space = c == ' ' && (i == 0 || i + 1 == v.size());
        return c >= 0x20 && c < 0x7f && (c != '%' || keep_percent) && !edge_space;
    });
}

// The names of a dump's files (dump_dir.cpp): what the sweep may abort.
bool is_dump_file_name(std::string_view name) {
    for (std::string_view s : {".core", ".kdump", ".age", ".json", ".dmesg.txt"})
        if (name.ends_with(s)) return true;
    return false;
}

void check_network_allowed() {
    if (!network_sockets_allowed())
        throw Error(std::string("the service may not open network sockets (RestrictAddressFamilies=AF_UNIX): ") +
                    kUploadSandboxHint);
}

}  // namespace

std::unique_ptr<s3::Client> upload_client(const UploadConfig& cfg) {
    check_network_allowed();
    // The credentials as the AWS tools find them (xendump/s3.hpp), read for
    // every attempt: a credential fixed by the operator is taken at once.
    s3::Settings s = s3::settings_from_environment(cfg.endpoint, cfg.region);
    // The uploader waits and tries again by itself (upload_backoff): the
    // client's own retries stay short, so that a stop is not held up.
    s.attempts = 3;
    s.stall_timeout = std::chrono::seconds(30);
    return std::make_unique<s3::Client>(std::move(s));
}

namespace {


std::string read_fd_text(int fd, uint64_t size, const fs::path& path) {
    if (size > (uint64_t{16} << 20)) throw Error("too large for a sidecar", path.string());
    std::string text(static_cast<size_t>(size), '\0');
    if (util::pread_full(fd, text.data(), text.size(), 0) != static_cast<long>(text.size()))
        throw_errno("cannot read", path.string());
    return text;
}

// The object just completed holds what was sent: its size, and where the
// store gives a multipart ETag (MD5 of the parts' MD5s, "-N"), that one.
void verify_object(s3::Client& c, const s3::Url& url, uint64_t size, const std::string& etag) {
    const auto info = c.head_object(url);
    if (!info) throw Error("the object is missing after its upload completed", url.str());
    if (info->size != size)
        throw Error("the object holds " + std::to_string(info->size) + " bytes, the file " + std::to_string(size),
                    url.str());
    const std::string got = bare_etag(info->etag);
    if (!got.empty() && (got.find('-') != std::string::npos) == (etag.find('-') != std::string::npos) && got != etag)
        throw Error("the object's ETag " + got + " is not that of the bytes uploaded (" + etag + ")", url.str());
}

// The buffers of the parts in flight, used again part after part: a fresh
// buffer of a part (16 MiB) costs its zeroing by the constructor, and its
// pages faulted in and zeroed by the kernel, every time (as much memory
// traffic as the part itself).
class PartBuffers {
public:
    explicit PartBuffers(uint64_t part) : part_(part) {}

    // A buffer of `len` bytes (at most a part), back to the pool when it goes.
    class Lease {
    public:
        Lease(PartBuffers& pool, std::unique_ptr<std::byte[]> b, uint64_t len)
            : pool_(pool), b_(std::move(b)), len_(len) {}
        Lease(const Lease&) = delete;
        Lease& operator=(const Lease&) = delete;
        ~Lease() {
            std::lock_guard lock(pool_.m_);
            pool_.free_.push_back(std::move(b_));
        }
        std::span<std::byte> bytes() const { return {b_.get(), static_cast<size_t>(len_)}; }

    private:
        PartBuffers& pool_;
        std::unique_ptr<std::byte[]> b_;
        uint64_t len_;
    };

    Lease take(uint64_t len) {
        std::unique_ptr<std::byte[]> b;
        {
            std::lock_guard lock(m_);
            if (!free_.empty()) {
                b = std::move(free_.back());
                free_.pop_back();
            }
        }
        if (!b) b.reset(new std::byte[static_cast<size_t>(part_)]);  // not zeroed: read over at once
        return Lease(*this, std::move(b), std::min(len, part_));
    }

private:
    std::mutex m_;
    std::vector<std::unique_ptr<std::byte[]>> free_;
    uint64_t part_;
};

struct FileUpload {
    s3::Client& client;
    const s3::Url& url;
    int fd;
    uint64_t size;
    uint64_t part_size;  // PartSize=
    unsigned in_flight;  // PartsInFlight=
    const std::map<std::string, std::string>& metadata;
    UploadState& state;
    const std::function<void()>& save;
    const std::function<void(uint64_t)>& progress;
    const std::atomic<bool>& stop;
    std::optional<PartBuffers> buffers{};

    void abort_old() {
        try {
            client.abort_multipart_upload({url.bucket, state.key}, state.upload_id);
        } catch (const Error& e) {
            log_message(LogLevel::info, std::string("cannot abort an earlier upload: ") + e.what());
        }
        state.upload_id.clear();
    }

    // Part k (1-based): read, hashed, and sent unless `before` (what the
    // store listed of it) holds the same bytes already.
    void send_part(uint64_t k, uint64_t part, const std::optional<s3::PartInfo>& before, s3::PartInfo& sent,
                   Md5& digest) {
        const uint64_t at = (k - 1) * part, len = std::min(part, size - at);
        const PartBuffers::Lease held = buffers->take(len);
        const std::span<std::byte> buf = held.bytes();
        const long got = util::pread_full(fd, buf.data(), buf.size(), at);
        if (got < 0) throw_errno("cannot read", url.str(), at);
        if (static_cast<uint64_t>(got) != len) throw Error("the file is shorter than it was", url.str(), at);
        digest = md5_of(buf);
        const std::string want = hex_of(digest);
        const unsigned number = static_cast<unsigned>(k);
        if (before && before->size == len && bare_etag(before->etag) == want) {
            sent = {number, before->etag, len};  // stored before, and the same bytes
            return;
        }
        if (before)
            log_message(LogLevel::info, "part " + std::to_string(k) + " of " + url.str() +
                                            " in the store is not the local one: sending it again",
                        {{"UPLOAD_TARGET", url.str()}});
        std::string etag = client.upload_part(url, state.upload_id, number, buf, digest);
        if (bare_etag(etag) != want)
            throw Error("part " + std::to_string(k) + ": the store's ETag " + bare_etag(etag) +
                            " is not the MD5 of the bytes sent (" + want + ")",
                        url.str());
        sent = {number, std::move(etag), len};
    }

    void run() {
        if (size == 0) {
            client.put_object(url, {}, metadata);
            verify_object(client, url, 0, hex_of(md5_of({})));
            return;
        }
        // Parts of PartSize=, larger (whole MiB) for a file S3's 10000 parts would not hold.
        const uint64_t mib = uint64_t{1} << 20;
        const uint64_t part = std::max(part_size, (size + kMaxParts * mib - 1) / (kMaxParts * mib) * mib);
        std::map<unsigned, s3::PartInfo> stored;
        if (!state.upload_id.empty() && (state.key != url.key || state.part_size != part)) abort_old();
        if (!state.upload_id.empty()) {
            try {
                for (auto& p : client.list_parts(url, state.upload_id)) stored[p.number] = p;
            } catch (const Error& e) {
                // The store no longer knows the upload (completed, aborted,
                // expired): start over. S3 says NoSuchUpload, RGW NoSuchKey
                // when no upload is left under the key; a missing bucket is
                // an error of its own.
                const std::string what = e.what();
                if (what.find("HTTP 404") == std::string::npos || what.find("NoSuchBucket") != std::string::npos)
                    throw;
                log_message(LogLevel::info, "the store no longer knows upload " + state.upload_id + " of " + url.str() +
                                                ": starting it over");
                state.upload_id.clear();
            }
        }
        const uint64_t n = (size + part - 1) / part;
        if (!state.upload_id.empty())
            log_message(LogLevel::info, "resuming the multipart upload of " + url.str() + ": " +
                                            std::to_string(stored.size()) + " of " + std::to_string(n) +
                                            " parts stored already",
                        {{"UPLOAD_TARGET", url.str()}});
        if (state.upload_id.empty()) {
            state.upload_id = client.create_multipart_upload(url, metadata);
            state.key = url.key;
            state.part_size = part;
            save();
        }
        // Up to PartsInFlight= parts at once, each read, hashed and sent on a
        // thread of its own (a buffer of a part each); the parts are listed
        // and their MD5s kept in part order whatever order they end in.
        buffers.emplace(part);
        std::vector<s3::PartInfo> parts(static_cast<size_t>(n));
        std::vector<Md5> digests(static_cast<size_t>(n));
        std::deque<std::pair<uint64_t, std::future<void>>> flying;
        std::exception_ptr failed;
        auto land_oldest = [&] {
            auto [k, done] = std::move(flying.front());
            flying.pop_front();
            try {
                done.get();
                progress(parts[k - 1].size);
            } catch (...) {
                if (!failed) failed = std::current_exception();
            }
        };
        for (uint64_t k = 1; k <= n; ++k) {
            if (stop) break;
            if (flying.size() >= in_flight) land_oldest();
            if (failed) break;
            const auto it = stored.find(static_cast<unsigned>(k));
            const std::optional<s3::PartInfo> before = it != stored.end() ? std::optional(it->second) : std::nullopt;
            flying.emplace_back(k, std::async(std::launch::async, [this, k, part, before, &parts, &digests] {
                send_part(k, part, before, parts[k - 1], digests[k - 1]);
            }));
        }
        while (!flying.empty()) land_oldest();
        if (failed) std::rethrow_exception(failed);
        if (stop) throw Stopped{};
        std::string md5s;  // the parts' MD5s, of which the object's ETag is the MD5
        for (const Md5& d : digests) md5s.append(reinterpret_cast<const char*>(d.data()), d.size());
        client.complete_multipart_upload(url, state.upload_id, parts);
        state.upload_id.clear();
        state.key.clear();
        const Md5 whole = md5_of(std::as_bytes(std::span(md5s)));
        verify_object(client, url, size, hex_of(whole) + "-" + std::to_string(n));
    }
};

}  // namespace

bool network_sockets_allowed() {
    for (int family : {AF_INET, AF_INET6}) {
        UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (fd || errno != EAFNOSUPPORT) return true;
    }
    return false;
}

std::string UploadState::to_json() const {
    nlohmann::ordered_json j;
    j["dump"] = dump;
    j["queued"] = queued;
    j["done"] = done;
    if (!upload_id.empty()) {
        j["key"] = key;
        j["upload_id"] = upload_id;
        j["part_size"] = part_size;
    }
    j["attempts"] = attempts;
    if (!error.empty()) j["error"] = error;
    if (stream_failed) j["stream_failed"] = true;
    return j.dump(2) + "\n";
}

UploadState UploadState::from_json(const std::string& text, const std::string& origin) {
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw Error("not an upload state (JSON object)", origin);
    UploadState s;
    try {
        s.dump = j.at("dump").get<std::string>();
        s.queued = j.value("queued", int64_t{0});
        s.done = j.value("done", std::vector<std::string>{});
        s.key = j.value("key", "");
        s.upload_id = j.value("upload_id", "");
        s.part_size = j.value("part_size", uint64_t{0});
        s.attempts = j.value("attempts", 0u);
        s.error = j.value("error", "");
        s.stream_failed = j.value("stream_failed", false);
    } catch (const nlohmann::json::exception& e) {
        throw Error(std::string("not an upload state: ") + e.what(), origin);
    }
    if (s.dump.empty() || s.dump.find('/') != std::string::npos) throw Error("not an upload state: no dump name", origin);
    return s;
}

std::string upload_key(const UploadConfig& upload, const std::string& host, const std::string& file_name) {
    std::string key = upload.prefix.empty() ? std::string() : upload.prefix + "/";
    return key + host + "/" + file_name;
}

std::map<std::string, std::string> upload_metadata(const Sidecar& s) {
    std::map<std::string, std::string> m;
    m["domain"] = metadata_value(s.domain_name);
    m["domid"] = std::to_string(s.domid);
    if (!s.uuid.empty()) m["uuid"] = metadata_value(s.uuid);
    if (!s.type.empty()) m["type"] = metadata_value(s.type);
    m["reason"] = metadata_value(s.reason);
    m["time"] = util::utc_time(static_cast<std::time_t>(s.start_time), "%Y-%m-%dT%H:%M:%SZ");
    m["format"] = metadata_value(s.format);
    m["size"] = std::to_string(s.file_size);
    m["encrypted"] = s.recipients ? "yes" : "no";
    if (s.guest_panic) m["panic"] = metadata_value(*s.guest_panic);
    if (auto signature = crash_signature(s)) m["signature"] = *signature;  // 16 hex digits
    if (!s.dump_file.empty()) m["dump"] = metadata_value(s.dump_file, kMaxMetadataValue, true);
    return m;
}

int64_t parse_iso_time(const std::string& text) {
    std::tm tm{};
    const char* end = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
    if (!end) return 0;
    return static_cast<int64_t>(::timegm(&tm));
}

std::chrono::seconds upload_backoff(unsigned attempts) {
    std::chrono::seconds d = kFirstBackoff;
    for (unsigned i = 1; i < attempts && d < kMaxBackoff; ++i) d *= 2;
    return std::min(d, kMaxBackoff);
}

Uploader::Uploader(fs::path dump_dir, std::string host, std::function<UploadConfig()> config)
    : dump_dir_(std::move(dump_dir)), host_(std::move(host)), config_(std::move(config)) {}

Uploader::~Uploader() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

fs::path Uploader::state_dir() const { return dump_dir_ / kUploadStateDir; }

void Uploader::start() {
    started_ = unix_now();
    std::error_code ec;
    // Leftovers of a write that a crash of the service interrupted.
    for (const auto& e : fs::directory_iterator(state_dir(), ec)) {
        const std::string n = e.path().filename().string();
        if (n.ends_with(".new") || n.starts_with(AtomicFile::kTempPrefix)) fs::remove(e.path(), ec);
    }
    running_ = true;
    thread_ = std::thread([this] {
        try {
            run();
        } catch (const std::exception& e) {
            log_message(LogLevel::error, std::string("the uploads stopped: ") + e.what());
        }
        running_ = false;
    });
}

void Uploader::add(const fs::path& dump, const std::string& stream_error) {
    UploadState s;
    s.dump = dump.filename().string();
    s.queued = unix_now();
    if (!stream_error.empty()) {
        s.attempts = 1;
        s.error = "streaming it failed: " + stream_error;
        s.stream_failed = true;
    }
    // Made with the first upload (mode 0700, as the dump directory).
    if (::mkdir(state_dir().c_str(), 0700) != 0 && errno != EEXIST)
        throw_errno("cannot create the upload state directory", state_dir().string());
    replace_file_atomically(upload_state_path(dump), s.to_json(), 0600);
    {
        std::lock_guard lock(mutex_);
        Entry& entry = entries_[s.dump];
        entry.state = s;
        if (s.attempts) {
            const auto delay = upload_backoff(s.attempts);
            entry.next_try = std::chrono::steady_clock::now() + delay;
            entry.next_try_unix = unix_now() + delay.count();
        }
        poked_ = true;
    }
    cv_.notify_all();
}

void Uploader::wake() {
    {
        std::lock_guard lock(mutex_);
        for (auto& [name, e] : entries_) {
            e.next_try = {};
            e.next_try_unix = 0;
        }
        poked_ = true;
    }
    cv_.notify_all();
}

std::vector<UploadSnapshot> Uploader::snapshot() const {
    const UploadConfig cfg = config_();
    std::vector<const std::pair<const std::string, Entry>*> order;
    std::vector<UploadSnapshot> out;
    std::lock_guard lock(mutex_);
    for (const auto& kv : entries_) order.push_back(&kv);
    std::stable_sort(order.begin(), order.end(),
                     [](auto* a, auto* b) { return a->second.state.queued < b->second.state.queued; });
    for (const auto* kv : order) {
        const Entry& e = kv->second;
        UploadSnapshot s;
        s.dump = (dump_dir_ / kv->first).string();
        if (cfg.enabled()) s.target = s3::Url{cfg.bucket, upload_key(cfg, host_, kv->first)}.str();
        s.active = e.active;
        s.bytes_done = e.bytes_done;
        s.bytes_total = e.bytes_total;
        s.attempts = e.state.attempts;
        s.reason = e.state.error;
        if (!cfg.enabled()) s.reason = "uploading is off ([Upload] Target= is not set): the dump stays local";
        s.next_attempt = e.active ? 0 : e.next_try_unix;
        out.push_back(std::move(s));
    }
    return out;
}

bool Uploader::stop(std::chrono::milliseconds bound) {
    {
        std::lock_guard lock(mutex_);  // not between the thread's look at stop_ and its wait
        stop_ = true;
    }
    cv_.notify_all();
    const auto deadline = std::chrono::steady_clock::now() + bound;
    while (running_ && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (running_) return false;
    if (thread_.joinable()) thread_.join();
    return true;
}

void Uploader::abort_quietly(const UploadConfig& cfg, const std::string& key, const std::string& upload_id) {
    if (!cfg.enabled() || upload_id.empty()) return;
    const s3::Url url{cfg.bucket, key};
    try {
        upload_client(cfg)->abort_multipart_upload(url, upload_id);
        log_message(LogLevel::info, "aborted the multipart upload of " + url.str() + " (no longer needed)",
                    {{"UPLOAD_TARGET", url.str()}});
    } catch (const Error& e) {
        log_message(LogLevel::info, std::string("cannot abort an abandoned upload: ") + e.what(),
                    {{"UPLOAD_TARGET", url.str()}});
    }
}

void Uploader::refresh(const UploadConfig& cfg) {
    std::map<std::string, UploadState> on_disk;
    std::vector<std::pair<std::string, std::string>> to_abort;  // key, upload id
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(state_dir(), ec)) {
        const std::string n = e.path().filename().string();
        if (!n.ends_with(".json")) continue;
        UploadState s;
        try {
            std::ifstream in(e.path());
            std::stringstream text;
            text << in.rdbuf();
            s = UploadState::from_json(text.str(), e.path().string());
        } catch (const Error& err) {
            // Set aside: the dump stays where it is, and the journal says why.
            fs::rename(e.path(), e.path().string() + ".bad", ec);
            log_message(LogLevel::error, std::string("unreadable upload state, set aside as .bad: ") + err.what());
            continue;
        }
        const fs::path dump = dump_dir_ / s.dump;
        if (fs::symlink_status(dump, ec).type() == fs::file_type::not_found) {
            // Removed by hand, or by another process's storage limits before they removed this file.
            fs::remove(e.path(), ec);
            log_message(LogLevel::warning,
                        "the upload of " + dump.string() + " to object storage is dropped: the dump is gone",
                        {{"DUMP_PATH", dump.string()}});
            if (!s.upload_id.empty()) to_abort.emplace_back(s.key, s.upload_id);
            continue;
        }
        on_disk.emplace(s.dump, std::move(s));
    }
    {
        std::lock_guard lock(mutex_);
        for (auto it = entries_.begin(); it != entries_.end();) {
            // Gone from the disk (remove_dump took it with its dump) and not
            // just written by add() meanwhile.
            if (!on_disk.count(it->first) && !it->second.active &&
                fs::symlink_status(state_dir() / (it->first + ".json"), ec).type() == fs::file_type::not_found) {
                if (!it->second.state.upload_id.empty())
                    to_abort.emplace_back(it->second.state.key, it->second.state.upload_id);
                it = entries_.erase(it);
            } else {
                ++it;
            }
        }
        for (auto& [name, s] : on_disk)
            if (!entries_.count(name)) entries_[name].state = std::move(s);
    }
    for (const auto& [key, id] : to_abort) abort_quietly(cfg, key, id);
}

void Uploader::sweep(const UploadConfig& cfg) {
    const std::string prefix = upload_key(cfg, host_, "");
    std::set<std::string> known;
    {
        std::lock_guard lock(mutex_);
        for (const auto& [name, e] : entries_)
            if (!e.state.upload_id.empty()) known.insert(e.state.upload_id);
    }
    try {
        auto client = upload_client(cfg);
        for (const auto& u : client->list_multipart_uploads(cfg.bucket, prefix)) {
            const std::string name = u.key.substr(std::min(prefix.size(), u.key.size()));
            if (known.count(u.upload_id) || name.find('/') != std::string::npos || !is_dump_file_name(name)) continue;
            const int64_t initiated = parse_iso_time(u.initiated);
            if (initiated == 0 || initiated >= started_) continue;  // perhaps another writer's, begun since
            abort_quietly(cfg, u.key, u.upload_id);
        }
        swept_ = true;
    } catch (const Error& e) {
        // Again before the next attempt (whose own failure the journal has).
        log_message(LogLevel::debug, std::string("cannot look for abandoned uploads: ") + e.what());
    }
}

void Uploader::run() {
    while (!stop_) {
        const UploadConfig cfg = config_();
        refresh(cfg);
        std::string next;
        {
            std::unique_lock lock(mutex_);
            if (stop_) return;
            const auto now = std::chrono::steady_clock::now();
            auto wake_at = now + kRefreshInterval;
            if (cfg.enabled()) {
                int64_t first = INT64_MAX;
                for (auto& [name, e] : entries_) {
                    if (e.next_try <= now) {
                        if (e.state.queued < first) {
                            first = e.state.queued;
                            next = name;
                        }
                    } else {
                        wake_at = std::min(wake_at, e.next_try);
                    }
                }
            }
            if (next.empty()) {
                cv_.wait_until(lock, wake_at, [&] { return stop_ || poked_; });
                poked_ = false;
                continue;
            }
            entries_[next].active = true;
        }
        if (!swept_) sweep(cfg);
        attempt(next, cfg);
    }
}

void Uploader::attempt(const std::string& name, const UploadConfig& cfg) {
    UploadState st;
    {
        std::lock_guard lock(mutex_);
        st = entries_[name].state;
    }
    const fs::path dump = dump_dir_ / name;
    const fs::path state_file = upload_state_path(dump);
    const std::string target = s3::Url{cfg.bucket, upload_key(cfg, host_, name)}.str();
    // Saved only while the dump is there: one removed meanwhile has lost its upload.
    const std::function<void()> save = [&] {
        std::error_code ec;
        if (fs::symlink_status(dump, ec).type() != fs::file_type::not_found)
            replace_file_atomically(state_file, st.to_json(), 0600);
    };
    const std::function<void(uint64_t)> progress = [&](uint64_t n) {
        std::lock_guard lock(mutex_);
        entries_[name].bytes_done += n;
    };
    LogFields fields{{"DUMP_PATH", dump.string()},
                     {"UPLOAD_TARGET", target},
                     {"UPLOAD_ATTEMPT", std::to_string(st.attempts + 1)}};
    set_uploading(dump);
    log_message(LogLevel::info,
                "uploading " + dump.string() + " to " + target +
                    (st.attempts ? " (attempt " + std::to_string(st.attempts + 1) + ")" : std::string()),
                fields);
    const auto began = std::chrono::steady_clock::now();
    try {
        // Every file is open before the first byte goes: a dump that
        // another process removes meanwhile is still uploaded whole.
        struct File {
            std::string name;
            UniqueFd fd;
            uint64_t size = 0;
        };
        std::vector<File> files;
        for (const fs::path& p : {dump, dmesg_path(dump), sidecar_path(dump)}) {
            UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
            if (!fd) {
                if (errno == ENOENT && p != dump) continue;  // no kernel log (or, oddly, no sidecar)
                throw_errno("cannot open", p.string());
            }
            struct stat sb {};
            if (::fstat(fd.get(), &sb) != 0) throw_errno("cannot stat", p.string());
            if (!S_ISREG(sb.st_mode)) throw Error("not a regular file", p.string());
            files.push_back({p.filename().string(), std::move(fd), static_cast<uint64_t>(sb.st_size)});
        }
        // The objects' metadata from the sidecar (without one, or with one
        // that does not parse, the dump still goes, with its name alone).
        std::map<std::string, std::string> metadata{{"dump", metadata_value(name, kMaxMetadataValue, true)}};
        if (files.back().name.ends_with(".json")) {
            try {
                metadata = upload_metadata(Sidecar::from_json(
                    read_fd_text(files.back().fd.get(), files.back().size, sidecar_path(dump)),
                    sidecar_path(dump).string()));
            } catch (const Error& e) {
                log_message(LogLevel::warning, std::string("the dump's objects get no metadata: ") + e.what(), fields);
            }
        }
        uint64_t total = 0, done = 0;
        for (const File& f : files) {
            total += f.size;
            if (std::find(st.done.begin(), st.done.end(), f.name) != st.done.end()) done += f.size;
        }
        {
            std::lock_guard lock(mutex_);
            entries_[name].bytes_total = total;
            entries_[name].bytes_done = done;
        }
        auto client = upload_client(cfg);
        if (st.stream_failed) {
            // What the failed stream left under the dump's key (it could not abort it then).
            const std::string key = upload_key(cfg, host_, name);
            for (const auto& u : client->list_multipart_uploads(cfg.bucket, key))
                if (u.key == key && u.upload_id != st.upload_id) abort_quietly(cfg, u.key, u.upload_id);
            st.stream_failed = false;
            save();
        }
        // The dump first, its kernel log, its sidecar last: a sidecar in the
        // store always stands beside a complete dump.
        for (File& f : files) {
            if (std::find(st.done.begin(), st.done.end(), f.name) != st.done.end()) continue;
            const s3::Url url{cfg.bucket, upload_key(cfg, host_, f.name)};
            FileUpload{*client, url, f.fd.get(), f.size, cfg.part_size, cfg.in_flight, metadata, st, save, progress, stop_}.run();
            st.done.push_back(f.name);
            st.part_size = 0;
            save();
        }
        // All in the store and verified. The state file goes first, so that
        // removing the local copy (KeepLocal=no) warns of no lost upload.
        std::error_code ec;
        fs::remove(state_file, ec);
        if (!cfg.keep_local) remove_dump(dump);
        const auto seconds =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began).count() /
            1000.0;
        char took[32];
        std::snprintf(took, sizeof took, "%.1f", seconds);
        fields.emplace_back("UPLOAD_SIZE", std::to_string(total));
        fields.emplace_back("UPLOAD_SECONDS", took);
        fields.emplace_back("UPLOAD_KEPT_LOCAL", cfg.keep_local ? "yes" : "no");
        log_message(LogLevel::notice,
                    "uploaded " + dump.string() + " to " + target + " (" + std::to_string(files.size()) + " files, " +
                        cli::human_bytes(total) + " in " + took + " s)" +
                        (cfg.keep_local ? "" : "; the local copy is removed"),
                    fields, kMessageDumpUploaded);
        std::lock_guard lock(mutex_);
        entries_.erase(name);
    } catch (const Stopped&) {
        try {
            save();
        } catch (const Error&) {
        }
        std::lock_guard lock(mutex_);
        entries_[name].state = st;
        entries_[name].active = false;
    } catch (const std::exception& e) {
        st.attempts++;
        st.error = e.what();
        try {
            save();
        } catch (const Error& se) {
            log_message(LogLevel::error, std::string("cannot save the upload's state: ") + se.what(), fields);
        }
        const auto delay = upload_backoff(st.attempts);
        {
            std::lock_guard lock(mutex_);
            Entry& entry = entries_[name];
            entry.state = st;
            entry.active = false;
            entry.next_try = std::chrono::steady_clock::now() + delay;
            entry.next_try_unix = unix_now() + delay.count();
        }
        fields.emplace_back("UPLOAD_ERROR", st.error);
        log_message(LogLevel::warning,
                    "upload of " + dump.string() + " to " + target + " failed (attempt " + std::to_string(st.attempts) +
                        "): " + st.error + "; the dump stays in " + dump_dir_.string() + ", tried again in " +
                        format_duration(delay),
                    fields, kMessageUploadFailed);
    }
    set_uploading({});
}

}  // namespace xendump::daemon
