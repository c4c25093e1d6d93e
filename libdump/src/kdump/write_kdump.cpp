// write_kdump_file, write_kdump_flattened and write_kdump_selection: the
// compact format's encoder (kdump/encoder.hpp) in the page pipeline
// (pipeline/pipeline.hpp), with the guest kernel's observer when asked for,
// into a Sink over a file that AtomicFile publishes only when complete, or
// over a flattened stream (io/flattened.hpp) onto a file descriptor.
#include "kdump/write_kdump.hpp"

#include <optional>
#include <vector>

#include "age/age.hpp"
#include "elfcore/entries_only.hpp"
#include "elfcore/runs.hpp"
#include "io/flattened.hpp"
#include "io/object_output.hpp"
#include "io/sink.hpp"
#include "kdump/encoder.hpp"
#include "kdump/kept_entries.hpp"
#include "kernel/pfn_runs.hpp"
#include "pipeline/dump_level_selector.hpp"
#include "pipeline/kernel_observer.hpp"
#include "pipeline/pipeline.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/reader.hpp"

namespace xendump {

namespace {

// What the file stores: `stored`, the pages of `source` that the pass keeps
// (every page without `select`); `present` for the 1st bitmap (null: the
// same). Both are read a window at a time.
struct Stored {
    const pipeline::PageSelector* select = nullptr;
    const PageSource& pages;
    const PageSource* present = nullptr;
    unsigned dump_level = 0;
};

// Onto `fd`: positional (a file) unless options.flattened, then a
// flattened stream, written front to back (pwrite from 0 when `seekable`);
// or into `object` (not flattened, not encrypted) when there is one.
WriteResult write_kdump_to(int fd, bool seekable, const std::string& name, const DumpSpec& spec_in,
                           PageSource& source, const Stored& stored, const KdumpOptions& options,
                           io::ObjectOutput* object = nullptr) {
    const WriteOptions& wo = options.write;
    WriteResult r;
    // The guest kernel as for a v1 file (writer/write_dump.cpp): NT_PRSTATUS
    // from the vcpu contexts, the rest found in the pages during the pass.
    std::optional<DumpSpec> with_prstatus;
    if (wo.guest_kernel) pipeline::add_prstatus(with_prstatus.emplace(spec_in), r.warnings);
    const DumpSpec& spec = with_prstatus ? *with_prstatus : spec_in;
    for (const auto& w : r.warnings)
        if (wo.on_warning) wo.on_warning(w);
    kdump::KdumpEncoder encoder(spec, stored.pages, stored.present, options.compression, wo.digests,
                                stored.dump_level, source, name);
    const std::vector<age::Recipient> recipients = age::parse_recipient_list(wo.recipients);
    std::optional<io::FlattenedOutput> flat;
    std::optional<io::Sink> positional;
    if (object) {
        if (!recipients.empty()) throw Error(io::kEncryptedNotStreamed, name);
        if (options.flattened) throw Error("an object holds the compact file itself, not its flattened stream", name);
        positional.emplace(*object, name);
    } else if (options.flattened) {
        flat.emplace(fd, seekable, name, recipients, wo.threads);
        positional.emplace(*flat, name);
    } else {
        positional.emplace(fd, true, wo.sparse, name, recipients, wo.threads);
    }
    io::Sink& sink = *positional;
    sink.cancel_on(wo.cancel);
    std::optional<pipeline::KernelObserver> kernel;
    pipeline::Stages stages{source, stored.select, {}, encoder};
    if (wo.guest_kernel) stages.observe.push_back(&kernel.emplace(source));

    pipeline::Outcome out = pipeline::run(stages, sink, wo);
    for (auto& w : out.found.warnings) {
        if (wo.on_warning) wo.on_warning(w);
        r.warnings.push_back(std::move(w));
    }
    r.file_size = flat ? flat->stream_size() : sink.file_size();
    r.nr_pages = stored.pages.nr_entries();
    r.nr_runs = elfcore::count_runs(stored.pages);
    r.unreadable_pfns = std::move(out.pass.unreadable_pfns);
    return r;
}

WriteResult write_published(const std::filesystem::path& path, const DumpSpec& spec, PageSource& source,
                            const Stored& stored, const KdumpOptions& options) {
    try {
        AtomicFile file(path);
        WriteResult r = write_kdump_to(file.fd(), true, path.string(), spec, source, stored, options);
        // Nothing is read back behind a compact file's writes: its check reads the pages.
        std::function<void(const std::filesystem::path&)> check;
        // An encrypted file cannot be read back without a private key.
        if (options.write.check_before_publish && options.write.recipients.empty())
            check = [&](const std::filesystem::path& p) { options.write.check_before_publish(p, VerifyOptions{}); };
        file.commit(check);
        return r;
    } catch (const Error& e) {
        throw e.with_object(path.string());
    }
}

// A flattened stream onto `fd` (a pipe, or a file at its position), written
// front to back; nothing published.
WriteResult write_streamed(int fd, const DumpSpec& spec, PageSource& source, const Stored& stored,
                           const KdumpOptions& options) {
    const std::string name = io::fd_name(fd);
    KdumpOptions flattened = options;
    flattened.flattened = true;
    try {
        return write_kdump_to(fd, false, name, spec, source, stored, flattened);
    } catch (const Error& e) {
        throw e.with_object(name);
    }
}

// Into an object: its bytes as write_published's file, nothing published
// (the caller's ObjectOutput completes the upload).
WriteResult write_object(const kdump::Destination& to, const DumpSpec& spec, PageSource& source, const Stored& stored,
                         const KdumpOptions& options) {
    try {
        return write_kdump_to(-1, true, to.object_name, spec, source, stored, options, to.object);
    } catch (const Error& e) {
        throw e.with_object(to.object_name);
    }
}

// To `path` (published) when there is one, into the object, else to `fd`
// (streamed).
WriteResult write_to(const kdump::Destination& to, const DumpSpec& spec, PageSource& source, const Stored& stored,
                     const KdumpOptions& options) {
    if (to.path) return write_published(*to.path, spec, source, stored, options);
    if (to.object) return write_object(to, spec, source, stored, options);
    return write_streamed(to.fd, spec, source, stored, options);
}

Stored every_page(PageSource& pages, const elfcore::EntriesOnly& present, const KdumpOptions& options) {
    return {nullptr, pages, options.present.empty() ? nullptr : &present, options.dump_level};
}

}  // namespace

WriteResult write_kdump_file(const std::filesystem::path& path, const DumpSpec& spec, PageSource& pages,
                             const KdumpOptions& options) {
    return kdump::write_kdump_every_page(path, spec, pages, options);
}

WriteResult write_kdump_flattened(int fd, const DumpSpec& spec, PageSource& pages, const KdumpOptions& options) {
    return kdump::write_kdump_every_page(kdump::Destination::stream(fd), spec, pages, options);
}

namespace kdump {

WriteResult write_kdump_every_page(const Destination& to, const DumpSpec& spec, PageSource& pages,
                                   const KdumpOptions& options) {
    const elfcore::EntriesOnly present(options.present);
    return write_to(to, spec, pages, every_page(pages, present, options), options);
}

WriteResult write_kdump_selection(const Destination& to, const DumpSpec& spec, PageSource& source,
                                  const kernel::PageSelection& selection, const KdumpOptions& options) {
    kernel::PfnBitmap kept;
    try {
        kept = pipeline::selected_pfns(source, pipeline::DumpLevelSelector(selection), options.write);
    } catch (const Error& e) {
        throw e.with_object(to.name());
    }
    // The pass keeps exactly the pages the layout was planned for.
    const pipeline::PfnBitmapSet planned(kept);
    const pipeline::PfnSetSelector exactly(planned);
    const KeptEntries stored(source, kept);
    return write_to(to, spec, source, {&exactly, stored, &source, selection.level}, options);
}

kernel::PageSelection zero_pages_only(const PageSource& pages, unsigned level, const std::string& why) {
    kernel::PageSelection s;
    s.requested_level = level;
    s.level = level & kernel::kExcludeZero;
    if (s.level != level) s.limits.push_back(why + ": level " + std::to_string(s.level) + " at most (zero pages)");
    s.keep = kernel::PfnBitmap(end_pfn(pages));
    for_each_entry_window(pages, [&](uint64_t, std::span<const PageEntry> w) {
        kernel::set_pfns(s.keep, w);
    });
    return s;
}

}  // namespace kdump

}  // namespace xendump
