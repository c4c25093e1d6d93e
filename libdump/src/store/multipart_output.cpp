#include "store/multipart_output.hpp"

#include <algorithm>
#include <cstring>

#include "xendump/error.hpp"

namespace xendump::store {

namespace {
constexpr uint64_t kMinPart = uint64_t{5} << 20;  // S3: every part but the last
constexpr uint64_t kMaxPart = uint64_t{5} << 30;
constexpr uint64_t kMaxParts = 10000;
constexpr size_t kSkipChunk = 1 << 20;
}  // namespace

MultipartOutput::MultipartOutput(s3::Client& client, s3::Url url, s3::UploadOptions options)
    : client_(client), url_(std::move(url)), opt_(std::move(options)) {
    if (opt_.part_size < kMinPart || opt_.part_size > kMaxPart)
        throw Error("part size " + std::to_string(opt_.part_size) + " is not 5 MiB to 5 GiB", name());
    if (opt_.in_flight < 1 || opt_.in_flight > 16)
        throw Error("parts in flight " + std::to_string(opt_.in_flight) + " is not 1 to 16", name());
    if (url_.key.empty() || url_.key.back() == '/') throw Error("no object key (s3://BUCKET/KEY)", name());
    upload_id_ = client_.create_multipart_upload(url_, opt_.metadata);
    cur_.reserve(opt_.part_size);
}

MultipartOutput::~MultipartOutput() {
    for (auto& f : flying_) {
        try {
            f.get();
        } catch (...) {
            // The upload is aborted below: its parts go with it.
        }
    }
    abort();
}

void MultipartOutput::abort() noexcept {
    if (done_ || upload_id_.empty()) return;
    try {
        client_.abort_multipart_upload(url_, upload_id_);
    } catch (...) {
        // Unreachable now: the store's lifecycle rules (or the next
        // upload of this key) drop what is left. Nothing to report to.
    }
    upload_id_.clear();
}

void MultipartOutput::check_cancel() const {
    if (cancel_ && cancel_->load()) throw Error("cancelled", name());
}

io::SealedTempFile& MultipartOutput::spool() {
    if (!spool_) spool_ = std::make_unique<io::SealedTempFile>("the held-back parts of " + name());
    return *spool_;
}

bool MultipartOutput::part_held(uint64_t k) const {
    const uint64_t b = k * opt_.part_size, e = b + opt_.part_size;
    return std::any_of(holds_.begin(), holds_.end(), [&](const auto& h) { return h.first < e && b < h.second; });
}

void MultipartOutput::put(uint64_t at, const std::byte* data, uint64_t n) {
    if (done_) throw Error("internal error: writing after the upload was completed", name(), at);
    if (at != cur_k_ * opt_.part_size + cur_.size()) throw Error("internal error: a stream write out of place", name(), at);
    while (n > 0) {
        check_cancel();
        const size_t take = static_cast<size_t>(std::min<uint64_t>(n, opt_.part_size - cur_.size()));
        if (data) {
            cur_.insert(cur_.end(), data, data + take);
            data += take;
        } else {
            cur_.resize(cur_.size() + take);
        }
        n -= take;
        if (cur_.size() == opt_.part_size) part_full();
    }
}

void MultipartOutput::part_full() {
    const uint64_t k = cur_k_;
    if (k + 1 >= kMaxParts)
        throw Error("the dump is larger than " + std::to_string(kMaxParts) + " parts of " +
                        std::to_string(opt_.part_size >> 20) + " MiB: raise the part size",
                    name(), k * opt_.part_size);
    if (part_held(k)) {
        spool().write(k * opt_.part_size, cur_.data(), cur_.size());
        held_parts_.insert(k);
        cur_.clear();
    } else {
        upload(k, std::move(cur_));
        cur_ = Buffer();
        if (!spare_.empty()) {
            cur_ = std::move(spare_.back());
            spare_.pop_back();
        }
        cur_.clear();
        cur_.reserve(opt_.part_size);
    }
    ++cur_k_;
}

void MultipartOutput::upload(uint64_t k, Buffer buf) {
    while (flying_.size() >= opt_.in_flight) wait_oldest();
    check_cancel();
    flying_.push_back(std::async(std::launch::async, [this, k, b = std::move(buf)]() mutable {
        const auto number = static_cast<unsigned>(k + 1);
        std::string etag = client_.upload_part(url_, upload_id_, number, b);
        {
            std::lock_guard lock(parts_mutex_);
            parts_.push_back({number, std::move(etag), b.size()});
        }
        b.clear();
        return std::move(b);
    }));
}

void MultipartOutput::wait_oldest() {
    auto f = std::move(flying_.front());
    flying_.erase(flying_.begin());
    spare_.push_back(f.get());  // an upload's Error comes out here
}

void MultipartOutput::hold(uint64_t offset, uint64_t n) {
    if (n == 0) return;
    for (uint64_t k = part_of(offset); k <= part_of(offset + n - 1); ++k)
        if (k < cur_k_ && !held_parts_.count(k))
            throw Error("internal error: holding bytes of a part already uploaded", name(), offset);
    holds_.emplace_back(offset, offset + n);
}

void MultipartOutput::rewrite(uint64_t offset, std::span<const std::byte> data) {
    while (!data.empty()) {
        const uint64_t k = part_of(offset);
        const size_t piece = static_cast<size_t>(std::min<uint64_t>(data.size(), (k + 1) * opt_.part_size - offset));
        if (k == cur_k_) {
            const uint64_t in = offset - k * opt_.part_size;
            if (in + piece > cur_.size()) throw Error("internal error: rewriting bytes not written yet", name(), offset);
            std::memcpy(cur_.data() + in, data.data(), piece);
        } else if (held_parts_.count(k)) {
            spool().write(offset, data.data(), piece);
        } else {
            throw Error("internal error: rewriting bytes of a part already uploaded (not held)", name(), offset);
        }
        offset += piece;
        data = data.subspan(piece);
    }
}

void MultipartOutput::ahead(uint64_t offset, std::span<const std::byte> data) {
    spool().write(offset, data.data(), data.size());
}

void MultipartOutput::skip(uint64_t at, uint64_t n) {
    Buffer chunk(static_cast<size_t>(std::min<uint64_t>(n, kSkipChunk)));
    while (n > 0) {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(n, chunk.size()));
        spool().read(at, chunk.data(), take);
        put(at, chunk.data(), take);
        at += take;
        n -= take;
    }
}

