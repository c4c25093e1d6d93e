// The v1 ELF format (xen-dump-core(5)) as an encoder of the page pipeline
// (pipeline/encoder.hpp). Everything but the trailer's contents is planned
// before the first page (plan.hpp), so a pipe and a file get the same bytes;
// on a seekable output the guest kernel's notes found during the pass go
// into the room the plan kept (late_notes.hpp) and the kernel image program
// header into its reserved slot. The trailer's chunk digests are held a
// window at a time (elfcore::DigestTable): on a seekable output each window goes to
// its planned place in the trailer at once, a pipe's to a temporary file.
#pragma once

#include <elf.h>
#include <sys/uio.h>
#include <xxhash.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "elfcore/digest_table.hpp"
#include "pipeline/encoder.hpp"
#include "writer/plan.hpp"

namespace xendump::io {
class EncryptingOutput;
}

namespace xendump::writer {

class V1Encoder final : public pipeline::Encoder {
public:
    // `kernel_room`: keep room for what a KernelObserver finds (the file's
    // size does not depend on what is found). Validates the input (Error).
    // The entries are read from `source` a window at a time, here and in
    // finish() (the table); `source` outlives the encoder.
    // `digest_window`: chunk digests held in memory (elfcore::DigestTable).
    // `keys_room`: plan_dump's (a live dump's keys).
    V1Encoder(const DumpSpec& spec, const PageSource& source, bool digests, bool kernel_room, std::string name,
              size_t digest_window = elfcore::DigestTable::kWindow, size_t keys_room = 0);

    // Called by finish() first, on a seekable output: a live dump's rounds
    // rewrite pages in their slots and change what was found
    // (writer/live_rounds.hpp). It may replan() and redigest().
    using BeforeFinish = std::function<void(io::Sink& out, pipeline::PassOutcome& pass, pipeline::FoundNotes& found)>;
    void before_finish(BeforeFinish f) { before_finish_ = std::move(f); }
    // The head written again from `spec` (the vcpu contexts and shared_info
    // of the final round): its plan must have the same layout (Error).
    void replan(const DumpSpec& spec, io::Sink& out);
    // Chunk `chunk`'s digest replaced (its pages were rewritten).
    void redigest(uint64_t chunk, const XXH128_canonical_t& digest, io::Sink& out);

    bool needs_zero_flags(const io::Sink& out) const override { return digests() || out.holes(); }
    size_t batch_alignment() const override { return format::kDigestChunkPages; }
    uint64_t planned_size() const override { return plan_.file_size; }

    void begin(io::Sink& out) override;
    void prepare(pipeline::PageBatch& batch) const override;
    void write(pipeline::PageBatch& batch, io::Sink& out) override;
    void finish(const pipeline::PassOutcome& pass, const pipeline::FoundNotes& found, io::Sink& out) override;

    const DumpPlan& plan() const noexcept { return plan_; }
    bool kernel_segment() const noexcept { return kernel_segment_; }
    const elfcore::DigestTable& chunk_digests() const noexcept { return chunk_digests_; }

private:
    bool digests() const noexcept { return plan_.digest_note_size != 0; }
    uint64_t chunk_digests_offset() const;
    XXH128_canonical_t finish_notes(const pipeline::FoundNotes& found, io::Sink& out);
    std::optional<Elf64_Phdr> kernel_phdr(const pipeline::FoundNotes& found) const;
    void write_trailer(const pipeline::PassOutcome& pass, const XXH128_canonical_t& notes_digest, io::Sink& out);
    void write_phdrs_at_end(const std::optional<Elf64_Phdr>& kernel, io::Sink& out);

    const PageSource& source_;
    DumpPlan plan_;
    std::string name_;
    elfcore::DigestTable chunk_digests_;  // nr_chunks of them by the end, a window in memory
    std::vector<iovec> iov_;
    bool kernel_segment_ = false;
    bool kernel_room_ = false;
    bool digests_ = false;
    size_t keys_room_ = 0;
    bool replanned_ = false;
    BeforeFinish before_finish_;
    io::EncryptingOutput* sealer_ = nullptr;  // an encrypted file's: its chunks of pages sealed in prepare()
};

}  // namespace xendump::writer
