// write_dump / write_dump_file: the v1 encoder in the page pipeline
// (pipeline/pipeline.hpp), with the guest kernel's observer when asked for,
// into a Sink over a pipe or a file; for a file, the read-back behind the
// write-behind and the atomic publication around it.
#include <optional>
#include <vector>

#include "elfcore/entries_only.hpp"
#include "age/age.hpp"
#include "io/sink.hpp"
#include "pipeline/kernel_observer.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/read_behind.hpp"
#include "writer/v1_encoder.hpp"
#include "writer/write_v1.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/reader.hpp"
#include "xendump/writer.hpp"

namespace xendump {

WriteResult writer::write_v1(int fd, bool seekable, const std::string& name, const DumpSpec& spec_in,
                             PageSource& pages, const WriteOptions& options,
                             std::span<pipeline::PageObserver* const> observers, PagesReadBack* read_back) {
    WriteResult r;
    // NT_PRSTATUS comes from the vcpu contexts, known before the pass.
    std::optional<DumpSpec> with_prstatus;
    if (options.guest_kernel) pipeline::add_prstatus(with_prstatus.emplace(spec_in), r.warnings);
    const DumpSpec& spec = with_prstatus ? *with_prstatus : spec_in;
    writer::V1Encoder encoder(spec, pages, options.digests, options.guest_kernel, name);
    const writer::DumpPlan& plan = encoder.plan();

    std::optional<pipeline::ReadBehind> behind;  // before the sink: the sink's hook refers to it
    const std::vector<age::Recipient> recipients = age::parse_recipient_list(options.recipients);
    io::Sink sink(fd, seekable, options.sparse, name, recipients);
    sink.cancel_on(options.cancel);
    // What an encrypted file holds on disk is not the pages: nothing to read back.
    if (read_back && plan.digest_note_size && !sink.encrypted()) {
        behind.emplace(fd, plan.layout.pages_offset, plan.layout.pages_size,
                       uint64_t{format::kDigestChunkPages} * format::kPageSize, name);
        sink.before_drop([&behind](uint64_t offset, uint64_t size) { behind->take(offset, size); });
    }
    // What the pass finds in the guest goes into the head; a pipe's head is
    // gone by then, so the pages are only scanned for a seekable output.
    std::optional<pipeline::KernelObserver> kernel;
    pipeline::Stages stages{pages, nullptr, {}, encoder};
    if (options.guest_kernel && seekable) stages.observe.push_back(&kernel.emplace(pages));
    stages.observe.insert(stages.observe.end(), observers.begin(), observers.end());

    for (const auto& w : r.warnings)
        if (options.on_warning) options.on_warning(w);
    pipeline::Outcome out = pipeline::run(stages, sink, options);
    for (auto& w : out.found.warnings) {
        if (options.on_warning) options.on_warning(w);
        r.warnings.push_back(std::move(w));
    }
    r.file_size = sink.file_size();
    r.nr_pages = pages.nr_entries();
    r.nr_runs = plan.nr_runs;
    r.kernel_segment = encoder.kernel_segment();
    r.unreadable_pfns = std::move(out.pass.unreadable_pfns);
    if (behind) *read_back = behind->result();
    return r;
}

uint64_t expected_file_size(const DumpSpec& spec, std::span<const PageEntry> entries, bool digests) {
    return writer::plan_dump(spec, elfcore::EntriesOnly(entries), digests, false).file_size;
}

WriteResult write_dump(int fd, bool seekable, const DumpSpec& spec, PageSource& pages,
                       const WriteOptions& options) {
    return writer::write_v1(fd, seekable, "fd " + std::to_string(fd), spec, pages, options);
}

WriteResult write_dump_file(const std::filesystem::path& path, const DumpSpec& spec, PageSource& pages,
                            const WriteOptions& options) {
    try {
        AtomicFile file(path);
        // An encrypted file cannot be read back without a private key.
        const auto& check = options.recipients.empty() ? options.check_before_publish : nullptr;
        PagesReadBack read_back;
        WriteResult r = writer::write_v1(file.fd(), true, path.string(), spec, pages, options, {},
                                         check ? &read_back : nullptr);
        if (check) {
            VerifyOptions verify;
            verify.pages_read_back = &read_back;
            file.commit([&](const std::filesystem::path& p) { check(p, verify); });
        } else {
            file.commit();
        }
        return r;
    } catch (const Error& e) {
        throw e.with_object(path.string());
    }
}

}  // namespace xendump
