#include "sim/sim_writer.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "sim/pattern.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"

namespace xendump::sim {

std::string writer_pattern_name(WriterPattern p) {
    switch (p) {
        case WriterPattern::sequential: return "sequential";
        case WriterPattern::random: return "random";
        case WriterPattern::hot: return "hot";
    }
    return "?";
}

std::optional<WriterPattern> writer_pattern_from_name(const std::string& name) {
    if (name == "sequential") return WriterPattern::sequential;
    if (name == "random") return WriterPattern::random;
    if (name == "hot") return WriterPattern::hot;
    return std::nullopt;
}

uint64_t writer_target(const WriterSpec& w, uint64_t k) {
    switch (w.pattern) {
        case WriterPattern::sequential: return k % w.pages;
        case WriterPattern::random: return splitmix64(w.seed ^ (k * 0x2545f4914f6cdd1dULL)) % w.pages;
        case WriterPattern::hot: {
            // Half the writes go to a hot sixteenth of the range (a working
            // set written again and again), the rest anywhere.
            const uint64_t r = splitmix64(w.seed ^ (k * 0x2545f4914f6cdd1dULL));
            const uint64_t hot = w.pages / 16 ? w.pages / 16 : 1;
            return (r & 1) ? (r >> 1) % hot : (r >> 1) % w.pages;
        }
    }
    return 0;
}

void fill_written_page(uint64_t pfn, uint64_t generation, std::byte* page) {
    uint64_t words[512];
    words[0] = kWrittenMagic;
    words[1] = pfn;
    words[2] = generation;
    for (unsigned i = 3; i < 512; ++i) words[i] = splitmix64((pfn << 24) ^ (generation << 9) ^ i ^ kWrittenMagic);
    std::memcpy(page, words, sizeof words);
}

std::optional<WrittenStamp> read_written_stamp(std::span<const std::byte> page) {
    if (page.size() != 4096) return std::nullopt;
    uint64_t head[3];
    std::memcpy(head, page.data(), sizeof head);
    if (head[0] != kWrittenMagic) return std::nullopt;
    std::byte expected[4096];
    fill_written_page(head[1], head[2], expected);
    if (std::memcmp(expected, page.data(), sizeof expected) != 0) return std::nullopt;
    return WrittenStamp{head[1], head[2]};
}

SharedWords::SharedWords(const std::filesystem::path& path, uint64_t words) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!fd) throw_errno("cannot open", path.string());
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw_errno("cannot stat", path.string());
    if (static_cast<uint64_t>(st.st_size) < words * 8 && ::ftruncate(fd.get(), static_cast<off_t>(words * 8)) != 0)
        throw_errno("cannot size", path.string());
    words_ = words;
    if (words_ == 0) return;
    void* p = ::mmap(nullptr, words_ * 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (p == MAP_FAILED) throw_errno("cannot map", path.string());
    data_ = static_cast<uint64_t*>(p);
}

SharedWords::~SharedWords() {
    if (data_) ::munmap(data_, words_ * 8);
}

SharedWords::SharedWords(SharedWords&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), words_(std::exchange(o.words_, 0)) {}

SharedWords& SharedWords::operator=(SharedWords&& o) noexcept {
    if (this != &o) {
        if (data_) ::munmap(data_, words_ * 8);
        data_ = std::exchange(o.data_, nullptr);
        words_ = std::exchange(o.words_, 0);
    }
    return *this;
}

}  // namespace xendump::sim