void MultipartOutput::finish(uint64_t size) {
    check_cancel();
    if (size != cur_k_ * opt_.part_size + cur_.size()) throw Error("internal error: finished out of place", name(), size);
    // The last part (shorter, or the only one) goes from memory: nothing
    // rewrites it any more.
    if (!cur_.empty() || cur_k_ == 0) upload(cur_k_, std::move(cur_));
    cur_ = Buffer();
    // Then the parts kept back, with their rewrites.
    for (uint64_t k : held_parts_) {
        Buffer b;
        while (flying_.size() >= opt_.in_flight) wait_oldest();
        if (!spare_.empty()) {
            b = std::move(spare_.back());
            spare_.pop_back();
        }
        b.resize(opt_.part_size);
        spool().read(k * opt_.part_size, b.data(), b.size());
        upload(k, std::move(b));
    }
    while (!flying_.empty()) wait_oldest();
    spare_.clear();
    spare_.shrink_to_fit();
    std::sort(parts_.begin(), parts_.end(), [](const auto& a, const auto& b) { return a.number < b.number; });
    const uint64_t expected = size == 0 ? 1 : (size + opt_.part_size - 1) / opt_.part_size;
    if (parts_.size() != expected)
        throw Error("internal error: " + std::to_string(parts_.size()) + " parts uploaded, " + std::to_string(expected) +
                        " expected",
                    name());
    check_cancel();
    client_.complete_multipart_upload(url_, upload_id_, parts_);
    done_ = true;
    // The object as the store has it now: its size must be the dump's.
    const auto info = client_.head_object(url_);
    if (!info || info->size != size) {
        if (info) client_.delete_object(url_);
        throw Error("the completed object holds " + (info ? std::to_string(info->size) : std::string("nothing")) +
                        " bytes, not the " + std::to_string(size) + " written (removed)",
                    name());
    }
}

}  // namespace xendump::store
