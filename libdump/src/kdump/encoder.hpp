// The compact format (makedumpfile's compressed kdump file, laid out as in
// kdump/layout.hpp) as an encoder of the page pipeline (pipeline/encoder.hpp),
// beside the v1 ELF encoder (writer/v1_encoder.hpp):
//   begin()    leaves the front (header, sub header, bitmaps, descriptor
//              table, the shared zero page) as zeros and starts the page data
//              at the layout's data offset;
//   prepare()  compresses a batch's kept pages that are not zeros, on any of
//              the pass's threads (each batch slot keeps its own compressor);
//   write()    appends their stored forms in pfn order, puts the batch's
//              descriptors in place (io::Sink::write_at) and hashes the
//              uncompressed pages (NT_XEN_DIGEST's chunks);
//   finish()   writes the note area after the pages, then the header, the
//              sub header, the bitmaps (and a PV guest's descriptors when
//              its machine frames do not rise with the pfns) at their places.
// The layout is planned from the pages the file stores, known before the
// pass: every page of the source, or those a selector keeps
// (pipeline::selected_entries), which the pass must keep exactly.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kdump/layout.hpp"
#include "pipeline/encoder.hpp"
#include "stream_hash.hpp"
#include "xendump/dump_spec.hpp"
#include "xendump/kdump.hpp"
#include "xendump/page_source.hpp"

namespace xendump::kdump {

class KdumpEncoder final : public pipeline::Encoder {
public:
    // `stored`: the pages the file stores (the 2nd bitmap), ascending pfns;
    // `present`: every page that exists (the 1st bitmap), empty when the
    // same. `source` re-reads the guest's utsname for the header in
    // finish(). Validates the input (Error) before anything is written.
    KdumpEncoder(const DumpSpec& spec, std::span<const PageEntry> stored, std::span<const PageEntry> present,
                 Compression compression, bool digests, unsigned dump_level, PageSource& source, std::string name);

    // Zero pages are stored once and shared (the pass classifies them).
    bool needs_zero_flags(const io::Sink&) const override { return true; }
    // At most: a page that does not shrink is stored raw.
    uint64_t planned_size() const override { return layout_.data_offset + stored_.size() * format::kPageSize; }

    void begin(io::Sink& out) override;
    void prepare(pipeline::PageBatch& batch) const override;
    void write(pipeline::PageBatch& batch, io::Sink& out) override;
    void finish(const pipeline::PassOutcome& pass, const pipeline::FoundNotes& found, io::Sink& out) override;

private:
    const DumpSpec& spec_;
    std::span<const PageEntry> stored_, present_;
    Compression compression_;
    unsigned dump_level_;
    PageSource& source_;
    std::string name_;
    KdumpLayout layout_;
    // Descriptors go in key order: in place per batch when that is pfn
    // order (slots_ empty), else kept (24 bytes a stored page) and written
    // in finish().
    std::vector<uint64_t> slots_;
    std::vector<PageDesc> scattered_;
    std::vector<PageDesc> descs_;  // one batch's, reused
    std::vector<iovec> iov_;
    uint64_t next_ = 0;  // index in stored_ of the next kept page
    std::optional<ChunkedHash> hash_;
    std::vector<XXH128_canonical_t> chunk_digests_;
};

}  // namespace xendump::kdump
