// Writing a compact file of the pages a dump level keeps (xendump/kernel/
// dump_level.hpp): what xen-dump-convert --dump-level does. The public
// write_kdump_file (xendump/kdump.hpp) writes every page of its source.
#pragma once

#include <filesystem>
#include <span>
#include <string>

#include "io/sink.hpp"
#include "xendump/dump_spec.hpp"
#include "xendump/kdump.hpp"
#include "xendump/kernel/dump_level.hpp"
#include "xendump/page_source.hpp"
#include "xendump/s3.hpp"

namespace xendump::kdump {

// Where a compact file goes: `path`, published atomically as
// write_kdump_file publishes it, the object `url` of the store, streamed
// into a multipart upload that completes last (store/multipart_output.hpp:
// nothing under the key on any error; not encrypted: Error with
// recipients), or the flattened stream onto `fd`, as write_kdump_flattened
// writes it.
struct Destination {
    Destination(const std::filesystem::path& p) : path(&p) {}  // NOLINT: a path is a destination
    static Destination stream(int fd) {
        Destination d;
        d.fd = fd;
        return d;
    }
    static Destination object(s3::Client& client, const s3::Url& url) {
        Destination d;
        d.client = &client;
        d.url = &url;
        return d;
    }
    std::string name() const { return path ? path->string() : url ? url->str() : io::fd_name(fd); }

    const std::filesystem::path* path = nullptr;
    s3::Client* client = nullptr;
    const s3::Url* url = nullptr;
    int fd = -1;

private:
    Destination() = default;
};

// Writes `to` (a file as write_kdump_file, a stream as
// write_kdump_flattened) from the pages of `source` that `selection` keeps:
// the pfns it keeps, less (level bit 1) the pages that are all zeros, found
// in a first pass over `source` (pipeline::selected_pfns, a
// kernel::PfnBitmap) since the file's layout is planned from its list of
// pages (KeptEntries reads it from `source`). The 1st bitmap names every
// page of `source`, the sub header `selection.level`; `options.dump_level` and `options.present` are
// not used.
WriteResult write_kdump_selection(const Destination& to, const DumpSpec& spec, PageSource& source,
                                  const kernel::PageSelection& selection, const KdumpOptions& options);

// Every page of `pages` to `to` (write_kdump_file's file, or an object).
WriteResult write_kdump_pages(const Destination& to, const DumpSpec& spec, PageSource& pages,
                              const KdumpOptions& options);

// A selection of the pages of `pages` at `level` made without the guest kernel (an
// input the classifier cannot read): every page kept, bit 1 (zero pages)
// at most, and a limit saying so.
kernel::PageSelection zero_pages_only(const PageSource& pages, unsigned level, const std::string& why);

}  // namespace xendump::kdump
