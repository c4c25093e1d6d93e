// Which source file an output was converted from (SourceIdentity, public in
// xendump/convert.hpp): SOURCE_ID= of the output's
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
#include "xendump/convert.hpp"

namespace xendump::legacy {

using xendump::identify_source;
using xendump::SourceIdentity;

// The identity of a source already open. Throws Error (naming the file and
// offset) when the parts it covers cannot be read or the file is neither an
// xc_core nor an ELF file.
SourceIdentity identify_source(const FileByteSource& src);

}  // namespace xendump::legacy
