// The v1 writer's pipeline (pipeline/pipeline.hpp) as the library runs it
// for write_dump and write_dump_file, open to more stages: observers of the
// pages besides the guest kernel's, and a read-back of a file's pages.
#pragma once

#include <span>
#include <string>

#include "io/object_output.hpp"
#include "io/random_access.hpp"
#include "pipeline/observer.hpp"
#include "writer/live_rounds.hpp"
#include "xendump/dump_spec.hpp"
#include "xendump/page_source.hpp"
#include "xendump/pages_read_back.hpp"
#include "xendump/writer.hpp"

namespace xendump::writer {

// Writes a v1 file to `fd` (`name` in errors). `observers` see every page
// after the guest kernel's observer (when options.guest_kernel and the
// output is seekable). `read_back`: when given (and the file has digests),
// the pages the write-behind drops are read back from the file first.
// `live`: a live dump's rounds, run before the trailer (live_rounds.hpp).
// `object`: written there instead of `fd` (positional, as a file; not
// encrypted: Error with recipients); with `live`, `object_bytes` reads its
// bytes back (the re-digest after the final round).
WriteResult write_v1(int fd, bool seekable, const std::string& name, const DumpSpec& spec, PageSource& pages,
                     const WriteOptions& options, std::span<pipeline::PageObserver* const> observers = {},
                     PagesReadBack* read_back = nullptr, const LiveRounds* live = nullptr,
                     io::ObjectOutput* object = nullptr, const io::RandomAccess* object_bytes = nullptr);

}  // namespace xendump::writer
