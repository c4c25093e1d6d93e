// An unnamed temporary file (O_TMPFILE, or a name unlinked at once where the
// filesystem lacks it) in $TMPDIR, else /var/tmp (large, and private to the
// service: PrivateTmp=): it goes with its fd, even on a crash. For what the
// writers and the converter keep out of memory (the page digests, a legacy
// source's tables).
#pragma once

#include <string>

#include "xendump/fd.hpp"

namespace xendump::io {

struct UnnamedTempFile {
    UniqueFd fd;
    std::string dir;  // where it is, for errors
};

// Throws Error (errno's text, naming the directory) when none can be made;
// `what` says what the file is for ("the page digests"). `dir`: made there
// instead (a consistent live dump's image, beside the file it becomes).
UnnamedTempFile unnamed_temp_file(const std::string& what, const std::string& dir = {});

}  // namespace xendump::io
