// Which source file an output was converted from: SOURCE_ID= of the output's
// NT_XEN_DOMAIN (xen-dump-core(5)). The converter compares it with the file
// at hand before it calls an output "already converted" and before it
// deletes a source (--remove-source): a file of the same name, another dump
// of the same guest or a copy that changed is not the source.
//
// Cheap: the size and modification time from fstat, and an XXH3-128 digest
// of everything but the page data (xc_core: header, vcpu contexts and index;
// Xen's ELF: ELF header, section headers and every section but .xen_pages),
// a few MiB for a dump of many GiB.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "legacy/byte_source.hpp"

namespace xendump::legacy {

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

// The identity of a source already open. Throws Error (naming the file and
// offset) when the parts it covers cannot be read or the file is neither an
// xc_core nor an ELF file.
SourceIdentity identify_source(const FileByteSource& src);

// Opens `path` (regular files only) and identifies it.
SourceIdentity identify_source(const std::filesystem::path& path);

}  // namespace xendump::legacy
