// Converting old Xen dump files (legacy xc_core, Xen's section-only ELF of
// `xl dump-core`) into xen-dump-core v1 files, or any of them and v1 files
// into compact (kdump) files: sniff the format from the bytes
// (never the name), decide the layout, write through the v1 writer, and
// record which source an output came from (SOURCE_ID=, xen-dump-core(5)).
// The program xen-dump-convert adds batches, reports and the command line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "xendump/kdump.hpp"
#include "xendump/reader.hpp"
#include "xendump/writer.hpp"

namespace xendump {

enum class InputFormat {
    xc_core,   // legacy xc_core (Xen <= 3.0.4)
    xen_elf,   // Xen's section-only ELF dump-core (xl dump-core)
    v1,        // already current (converted only to the compact format)
    kdump,     // a compact (kdump) file: never converted
    unknown,
    // makedumpfile's flattened format (makedumpfile -F, xen-dump-core(5)
    // "The flattened stream"): rearranged into the file it carries, as
    // makedumpfile -R does (rearrange_flattened)
    flattened,
};
// "xc_core", "xen-elf", "v1", "kdump", "unknown", "flattened"
std::string_view to_string(InputFormat f);

// Reads the first bytes (and for ELF, the program header count). Throws
// Error when the file cannot be read (regular files only). An age-encrypted
// file (xen-dump-core(5) "Encrypted dumps") is the format of its plaintext,
// read with `open`'s identities (Error saying it is encrypted without one).
InputFormat sniff_format(const std::filesystem::path& path);
InputFormat sniff_format(const std::filesystem::path& path, const OpenOptions& open);

struct ConvertOptions {
    std::optional<std::string> system_map;  // a System.map for the guest's p2m symbols
    bool allow_inferred = false;            // accept a layout decided without a symbol
    std::string writer_name = "xen-dump-convert";  // WRITER= of the output
    // A compact file (makedumpfile's compressed kdump format) instead of v1;
    // then v1 inputs are converted too.
    bool kdump = false;
    Compression compression = Compression::zstd;
    // With kdump: keep only the pages makedumpfile -d keeps at this level
    // (0-31, xendump/kernel/dump_level.hpp), classified from the guest
    // kernel's struct pages found through its VMCOREINFO (v1 and xl
    // dump-core inputs). A guest without one, and an xc_core input, get
    // level 1 at most: write.on_warning says so.
    unsigned dump_level = 0;
    // Handed to the writer as they are (digests, threads, progress, warnings,
    // cancel; the guest kernel is always looked for). An output that
    // write.check_before_publish rejects (by throwing) never appears.
    WriteOptions write;
    // The identities of an encrypted input (any format: the input is read
    // through its plaintext, a 64 KiB chunk at a time, each authenticated;
    // SOURCE_ID= then digests the plaintext). Whether the output may be
    // plaintext is the caller's choice: write.recipients encrypts it.
    OpenOptions open;
};

struct ConversionPlan {
    InputFormat format = InputFormat::unknown;
    std::string layout;      // LAYOUT= value
    uint64_t pages = 0;      // pages the output will hold
    bool inferred = false;   // the layout was inferred (see allow_inferred)
};

// Everything but the writing (for a dry run and reports). Throws Error
// naming the file and offset; a v1 input plans nothing (format v1, 0 pages)
// unless options.kdump, a kdump input never; a flattened one is read in
// place (DumpReader) for its pages (0 when it cannot be).
ConversionPlan plan_conversion(const std::filesystem::path& input, const ConvertOptions& options = {});

// Writes `output` atomically (never replacing a file). Throws Error; on error
// nothing appears under `output`. `input` and `output` may be objects of an
// S3-compatible store, s3://BUCKET/KEY (xendump/s3.hpp; the client's
// settings from the environment, settings_from_environment): an input is
// read by ranged GETs (never written), its identity's mtime the object's
// Last-Modified; an output is streamed into a multipart upload that
// completes only once the file is whole and is aborted on any error, so
// nothing appears under the key (not encrypted: Error with
// write.recipients; a flattened input is not rearranged into an object;
// check_before_publish is not called for an object). An object that exists
// under the key is replaced: the caller decides, as for a file, before.
ConversionPlan convert_file(const std::filesystem::path& input, const std::filesystem::path& output,
                            const ConvertOptions& options = {});

// Rearranges the flattened stream read from `fd` (a pipe, or a file at its
// position; read front to back, named `name` in errors) into `output`,
// atomically as convert_file writes (never replacing a file, nothing
// under `output` on error): the file it carries, byte for byte as
// makedumpfile -R writes it (records in stream order, a later one winning,
// holes where none wrote). convert_file does this for a flattened input
// file. Of `options`, only write.cancel, write.on_progress (pages_* and
// bytes_* count the stream's bytes, bytes_total 0 when unknown) and
// write.check_before_publish (given the unpublished file; it decides
// whether it appears) are used: the bytes are not converted, filtered or
// encrypted. Throws Error naming the stream and the offset in it of a
// header or record that is wrong (truncated, a negative offset or size,
// a record past 1 PiB, bytes after the end record). The plan's format is
// flattened, its layout "rearranged;records=N", its pages those of the
// output when a reader opens it (0 when none does).
ConversionPlan rearrange_flattened(int fd, const std::string& name, const std::filesystem::path& output,
                                   const ConvertOptions& options = {});

// Which source file an output was converted from: SOURCE_ID= of the output's
// NT_XEN_DOMAIN. A converter compares it with the file at hand before it
// calls an output "already converted" or deletes a source: a file of the
// same name, another dump of the same guest or a copy that changed is not
// the source. The size and modification time, and an XXH3-128 digest of
// everything but the page data.
struct SourceIdentity {
    uint64_t size = 0;
    int64_t mtime_sec = 0;
    uint32_t mtime_nsec = 0;
    std::string digest;  // "xxh3-128:" and 32 hex digits

    // "size=N;mtime=SECONDS.NANOSECONDS;digest=xxh3-128:HEX"
    std::string value() const;
    std::string mtime_text() const;  // "SECONDS.NANOSECONDS"
    // Nullopt when `value` is not of that form.
    static std::optional<SourceIdentity> parse(std::string_view value);
    // Empty when they are the same file; else what differs, this file's
    // value first ("size 4096, recorded 8192").
    std::string difference_from(const SourceIdentity& recorded) const;
    bool operator==(const SourceIdentity&) const = default;
};

// Opens `path` (regular files only) and identifies it. Throws Error (naming
// the file and offset) when the parts it covers cannot be read or the file
// is neither an xc_core nor an ELF file.
SourceIdentity identify_source(const std::filesystem::path& path);
// The same for an input that may be encrypted: its plaintext's size and
// digest (the file's modification time), read with `open`'s identities.
SourceIdentity identify_source(const std::filesystem::path& path, const OpenOptions& open);

}  // namespace xendump
