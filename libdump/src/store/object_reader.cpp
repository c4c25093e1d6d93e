#include "store/object_reader.hpp"

#include <algorithm>
#include <cstring>
#include <ctime>

#include "xendump/error.hpp"

namespace xendump::s3 {
namespace {

// An HTTP date (RFC 9110 IMF-fixdate: "Fri, 04 Dec 2026 04:15:34 GMT"), as
// HEAD's Last-Modified gives it: seconds since the epoch, 0 when it is not one.
int64_t http_date(const std::string& text) {
    std::tm tm{};
    const char* end = ::strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (!end || *end) return 0;
    return static_cast<int64_t>(::timegm(&tm));
}

}  // namespace

ObjectReader::ObjectReader(std::shared_ptr<Client> client, Url object, uint64_t block_size, size_t blocks)
    : client_(std::move(client)),
      object_(std::move(object)),
      name_(object_.str()),
      block_size_(std::max<uint64_t>(block_size, 4096)),
      blocks_(blocks),
      max_run_(std::max<uint64_t>(blocks / 4, 1)) {
    if (object_.key.empty() || object_.key.ends_with('/'))
        throw Error("names a bucket or a prefix, not an object (s3://BUCKET/KEY)", name_);
    const auto info = client_->head_object(object_);
    if (!info) throw Error("no such object in the store", name_);
    size_ = info->size;
    last_modified_ = http_date(info->last_modified);
}

ObjectReader::~ObjectReader() = default;

ObjectReader::Fetched ObjectReader::fetched() const {
    std::lock_guard lock(mutex_);
    return fetched_;
}

size_t ObjectReader::read_at(uint64_t offset, std::span<std::byte> out) const {
    size_t done = 0;
    while (done < out.size() && offset < size_) {
        const size_t n = copy_block(offset / block_size_, offset % block_size_, out.subspan(done));
        done += n;
        offset += n;
    }
    return done;
}

size_t ObjectReader::copy_block(uint64_t index, uint64_t in, std::span<std::byte> out) const {
    const auto copy = [&](const std::vector<std::byte>& bytes) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(out.size(), bytes.size() - std::min<uint64_t>(in, bytes.size())));
        std::memcpy(out.data(), bytes.data() + in, n);
        return n;
    };
    {
        std::lock_guard lock(mutex_);
        if (const auto* kept = blocks_.find(index)) return copy(*kept);
    }
    // How many blocks one GET brings: those the read spans, and more while
    // the reads go on where the last GET ended (a reader going through the
    // object: verify, dump), doubling up to max_run_ blocks.
    // A few such streams are followed at once (verify's two threads, each
    // going through its half).
    uint64_t count = 0;
    Stream* stream = nullptr;
    {
        std::lock_guard lock(mutex_);
        auto it = std::find_if(streams_.begin(), streams_.end(), [&](const Stream& s) { return s.next == index; });
        if (it != streams_.end()) {
            it->run = std::min(it->run * 2, max_run_);
        } else {
            it = streams_.begin() + static_cast<ptrdiff_t>(replace_++ % streams_.size());
            it->run = 1;
        }
        stream = &*it;
        count = std::min(std::max<uint64_t>(it->run, (in + out.size() + block_size_ - 1) / block_size_), max_run_);
    }
    // Fetched without the lock: other threads read other blocks meanwhile
    // (verify's two hashing threads); two that miss the same block both
    // fetch it, as the age decryptor's cache does with a chunk.
    const uint64_t start = index * block_size_, end = std::min(size_, start + count * block_size_);
    std::vector<std::byte> bytes(static_cast<size_t>(end - start));
    try {
        client_->get_range(object_, start, bytes);
    } catch (const Error& e) {
        // Where in the object: the range asked for (a reader above says what it was reading there).
        throw Error(e.message() + " (bytes " + std::to_string(start) + "-" + std::to_string(end - 1) + ")", name_,
                    e.offset() ? e.offset() : start, e.sys_errno());
    }
    const size_t n = copy(bytes);
    std::lock_guard lock(mutex_);
    ++fetched_.requests;
    fetched_.bytes += bytes.size();
    stream->next = index + (bytes.size() + block_size_ - 1) / block_size_;
    // Kept block by block (unless another thread kept one meanwhile).
    for (uint64_t at = 0, i = index; at < bytes.size(); at += block_size_, ++i) {
        const auto from = bytes.begin() + static_cast<ptrdiff_t>(at);
        blocks_.keep(i, std::vector<std::byte>(from, from + static_cast<ptrdiff_t>(std::min<uint64_t>(block_size_, bytes.size() - at))));
    }
    return n;
}

std::unique_ptr<ObjectReader> open_object(const std::string& url, uint64_t block_size) {
    return std::make_unique<ObjectReader>(std::make_shared<Client>(settings_from_environment()), parse_url(url),
                                          block_size);
}

}  // namespace xendump::s3
