// A dump streamed into an S3 multipart upload (issue 34 item 2, "stream"),
// under io::Sink as its io::ObjectOutput.
//
// The object is cut into parts of part_size bytes (the last shorter), part
// k holding [(k-1) * part_size, k * part_size). A part is uploaded as soon
// as the stream has filled it, with at most `in_flight` uploads running at
// once on threads of their own (the writer waits for the oldest when they
// are all busy): memory is (1 + in_flight) parts, whatever the dump's size.
//
// What a writer patches after the stream passed it: v1's late notes, the
// kernel image segment's program header and e_phnum in the head (declared
// with Sink::hold), a compact file's head, bitmaps and descriptors (placed
// with Sink::reserve). A part that holds any such byte is not uploaded when
// full: it goes to a sealed temporary file (io/sealed_temp_file.hpp, no
// plaintext on a disk), takes the rewrites there, and is uploaded by
// finish(), after the others. A v1 dump holds back its first part(s) (the
// head), a compact one the parts of its head (its descriptors: 24 bytes a
// page kept). Bytes written ahead (v1's page digests, into the trailer,
// Sink::write_ahead) wait in the same file until the stream reaches them.
// Bytes not declared and rewritten after their part went are an Error.
//
// finish() completes the upload and checks the object's size (HEAD); on
// any error, a cancel, or destruction before finish(), the upload is
// aborted: no object appears under the key, and no part stays stored.
#pragma once

#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "io/object_output.hpp"
#include "io/sealed_temp_file.hpp"
#include "xendump/s3.hpp"

namespace xendump::store {

class MultipartOutput final : public io::ObjectOutput {
public:
    // Creates the upload at once: wrong credentials or a missing bucket fail
    // here, before a guest is paused.
    MultipartOutput(s3::Client& client, s3::Url url, s3::UploadOptions options = {});
    ~MultipartOutput() override;  // aborts the upload unless finish() completed it
    MultipartOutput(const MultipartOutput&) = delete;
    MultipartOutput& operator=(const MultipartOutput&) = delete;

    void put(uint64_t at, const std::byte* data, uint64_t n) override;
    void hold(uint64_t offset, uint64_t n) override;
    void rewrite(uint64_t offset, std::span<const std::byte> data) override;
    void ahead(uint64_t offset, std::span<const std::byte> data) override;
    void skip(uint64_t at, uint64_t n) override;
    void finish(uint64_t size) override;
    void cancel_on(const std::atomic<bool>* flag) override { cancel_ = flag; }

    const std::string& upload_id() const noexcept { return upload_id_; }
    uint64_t parts_held() const noexcept { return held_parts_.size(); }
    uint64_t parts_uploaded() const noexcept { return parts_.size(); }

private:
    using Buffer = std::vector<std::byte>;
    uint64_t part_of(uint64_t offset) const noexcept { return offset / opt_.part_size; }  // 0-based
    bool part_held(uint64_t k) const;
    void part_full();  // the current part is complete: upload it or keep it back
    void upload(uint64_t k, Buffer buf);
    void wait_oldest();
    void abort() noexcept;
    void check_cancel() const;
    std::string name() const { return url_.str(); }

    s3::Client& client_;
    s3::Url url_;
    s3::UploadOptions opt_;
    std::string upload_id_;
    bool done_ = false;
    const std::atomic<bool>* cancel_ = nullptr;

    uint64_t cur_k_ = 0;  // the part being filled (0-based), cur_ its bytes
    Buffer cur_;
    std::vector<Buffer> spare_;  // buffers back from finished uploads
    std::vector<std::future<Buffer>> flying_;
    std::mutex parts_mutex_;
    std::vector<s3::PartInfo> parts_;
    std::vector<std::pair<uint64_t, uint64_t>> holds_;  // [begin, end) the writer may rewrite
    std::set<uint64_t> held_parts_;                     // parts kept back, in spool_
    std::unique_ptr<io::SealedTempFile> spool_;
    io::SealedTempFile& spool();
};

}  // namespace xendump::store
