// write_dump / write_dump_file: the v1 encoder in the page pipeline
// (pipeline/pipeline.hpp), with the guest kernel's observer when asked for,
// into a Sink over a pipe or a file; for a file, the read-back behind the
// write-behind and the atomic publication around it.
#include <algorithm>
#include <optional>
#include <vector>

#include "elfcore/entries_only.hpp"
#include "age/age.hpp"
#include "io/object_output.hpp"
#include "io/random_access.hpp"
#include "io/sink.hpp"
#include "pipeline/kernel_observer.hpp"
#include "pipeline/ordered_batches.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/read_behind.hpp"
#include "store/multipart_output.hpp"
#include "writer/v1_encoder.hpp"
#include "writer/write_v1.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/reader.hpp"
#include "xendump/writer.hpp"

namespace xendump {

namespace {

// The slots of .xen_pages rewritten by a live dump's rounds. Pages of
// consecutive slots are gathered (up to 1 MiB) and written at once: a
// round's pages come in pfn order, often in runs, and the pause's share of
// them should not cost a system call a page.
class FileSlots final : public writer::SlotRewriter {
public:
    FileSlots(io::Sink& sink, const writer::DumpPlan& plan) : sink_(sink), plan_(plan) {}
    void rewrite(uint64_t index, std::span<const std::byte> page) override {
        if (page.size() != format::kPageSize || index >= plan_.layout.pages_size / format::kPageSize)
            throw Error("internal error: page " + std::to_string(index) + " rewritten outside .xen_pages");
        if (!run_.empty() && (index != first_ + run_.size() / format::kPageSize || run_.size() >= kRunBytes)) flush();
        if (run_.empty()) first_ = index;
        run_.insert(run_.end(), page.begin(), page.end());
    }
    // Writes what is gathered (before the file is read back).
    void flush() {
        if (run_.empty()) return;
        sink_.write_at(plan_.layout.pages_offset + first_ * format::kPageSize, run_);
        run_.clear();
    }

private:
    static constexpr size_t kRunBytes = size_t{1} << 20;
    io::Sink& sink_;
    const writer::DumpPlan& plan_;
    uint64_t first_ = 0;
    std::vector<std::byte> run_;
};

// Every chunk's digest made again from the file after the final round (not
// only the chunks the rounds rewrote): a running guest's page can change
// between the pass hashing it and writing it through a write the dirty log
// does not see (a dom0 backend writing through its own mapping, as the
// console ring's consumer index in the Xen lab), and the pass's digest would
// then not be the file's. The chunks are read in order on one thread and
// hashed on the write threads (pipeline::OrderedBatches), their digests
// stored and folded in chunk order: the same file for any thread count. What
// is read is .xen_pages as the file holds it now, so the fold of those
// digests is a read-back of it (pages_read_back.hpp): the check before
// publication does not read the pages again. `file`: the bytes written (a
// file's, or a temporary image's, dump/live_image.hpp).
PagesReadBack redigest_from_file(const io::RandomAccess& file, const WriteOptions& options,
                                 writer::V1Encoder& encoder, io::Sink& sink) {
    static constexpr uint64_t kChunkPages = format::kDigestChunkPages;
    const writer::DumpPlan& plan = encoder.plan();
    const uint64_t pages_offset = plan.layout.pages_offset;
    const uint64_t nr_pages = plan.layout.pages_size / format::kPageSize;
    pipeline::ReadBackFold fold(pages_offset, plan.layout.pages_size, kChunkPages * format::kPageSize);
    const pipeline::BatchPlan batches = pipeline::plan_batches(pipeline::kMaxBatchPages, kChunkPages, options.threads);
    struct ChunkDigests final : pipeline::BatchWork {
        std::vector<XXH128_canonical_t> of_chunk;
    };
    auto read = [&](pipeline::PageBatch& b) {
        b.data.resize(b.count * format::kPageSize);
        const size_t got = file.read_at(pages_offset + b.first * format::kPageSize, b.data);
        std::fill(b.data.begin() + static_cast<ptrdiff_t>(got), b.data.end(), std::byte{0});  // a trailing hole
    };
    auto hash = [](pipeline::PageBatch& b) {
        if (!b.work) b.work = std::make_unique<ChunkDigests>();
        auto& digests = static_cast<ChunkDigests&>(*b.work).of_chunk;
        digests.clear();
        for (uint64_t at = 0; at < b.count; at += kChunkPages) {
            const uint64_t n = std::min<uint64_t>(kChunkPages, b.count - at);
            const auto bytes = std::span(b.data).subspan(at * format::kPageSize, n * format::kPageSize);
            digests.push_back(writer::digest_of(bytes));
        }
    };
    uint64_t chunk = 0;
    auto deliver = [&](pipeline::PageBatch& b) {
        for (const XXH128_canonical_t& d : static_cast<ChunkDigests&>(*b.work).of_chunk) {
            encoder.redigest(chunk++, d, sink);
            fold.add(d);
        }
    };
    const size_t per_batch = static_cast<size_t>(std::min<uint64_t>(batches.pages, std::max<uint64_t>(nr_pages, 1)));
    pipeline::OrderedBatches run(static_cast<size_t>((nr_pages + per_batch - 1) / per_batch), batches.workers,
                                 batches.in_flight, per_batch, read, hash);
    run.run(deliver, static_cast<size_t>(nr_pages));
    return fold.result();
}

// The rounds, then what they change: the head (vcpu state), the late keys,
// the unreadable pages and the digests of every chunk, read back from the
// file (returned: what was read back, when the file has digests).
std::optional<PagesReadBack> run_live_rounds(const io::RandomAccess& file, const DumpSpec& spec_in,
                                             const WriteOptions& options, const writer::LiveRounds& rounds,
                                             writer::V1Encoder& encoder, io::Sink& sink, pipeline::PassOutcome& pass,
                                             pipeline::FoundNotes& found) {
    FileSlots slots(sink, encoder.plan());
    writer::LiveFinal final = rounds(slots, pass.unreadable_pfns);
    slots.flush();
    DumpSpec spec = spec_in;
    spec.vcpus = std::move(final.vcpus);
    if (!final.shared_info.empty()) spec.shared_info = std::move(final.shared_info);
    std::vector<std::string> ignored;  // said once already, from the same vcpus
    if (options.guest_kernel) {
        spec.prstatus.clear();
        pipeline::add_prstatus(spec, ignored);
    }
    encoder.replan(spec, sink);
    for (const auto& [k, v] : final.domain_keys.items()) found.domain.set(k, v);
    // The paused round read the pass's failures again: its list is the file's.
    pass.unreadable_pfns = std::move(final.unreadable_pfns);
    std::sort(pass.unreadable_pfns.begin(), pass.unreadable_pfns.end());
    pass.unreadable_pfns.erase(std::unique(pass.unreadable_pfns.begin(), pass.unreadable_pfns.end()),
                               pass.unreadable_pfns.end());
    if (encoder.plan().nr_chunks == 0) return std::nullopt;  // no digests
    return redigest_from_file(file, options, encoder, sink);
}

}  // namespace

WriteResult writer::write_v1(int fd, bool seekable, const std::string& name, const DumpSpec& spec_in,
                             PageSource& pages, const WriteOptions& options,
                             std::span<pipeline::PageObserver* const> observers, PagesReadBack* read_back,
                             const LiveRounds* live, io::ObjectOutput* object, const io::RandomAccess* object_bytes) {
    WriteResult r;
    // NT_PRSTATUS comes from the vcpu contexts, known before the pass.
    std::optional<DumpSpec> with_prstatus;
    if (options.guest_kernel) pipeline::add_prstatus(with_prstatus.emplace(spec_in), r.warnings);
    const DumpSpec& spec = with_prstatus ? *with_prstatus : spec_in;
    writer::V1Encoder encoder(spec, pages, options.digests, options.guest_kernel, name, elfcore::DigestTable::kWindow,
                              live ? writer::kLiveKeysRoom : 0);
    // A live dump's unreadable pages are those of its paused round (which
    // read the pass's again): the file's list, and the result's.
    std::optional<std::vector<uint64_t>> live_unreadable;
    if (live) {
        if (!(seekable || object) || !options.recipients.empty() || (object && !object_bytes))
            throw Error("a consistent live dump's image is written to a plaintext file or a sealed temporary one "
                        "(its pages are rewritten in place)",
                        name);
        encoder.before_finish([&, fd](io::Sink& out, pipeline::PassOutcome& pass, pipeline::FoundNotes& found) {
            const io::FdRandomAccess file_bytes(fd, ~uint64_t{0}, name);
            const std::optional<PagesReadBack> final_bytes = run_live_rounds(
                object ? *object_bytes : file_bytes, spec_in, options, *live, encoder, out, pass, found);
            if (read_back && final_bytes) *read_back = *final_bytes;
            live_unreadable = pass.unreadable_pfns;
        });
    }
    const writer::DumpPlan& plan = encoder.plan();

    std::optional<pipeline::ReadBehind> behind;  // before the sink: the sink's hook refers to it
    const std::vector<age::Recipient> recipients = age::parse_recipient_list(options.recipients);
    std::optional<io::Sink> made;
    if (object) {
        if (!recipients.empty()) throw Error(io::kEncryptedNotStreamed, name);
        made.emplace(*object, name);
        seekable = true;
    } else {
        made.emplace(fd, seekable, options.sparse, name, recipients, options.threads);
    }
    io::Sink& sink = *made;
    sink.cancel_on(options.cancel);
    // What an encrypted file holds on disk is not the pages: nothing to read
    // back. A live dump's rounds rewrite pages after the write-behind would
    // have read them back: its pages are read back after the final round.
    if (read_back && plan.digest_note_size && !sink.encrypted() && !object && !live) {
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
    r.unreadable_pfns = live_unreadable ? std::move(*live_unreadable) : std::move(out.pass.unreadable_pfns);
    if (behind) *read_back = behind->result();
    return r;
}

uint64_t expected_file_size(const DumpSpec& spec, std::span<const PageEntry> entries, bool digests) {
    return writer::plan_dump(spec, elfcore::EntriesOnly(entries), digests, false).file_size;
}

WriteResult write_dump(int fd, bool seekable, const DumpSpec& spec, PageSource& pages,
                       const WriteOptions& options) {
    return writer::write_v1(fd, seekable, io::fd_name(fd), spec, pages, options);
}

WriteResult write_dump_object(s3::Client& client, const s3::Url& url, const DumpSpec& spec, PageSource& pages,
                              const WriteOptions& options, const s3::UploadOptions& upload) {
    try {
        store::MultipartOutput out(client, url, upload);
        WriteResult r = writer::write_v1(-1, true, url.str(), spec, pages, options, {}, nullptr, nullptr, &out);
        return r;
    } catch (const Error& e) {
        throw e.with_object(url.str());
    }
}

namespace {

WriteResult write_file(const std::filesystem::path& path, const DumpSpec& spec, PageSource& pages,
                       const WriteOptions& options, const writer::LiveRounds* live) {
    try {
        AtomicFile file(path);
        // An encrypted file cannot be read back without a private key.
        const auto& check = options.recipients.empty() ? options.check_before_publish : nullptr;
        PagesReadBack read_back;
        WriteResult r = writer::write_v1(file.fd(), true, path.string(), spec, pages, options, {},
                                         check ? &read_back : nullptr, live);
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

}  // namespace

WriteResult write_dump_file(const std::filesystem::path& path, const DumpSpec& spec, PageSource& pages,
                            const WriteOptions& options) {
    return write_file(path, spec, pages, options, nullptr);
}

WriteResult writer::write_dump_file_live(const std::filesystem::path& path, const DumpSpec& spec, PageSource& pages,
                                         const WriteOptions& options, const LiveRounds& rounds) {
    return write_file(path, spec, pages, options, &rounds);
}

}  // namespace xendump
