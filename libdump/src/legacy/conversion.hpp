// Converting one old dump file into a v1 file: sniff the format from the
// bytes (never the name), decide the layout, write through the v1 writer.
// The program xen-dump-convert adds batches, reports and the command line.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "xendump/kdump.hpp"
#include "xendump/writer.hpp"

namespace xendump::legacy {

enum class InputFormat {
    xc_core,   // legacy xc_core (Xen <= 3.0.4)
    xen_elf,   // Xen's section-only ELF dump-core (xl dump-core)
    v1,        // already current (converted only to the compact format)
    kdump,     // a compact (kdump) file: never converted
    unknown,
};
std::string_view to_string(InputFormat f);

// Reads the first bytes (and for ELF, the program header count).
// Throws Error when the file cannot be read.
InputFormat sniff_format(const std::filesystem::path& path);

struct ConvertOptions {
    std::optional<std::string> system_map;
    bool allow_inferred = false;
    bool digests = true;
    std::function<void(const WriteProgress&)> on_progress;
    // WriteOptions::check_before_publish: an output it rejects never appears.
    std::function<void(const std::filesystem::path& unpublished, const PagesReadBack& read_back)> check_output;
    const std::atomic<bool>* cancel = nullptr;
    std::string writer_name = "xen-dump-convert";
    // A compact file (makedumpfile's compressed kdump format) instead of v1;
    // then v1 inputs are converted too.
    bool kdump = false;
    Compression compression = Compression::zstd;
};

struct Plan {
    InputFormat format = InputFormat::unknown;
    std::string layout;      // LAYOUT= value
    uint64_t pages = 0;      // pages the output will hold
    bool inferred = false;
};

// Everything but the writing (for --dry-run and reports). Throws Error.
Plan plan_conversion(const std::filesystem::path& input, const ConvertOptions& options);

// Writes `output` atomically (never replacing a file). Throws Error; on error
// nothing appears under `output`.
Plan convert_file(const std::filesystem::path& input, const std::filesystem::path& output,
                  const ConvertOptions& options);

}  // namespace xendump::legacy
