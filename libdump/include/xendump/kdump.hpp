// The compact dump: makedumpfile's compressed kdump ("KDUMP   ") file, with
// every note of the v1 format in its note area (xen-dump-core(5), "The
// compact format"). crash, libkdumpfile and makedumpfile read it; so does
// DumpReader (FileFormat::kdump).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string_view>

#include "xendump/dump_spec.hpp"
#include "xendump/page_source.hpp"
#include "xendump/writer.hpp"

namespace xendump {

// How each page is compressed. A page that does not shrink is stored raw,
// as makedumpfile does. lz4 has no flag in makedumpfile's format: only
// DumpReader reads those files (see xen-dump-core(5)).
enum class Compression { none, zstd, lz4, lzo, zlib };
std::string_view to_string(Compression c);
// "none", "zstd", "lz4", "lzo", "zlib"; throws Error for anything else.
Compression compression_from_string(std::string_view s);

struct KdumpOptions {
    Compression compression = Compression::zstd;
    // digests, guest_kernel, on_progress, on_warning, cancel and
    // check_before_publish as for a v1 file; `sparse` leaves the shared zero
    // page and the gaps as holes; `threads` compress the pages (1 to
    // kMaxWriteThreads; the output is the same bytes whatever the number).
    WriteOptions write;
    // When the source's pages are a selection (kernel/dump_level.hpp): the
    // level they were selected with (the sub header's dump_level, as
    // makedumpfile records -d) and every page that exists (the 1st bitmap,
    // ascending pfns; the source's entries are the 2nd). Empty: the source's.
    unsigned dump_level = 0;
    std::span<const PageEntry> present = {};
    // Write makedumpfile's flattened format (what makedumpfile -F writes,
    // xen-dump-core(5) "The flattened stream"): the same file, each write a
    // record for its offset, the head last; `makedumpfile -R`, `xen-dump-convert`
    // and DumpReader make the file of it. `sparse` has no effect (the
    // stream leaves zero runs out instead); with write.recipients it is the
    // age file of the stream. write_kdump_flattened() always writes it.
    bool flattened = false;
};

// Writes `path` atomically (a temporary in the same directory, fsync, then
// published; Error if `path` exists). Pages come from `pages` in pfn order,
// once. The result's nr_runs counts runs of consecutive pfns. The entries of
// `pages` (and `present`) are read a window at a time (nr_entries(),
// read_entries()): memory as in xendump/writer.hpp.
WriteResult write_kdump_file(const std::filesystem::path& path, const DumpSpec& spec, PageSource& pages,
                             const KdumpOptions& options = {});

// Streams the same file to `fd` in makedumpfile's flattened format
// (options.flattened taken as set), front to back: a pipe is fine (`|
// makedumpfile -R FILE`, kdump-tools' ssh path). Memory as write_kdump_file,
// plus two 4 MiB buffers that gather the records. Nothing is published or
// read back (check_before_publish and room are not used). The result's
// file_size is the bytes of the stream.
WriteResult write_kdump_flattened(int fd, const DumpSpec& spec, PageSource& pages, const KdumpOptions& options = {});

}  // namespace xendump
