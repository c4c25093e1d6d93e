// Which readers open a compact (kdump) file of each compression: what
// `xen-dumpctl info` tells the operator before the file is handed on. The
// facts are those of Debian 12's packages, checked against the readers
// themselves by tests/kdump (KdumpInterop.InfoNamesTheReadersOfEachCompression):
//  - makedumpfile 1.7.2 is built with lzo and without zstd and snappy
//    (`makedumpfile -v`): it reads zlib and lzo pages only;
//  - crash 8.0.2 and libkdumpfile 0.5.1 (and drgn, which reads kdump files
//    through libkdumpfile) read zlib, lzo and zstd;
//  - lz4 has no flag of makedumpfile's format (0x40 is this project's,
//    xen-dump-core(5)): only this project's tools read it.
// A file of any compression may also hold pages stored as deflate (zlib's
// flag), which every reader reads.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace xendump::ctl {

struct CompactReaders {
    std::vector<std::string> read;    // programs that read the file
    std::string not_read;                // who does not, and why ("" when all do)
};

// For a compression's name ("none", "zlib", "lzo", "zstd", "lz4"); an
// unknown name is read by this project's tools only.
CompactReaders compact_readers(std::string_view compression);

// Of `carried` (the readers of the compact file a flattened one carries),
// those that read the flattened file itself: crash 8.0.2 (it reads
// makedumpfile's flattened format) and this project's tools; the others
// (libkdumpfile, drgn, makedumpfile) once it is rearranged, which the note says.
CompactReaders flattened_readers(const CompactReaders& carried);

// One line: "crash, libkdumpfile, drgn, xen-dumpctl, xen-dump-convert; not …".
std::string readers_line(const CompactReaders& r);

}  // namespace xendump::ctl
