// The simulated guest's writer and its log-dirty bitmap (simulated-host.md,
// "Log-dirty and the writer"): a deterministic program inside the guest that
// writes pages while the guest runs, so that a live dump's consistency can
// be checked, and the bitmap Xen keeps of the pages written while log-dirty
// mode is on.
//
// The writer's clock is the host's own work, not wall time: every page the
// host maps from the running guest lets the writer make `rate` / 1000
// writes first. Write k (k = 0, 1, ...) goes to a pfn chosen from k alone
// (the pattern) and stamps the page with generation k + 1, so the pages of
// any image tell which writes they saw: an image of one instant T holds, for
// every pfn the writer touches, exactly its last write before T.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>

namespace xendump::sim {

enum class WriterPattern { sequential, random, hot };

struct WriterSpec {
    uint64_t rate = 0;  // writes per 1000 pages mapped from the running guest; 0: no writer
    WriterPattern pattern = WriterPattern::sequential;
    uint64_t first_pfn = 0;  // the pfns written: first_pfn … first_pfn + pages − 1
    uint64_t pages = 0;
    uint64_t seed = 1;
    bool enabled() const { return rate != 0 && pages != 0; }
};

std::string writer_pattern_name(WriterPattern p);
std::optional<WriterPattern> writer_pattern_from_name(const std::string& name);

// The page index (0 … pages − 1, from first_pfn) that write k goes to.
uint64_t writer_target(const WriterSpec& w, uint64_t k);

// A written page: word 0 kWrittenMagic, word 1 its pfn, word 2 its
// generation, the other words derived from both.
inline constexpr uint64_t kWrittenMagic = 0x3157524d49534458ULL;  // "XDSIMRW1"
void fill_written_page(uint64_t pfn, uint64_t generation, std::byte* page);
struct WrittenStamp {
    uint64_t pfn = 0;
    uint64_t generation = 0;
};
// The stamp of a page fill_written_page made (its words all checked), or
// nullopt for any other page.
std::optional<WrittenStamp> read_written_stamp(std::span<const std::byte> page);

// A file of u64 words mapped shared and writable: every process of the host
// sees the others' changes at once (callers serialise with HostLock).
class SharedWords {
public:
    SharedWords() = default;
    // Opens `path`, creating it (zeros) with `words` words when missing.
    SharedWords(const std::filesystem::path& path, uint64_t words);
    ~SharedWords();
    SharedWords(SharedWords&& o) noexcept;
    SharedWords& operator=(SharedWords&& o) noexcept;
    SharedWords(const SharedWords&) = delete;
    SharedWords& operator=(const SharedWords&) = delete;

    uint64_t* data() { return data_; }
    const uint64_t* data() const { return data_; }
    uint64_t size() const { return words_; }
    explicit operator bool() const { return data_ != nullptr; }

private:
    uint64_t* data_ = nullptr;
    uint64_t words_ = 0;
};

// writer.state: word 0 the writes made, word 1 the clock's remainder
// (thousandths of a write), then one generation per page of the writer's
// range (0: never written).
inline constexpr uint64_t kWriterHeaderWords = 2;

}  // namespace xendump::sim
