// An object in S3-compatible storage read with random access (issue 34 item
// 4): the readers' byte source for a dump given as s3://BUCKET/KEY. Reads go
// through a cache of aligned blocks, fetched by ranged GETs, so that the
// many small reads of a reader (headers, notes, table windows, the pages of
// a kernel's symbols, log and stacks) cost a few requests, and memory stays
// at `blocks` blocks whatever the object's size. Small blocks (64 KiB): a
// reader's reads scatter over the guest's memory, and a block fetched for a
// few bytes costs its whole size. A GET brings the blocks the read spans,
// and while the reads go on where a GET ended (verify, dump going through
// the object; a few such streams at once) more at a time, doubling up to a
// quarter of the cache (1 MiB). Blocks are evicted least recently used first. What the
// reads fetched is counted (fetched()): `xen-dumpctl info` shows it, the
// tests bound it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "io/random_access.hpp"
#include "util/lru_slots.hpp"
#include "xendump/s3.hpp"

namespace xendump::s3 {

class ObjectReader final : public io::RandomAccess {
public:
    static constexpr uint64_t kBlockSize = uint64_t{64} << 10;
    static constexpr size_t kBlocks = 64;  // 4 MiB

    // Asks the object's size (HEAD); Error naming the object when there is
    // no such object or the store cannot be asked.
    ObjectReader(std::shared_ptr<Client> client, Url object, uint64_t block_size = kBlockSize,
                 size_t blocks = kBlocks);
    ~ObjectReader() override;

    uint64_t size() const override { return size_; }
    const std::string& name() const override { return name_; }
    // When the object was stored (the HEAD's Last-Modified), in seconds
    // since the epoch; 0 when the store did not say or said it otherwise.
    int64_t last_modified() const noexcept { return last_modified_; }
    size_t read_at(uint64_t offset, std::span<std::byte> out) const override;

    struct Fetched {
        uint64_t requests = 0;  // ranged GETs
        uint64_t bytes = 0;     // of object bytes they brought
    };
    Fetched fetched() const;
    uint64_t block_size() const noexcept { return block_size_; }

private:
    // Copies the object's bytes from block `index`'s byte `in` on into `out`
    // (block `index` at least); returns how many.
    size_t copy_block(uint64_t index, uint64_t in, std::span<std::byte> out) const;

    std::shared_ptr<Client> client_;
    Url object_;
    std::string name_;
    uint64_t size_ = 0;
    int64_t last_modified_ = 0;
    uint64_t block_size_;
    // Reads going on where a GET ended: the block after it, and how many
    // blocks the GET brought.
    struct Stream {
        uint64_t next = UINT64_MAX;
        uint64_t run = 1;
    };
    mutable std::mutex mutex_;  // blocks_, streams_, replace_, fetched_: never held during a GET
    mutable util::LruSlots<std::vector<std::byte>> blocks_;
    uint64_t max_run_;  // blocks a GET brings at most
    mutable std::array<Stream, 4> streams_;
    mutable size_t replace_ = 0;  // the stream a read elsewhere takes over next (in turn)
    mutable Fetched fetched_;
};

// The object at `url` (s3://BUCKET/KEY) with a client whose settings come
// from the environment (settings_from_environment: AWS_* variables, the
// shared credentials file).
std::unique_ptr<ObjectReader> open_object(const std::string& url, uint64_t block_size = ObjectReader::kBlockSize);

}  // namespace xendump::s3
