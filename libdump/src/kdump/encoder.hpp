// The compact format (makedumpfile's compressed kdump file, laid out as in
// kdump/layout.hpp) as an encoder of the page pipeline (pipeline/encoder.hpp),
// beside the v1 ELF encoder (writer/v1_encoder.hpp):
//   begin()    leaves the front (header, sub header, bitmaps, descriptor
//              table, the shared zero page) as zeros and starts the page data
//              at the layout's data offset;
//   prepare()  compresses a batch's kept pages that are not zeros, on any of
//              the pass's threads (each batch slot keeps its own compressor);
//              for an encrypted file it then places the batch after the
//              one before it (pipeline::BatchPlaces: here, or later by the
//              worker that places the one before) and seals there the
//              file's chunks that lie whole in it
//              (io::EncryptingOutput::seal_ahead): the one thread that
//              writes the file does not seal them;
//   write()    appends their stored forms in pfn order, puts the batch's
//              descriptors in place (io::Sink::write_at) and hashes the
//              uncompressed pages (NT_XEN_DIGEST's chunks);
//   finish()   writes the bitmaps at their place (a chunk at a time,
//              hashed), the note area after the pages (the table a window
//              at a time; NT_XEN_KDUMP_HEAD with the bitmaps' digests), then
//              the header and the sub header (kdump/heads.hpp make_heads).
// The layout is planned from the pages the file stores, known before the
// pass: every page of the source, or those a selector keeps
// (pipeline::selected_pfns), which the pass must keep exactly.
// Memory (issue 19): the lists of pages are read in windows (nr_entries(),
// read_entries()), never whole; the chunk digests are held a window at a
// time and spilled to a temporary file beyond it (elfcore::DigestTable: the
// note area's place is known only after the pages); nothing is held per page.
// A PV guest whose machine frames do not rise with its pfns has its stored
// frames' bitmap in a temporary file (KeyRanks), with a count of set bits
// per 32768 frames in memory.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "elfcore/digest_table.hpp"
#include "kdump/layout.hpp"
#include "pipeline/batch_places.hpp"
#include "pipeline/encoder.hpp"
#include "stream_hash.hpp"
#include "xendump/dump_spec.hpp"
#include "xendump/kdump.hpp"
#include "xendump/page_source.hpp"

namespace xendump::kdump {

class CompressedBatch;  // a batch's work (encoder.cpp)

class KdumpEncoder final : public pipeline::Encoder {
public:
    // `stored`: the pages the file stores (the 2nd bitmap), ascending pfns;
    // `present`: every page that exists (the 1st bitmap), null when the
    // same; both outlive the encoder. `source` re-reads the guest's utsname
    // for the header in finish(). Validates the input (Error) before
    // anything is written. `digest_window`: chunk digests held in memory
    // (elfcore::DigestTable).
    KdumpEncoder(const DumpSpec& spec, const PageSource& stored, const PageSource* present,
                 Compression compression, bool digests, unsigned dump_level, PageSource& source, std::string name,
                 size_t digest_window = elfcore::DigestTable::kWindow);

    // Zero pages are stored once and shared (the pass classifies them).
    bool needs_zero_flags(const io::Sink&) const override { return true; }
    // At most: a page that does not shrink is stored raw.
    uint64_t planned_size() const override { return layout_.data_offset + nr_stored_ * format::kPageSize; }

    void begin(io::Sink& out) override;
    void prepare(pipeline::PageBatch& batch) const override;
    void write(pipeline::PageBatch& batch, io::Sink& out) override;
    void finish(const pipeline::PassOutcome& pass, const pipeline::FoundNotes& found, io::Sink& out) override;

    const elfcore::DigestTable& chunk_digests() const noexcept { return chunk_digests_; }

private:
    void compress(pipeline::PageBatch& b, CompressedBatch& c) const;
    // Places the batch's stored forms (places_) and seals their whole chunks (sealer_).
    void seal_ahead(pipeline::PageBatch& b, CompressedBatch& c) const;

    const DumpSpec& spec_;
    const PageSource& stored_;
    const PageSource* present_;
    uint64_t nr_stored_;
    Compression compression_;
    unsigned dump_level_;
    PageSource& source_;
    std::string name_;
    KdumpLayout layout_;
    EntryCursor cursor_;  // the stored pages, checked against the pass's
    // Descriptors go in key order: that is pfn order unless a PV guest's
    // machine frames do not rise with its pfns; then each goes to the rank
    // of its frame (ranks_).
    std::optional<KeyRanks> ranks_;
    std::vector<PageDesc> descs_;  // one batch's, reused
    std::vector<iovec> iov_;
    uint64_t next_ = 0;  // index in stored_ of the next kept page
    std::vector<uint64_t> slots_;  // one batch's descriptor slots (ranks_), reused
    std::optional<ChunkedHash> hash_;
    elfcore::DigestTable chunk_digests_;
    io::EncryptingOutput* sealer_ = nullptr;  // an encrypted file's: chunks of pages sealed in prepare()
    mutable pipeline::BatchPlaces places_{name_};  // the batches' places, for sealer_
};

}  // namespace xendump::kdump
