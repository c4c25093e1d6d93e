#include "writer/v1_encoder.hpp"

#include <elf.h>

#include <algorithm>

#include "elfcore/notes.hpp"
#include "elfcore/p2m_table.hpp"
#include "io/encrypting_output.hpp"
#include "io/sink.hpp"
#include "stream_hash.hpp"
#include "util/util.hpp"
#include "writer/late_notes.hpp"
#include "xendump/error.hpp"

namespace xendump::writer {

using elfcore::bytes_of;
using elfcore::for_each_table_window;
using elfcore::note_header;
using elfcore::note_header_size;
using elfcore::write_digest_note;

namespace {

using util::kPage;

// The digests of a batch's 256-page chunks (xen-dump-core(5) "Trailer notes"), computed in
// Encoder::prepare on any thread: batches start on chunk boundaries
// (batch_alignment), so no chunk spans two batches. An encrypted file's
// chunks that lie whole in the batch are sealed there too (seal_ahead).
class ChunkDigests final : public pipeline::BatchWork {
public:
    std::vector<XXH128_canonical_t> digests;
    StreamHash hash;  // kept with the batch: one XXH3 state per batch slot
    std::vector<iovec> pages;  // the batch's pages, a piece per stretch of adjacent memory
    io::EncryptingOutput::AheadRun sealed;
};

XXH128_canonical_t zero_chunk_digest() {
    static const XXH128_canonical_t digest = [] {
        const std::vector<std::byte> zeros(size_t{format::kDigestChunkPages} * kPage);
        return digest_of(zeros);
    }();
    return digest;
}

// Runs of pages [i, j) as iovecs, one per stretch of adjacent memory.
void pages_of(const pipeline::PageBatch& b, size_t i, size_t j, std::vector<iovec>& iov) {
    iov.clear();
    for (; i < j; ++i) io::append_adjacent(iov, b.page[i], kPage);
}

void write_pages_of(io::Sink& sink, const pipeline::PageBatch& b, size_t i, size_t j, std::vector<iovec>& iov) {
    pages_of(b, i, j, iov);
    sink.writev(iov);
}

void write_pfn_array(io::Sink& sink, const PageSource& source) {
    std::vector<uint64_t> pfns;
    for_each_entry_window(source, [&](uint64_t, std::span<const PageEntry> window) {
        pfns.clear();
        for (const PageEntry& e : window) pfns.push_back(e.pfn);
        sink.write(std::as_bytes(std::span(pfns)));
    });
}

}  // namespace

V1Encoder::V1Encoder(const DumpSpec& spec, const PageSource& source, bool digests, bool kernel_room, std::string name,
                     size_t digest_window, size_t keys_room)
    : source_(source),
      plan_(plan_dump(spec, source, digests, kernel_room, keys_room)),
      name_(std::move(name)),
      chunk_digests_(name_, digest_window),
      kernel_room_(kernel_room),
      digests_(digests),
      keys_room_(keys_room) {}

void V1Encoder::replan(const DumpSpec& spec, io::Sink& out) {
    DumpPlan next = plan_dump(spec, source_, digests_, kernel_room_, keys_room_);
    const Layout &a = plan_.layout, &b = next.layout;
    if (next.file_size != plan_.file_size || a.notes_offset != b.notes_offset || a.notes_size != b.notes_size ||
        a.pages_offset != b.pages_offset || next.head.size() != plan_.head.size() || next.phdrs != plan_.phdrs)
        throw Error("internal error: the final round's vcpu state changes the file's layout", name_);
    plan_ = std::move(next);
    out.write_at(0, plan_.head);
    replanned_ = true;
}

void V1Encoder::redigest(uint64_t chunk, const XXH128_canonical_t& digest, io::Sink& out) {
    chunk_digests_.replace(chunk, digest, out);
}

// Where NT_XEN_DIGEST's chunk digests start: after its header and DigestDescHead.
uint64_t V1Encoder::chunk_digests_offset() const {
    return plan_.layout.trailer_offset + note_header_size(format::kNameXenCore) + sizeof(format::DigestDescHead);
}

void V1Encoder::begin(io::Sink& out) {
    // A seekable output gets each window of digests in its place in the
    // trailer at once (planned); a pipe's go to a temporary file.
    if (digests() && out.positional()) chunk_digests_.place_in(out, chunk_digests_offset());
    // What finish() may patch in the head (finish_notes, the kernel image
    // segment's program header, e_phnum): an encrypted output keeps it until then.
    if (plan_.late_room && out.positional()) {
        out.hold(plan_.layout.notes_offset, plan_.layout.notes_size);
        if (plan_.kernel_phdr_offset && !plan_.phdrs_at_end()) out.hold(plan_.kernel_phdr_offset, sizeof(Elf64_Phdr));
        if (!plan_.machine_view) out.hold(offsetof(Elf64_Ehdr, e_phnum), sizeof(Elf64_Half));
    }
    // An encrypted file's chunks of pages are sealed where the pages are
    // hashed (prepare), while they are in the CPU's cache: what is held lies
    // in the head, and the p2m note always follows the pages, so no chunk
    // whole among them is held or the last (EncryptingOutput::seal_ahead).
    sealer_ = plan_.layout.pages_size ? out.sealer_ahead() : nullptr;
    out.write(plan_.head);
}

void V1Encoder::prepare(pipeline::PageBatch& b) const {
    if (!digests() && !sealer_) return;
    if (b.first % format::kDigestChunkPages) throw Error("internal error: batch not on a digest chunk", name_);
    auto* work = dynamic_cast<ChunkDigests*>(b.work.get());
    if (!work) {
        b.work = std::make_unique<ChunkDigests>();
        work = static_cast<ChunkDigests*>(b.work.get());
    }
    work->digests.clear();
    // Encrypted: the file's chunks whole among the batch's pages sealed (and
    // written) as the hashing passes their ends, up to page `to`.
    const uint64_t at = plan_.layout.pages_offset + b.first * kPage;
    uint64_t sealed_to = at;
    if (sealer_) pages_of(b, 0, b.count, work->pages);
    auto seal_to = [&](size_t to) {
        if (sealer_) sealed_to = sealer_->seal_ahead(at, work->pages, sealed_to, at + to * kPage, work->sealed);
    };
    // The pages [i, end) in steps that end where the encrypted file's chunks
    // end (or at `end`), each hashed then sealed while in the CPU's cache.
    auto steps = [&](size_t i, size_t end, auto&& f) {
        constexpr uint64_t kSealChunk = age::kChunkSize;
        while (i < end) {
            const uint64_t o = at + i * kPage;
            const size_t j = sealer_ ? std::min<size_t>(end, i + std::max<uint64_t>(1, (kSealChunk - o % kSealChunk) / kPage))
                                     : end;
            f(i, j);
            seal_to(j);
            i = j;
        }
    };
    try {
        for (size_t c = 0; c < b.count; c += format::kDigestChunkPages) {
            const size_t end = std::min(b.count, c + format::kDigestChunkPages);
            // A whole chunk of zero pages takes the digest of zeros computed
            // once: zero-heavy guests are not hashed byte by byte.
            if (!digests() || (end - c == format::kDigestChunkPages &&
                               std::all_of(b.zero.begin() + static_cast<std::ptrdiff_t>(c),
                                           b.zero.begin() + static_cast<std::ptrdiff_t>(end), [](uint8_t z) { return z; }))) {
                if (digests()) work->digests.push_back(zero_chunk_digest());
                seal_to(end);
                continue;
            }
            // Pages that follow each other in memory go to XXH3 in one call.
            steps(c, end, [&](size_t i, size_t j) {
                while (i < j) {
                    size_t k = i + 1;
                    while (k < j && b.page[k] == b.page[k - 1] + kPage) ++k;
                    work->hash.update(b.page[i], (k - i) * kPage);
                    i = k;
                }
            });
            work->digests.push_back(work->hash.finish_and_reset());
        }
        if (sealer_) sealer_->flush_ahead(work->sealed);
    } catch (...) {
        work->sealed = {};  // not written: the pass fails
        throw;
    }
}

void V1Encoder::write(pipeline::PageBatch& b, io::Sink& sink) {
    // v1 holds every present page (its layout is planned from the entries).
    if (!b.all_kept()) throw Error("internal error: a v1 file holds every page of its source", name_);
    if (digests()) {
        const auto* work = dynamic_cast<const ChunkDigests*>(b.work.get());
        if (!work) throw Error("internal error: batch without digests", name_);
        chunk_digests_.add(work->digests);
    }
    const size_t bytes = b.count * kPage;
    // A source file's pages are copied as they lie (copy_file_range) unless
    // some are zeros that the output keeps as holes: the copy would write
    // them out (a converted file as large on disk as the guest).
    const bool holes_here = sink.holes() && std::any_of(b.zero.begin(), b.zero.begin() + static_cast<std::ptrdiff_t>(b.count),
                                                        [](auto z) { return static_cast<bool>(z); });
    if (b.range && !holes_here && sink.copy_from(b.range->fd, b.range->offset, bytes)) return;
    if (!sink.holes()) {
        write_pages_of(sink, b, 0, b.count, iov_);
        return;
    }
    // Alternate runs of data pages (one write each) and zero pages (holes).
    size_t i = 0;
    while (i < b.count) {
        const bool zero = b.zero[i];
        size_t j = i + 1;
        while (j < b.count && static_cast<bool>(b.zero[j]) == zero) ++j;
        if (zero)
            sink.zeros((j - i) * kPage);
        else
            write_pages_of(sink, b, i, j, iov_);
        i = j;
    }
}

// The notes found in the guest go into the room the plan kept (see
// late_notes.hpp), rewritten in place. Returns the digest of the note
// segment as it finally is.
XXH128_canonical_t V1Encoder::finish_notes(const pipeline::FoundNotes& found, io::Sink& out) {
    auto patched = patch_notes(plan_, found);
    if (!patched) return plan_.notes_digest;  // as planned (and, replanned, written by replan())
    out.write_at(plan_.layout.notes_offset, patched->bytes);
    return digest_of(patched->bytes);
}

// The kernel image PT_LOAD for the program header room the plan kept. The
// segment starts at the page of `paddr` and runs over consecutive present
// pfns, at most max_size bytes: it always points at bytes of .xen_pages that
// hold exactly those pages.
std::optional<Elf64_Phdr> V1Encoder::kernel_phdr(const pipeline::FoundNotes& found) const {
    if (!found.kernel_image || !plan_.kernel_phdr_offset) return std::nullopt;
    const pipeline::KernelImageSegment& k = *found.kernel_image;
    if (k.vaddr % kPage || k.paddr % kPage || k.max_size < kPage) return std::nullopt;
    const uint64_t pfn = k.paddr / kPage;
    const std::optional<uint64_t> at = source_.index_of_pfn(pfn);
    if (!at) return std::nullopt;
    const uint64_t first = *at, n = source_.nr_entries();
    uint64_t count = 1;
    PageEntry next{};
    while (first + count < n && (count + 1) * kPage <= k.max_size) {
        source_.read_entries(first + count, std::span(&next, 1));
        if (next.pfn != pfn + count) break;
        ++count;
    }
    Elf64_Phdr ph{};
    ph.p_type = PT_LOAD;
    ph.p_flags = PF_R | PF_W | PF_X;
    ph.p_offset = plan_.layout.pages_offset + first * kPage;
    ph.p_vaddr = k.vaddr;
    ph.p_paddr = k.paddr;
    ph.p_filesz = ph.p_memsz = count * kPage;
    ph.p_align = 0;  // as the runs
    return ph;
}

void V1Encoder::write_phdrs_at_end(const std::optional<Elf64_Phdr>& kernel, io::Sink& sink) {
    sink.zeros(plan_.phdr_offset - sink.offset());
    const std::span<const std::byte> table(plan_.phdrs);
    if (!kernel) {
        sink.write(table);
        return;
    }
    const size_t at = static_cast<size_t>(plan_.kernel_phdr_offset - plan_.phdr_offset);
    sink.write(table.first(at));
    sink.write(bytes_of(*kernel));
    sink.write(table.subspan(at + sizeof(Elf64_Phdr)));
}

void V1Encoder::write_trailer(const pipeline::PassOutcome& pass, const XXH128_canonical_t& notes_digest,
                              io::Sink& sink) {
    using format::kNameXenCore;
    if (digests() && write_digest_note(sink, chunk_digests_, notes_digest, plan_.p2m_digest) != plan_.digest_note_size)
        throw Error("internal error: NT_XEN_DIGEST's size is not the planned one", name_);
    uint64_t used = 0;
    const auto& bad = pass.unreadable_pfns;
    if (!bad.empty()) {
        const uint64_t count = bad.size();
        const uint64_t descsz = sizeof count + count * sizeof(uint64_t);
        auto header = note_header(kNameXenCore, format::kNtXenUnreadable, descsz);
        sink.write(header);
        sink.write(bytes_of(count));
        sink.write(std::as_bytes(std::span(bad)));
        used = header.size() + descsz;
    }
    // The rest of the reserved area: one padding note of zeros.
    const uint64_t pad_desc = plan_.unreadable_area_size - used - note_header_size(kNameXenCore);
    sink.write(note_header(kNameXenCore, format::kNtXenPadding, pad_desc));
    sink.zeros(pad_desc);
}

void V1Encoder::finish(const pipeline::PassOutcome& pass_in, const pipeline::FoundNotes& found_in, io::Sink& sink) {
    std::optional<pipeline::PassOutcome> live_pass;
    std::optional<pipeline::FoundNotes> live_found;
    if (before_finish_) {
        if (!sink.positional() || sink.encrypted())
            throw Error("internal error: pages are rewritten in a seekable plaintext file only", name_);
        before_finish_(sink, live_pass.emplace(pass_in), live_found.emplace(found_in));
    }
    const pipeline::PassOutcome& pass = live_pass ? *live_pass : pass_in;
    const pipeline::FoundNotes& found = live_found ? *live_found : found_in;
    const Layout& L = plan_.layout;
    if (digests() && chunk_digests_.size() != plan_.nr_chunks) throw Error("internal error: digest chunk count", name_);
    // What the pass found goes into the head; a pipe's head is gone already.
    const bool patch = plan_.late_room && sink.positional();
    const XXH128_canonical_t notes_digest = patch ? finish_notes(found, sink) : plan_.notes_digest;
    const std::optional<Elf64_Phdr> kernel = patch ? kernel_phdr(found) : std::nullopt;
    // The kernel image segment goes into the program header room: rewritten
    // in place when the table sits in the head (written already); when it
    // comes at the end (PV, see program_headers_at_end) write_phdrs_at_end
    // puts it there. Either way e_phnum then counts it (a PV table with
    // makedumpfile's view counted the room from the start).
    if (kernel) {
        if (!plan_.phdrs_at_end()) sink.write_at(plan_.kernel_phdr_offset, bytes_of(*kernel));
        const auto phnum = static_cast<Elf64_Half>(L.phnum + 1);
        if (!plan_.machine_view) sink.write_at(offsetof(Elf64_Ehdr, e_phnum), bytes_of(phnum));
        kernel_segment_ = true;
    }

    sink.zeros(L.p2m_note_offset - (L.pages_offset + L.pages_size));
    sink.write(plan_.p2m_note_header);
    for_each_table_window(source_, plan_.p2m_gmfn_is_pfn,
                          [&](std::span<const PageEntry> window) { sink.write(std::as_bytes(window)); });
    if (L.pfn_size) write_pfn_array(sink, source_);
    write_trailer(pass, notes_digest, sink);
    sink.write(plan_.shstrtab);
    sink.zeros(plan_.shdr_offset - sink.offset());
    sink.write(plan_.shdrs);
    if (plan_.phdrs_at_end()) write_phdrs_at_end(kernel, sink);
    if (sink.offset() != plan_.file_size)
        throw Error("internal error: wrote " + std::to_string(sink.offset()) + " bytes, planned " +
                        std::to_string(plan_.file_size),
                    name_);
}

}  // namespace xendump::writer
