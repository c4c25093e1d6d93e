#include "kdump/encoder.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <ctime>

#include "io/encrypting_output.hpp"
#include "io/sink.hpp"
#include "kdump/codec.hpp"
#include "kdump/format.hpp"
#include "kdump/heads.hpp"
#include "kdump/note_area.hpp"
#include "xendump/error.hpp"
#include "xendump/kernel/guest_memory.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"
#include "util/util.hpp"

namespace xendump::kdump {

using util::kPage;

// A batch's compressed pages, made in Encoder::prepare on any thread and
// kept with the batch slot (one compressor context each, reused).
class CompressedBatch final : public pipeline::BatchWork {
public:
    explicit CompressedBatch(Compression c) : compressor(c) {}
    PageCompressor compressor;
    std::vector<std::byte> bytes;  // the compressed pages, one after the other
    std::vector<uint64_t> at;      // page i's offset in `bytes`
    std::vector<uint32_t> size;    // its compressed size; 0: stored raw (or a zero page)
    std::vector<uint32_t> flag;    // its PageDesc flag
    // An encrypted file's: the batch's stored forms as write() gives them,
    // their place (pipeline::BatchPlaces) and the chunks sealed ahead there.
    std::vector<iovec> pieces;
    std::optional<uint64_t> place;
    io::EncryptingOutput::AheadRun sealed;
};

namespace {

// Page i's bytes as the file stores them (a kept page that is not zeros):
// compressed, or the page itself when it did not shrink or nothing is
// compressed (`c` null, or its sizes not made).
iovec stored_form(const pipeline::PageBatch& b, const CompressedBatch* c, size_t i) {
    if (c && !c->size.empty() && c->size[i])
        return {const_cast<std::byte*>(c->bytes.data() + c->at[i]), c->size[i]};
    return {const_cast<std::byte*>(b.page[i]), kPage};
}

// The guest kernel's own utsname (init_uts_ns.name), as makedumpfile puts it
// in the header: located with VMCOREINFO's SYMBOL(init_uts_ns),
// OFFSET(uts_namespace.name) and phys_base, read again from the source
// (the guest is still paused; a file source is unchanged), and taken only
// when it is the kernel's: sysname "Linux", release = OSRELEASE.
std::optional<UtsName> guest_utsname(const kernel::Vmcoreinfo& info, PageSource& source) {
    auto uts = info.symbol("init_uts_ns");
    auto name_off = info.value("OFFSET(uts_namespace.name)");
    if (!uts || !name_off || !kernel::is_kernel_image_address(*uts)) return std::nullopt;
    uint64_t off = 0;
    if (std::from_chars(name_off->data(), name_off->data() + name_off->size(), off).ec != std::errc() || off > 4096)
        return std::nullopt;
    kernel::PhysicalMemory memory(kernel::page_reader(source));
    UtsName name{};
    if (!memory.read(kernel::kernel_virt_to_phys(*uts, info.phys_base()) + off,
                     std::as_writable_bytes(std::span(&name, 1))))
        return std::nullopt;
    for (char* field : {name.sysname, name.nodename, name.release, name.version, name.machine, name.domainname})
        if (field[64] != '\0') return std::nullopt;
    if (std::string_view(name.sysname) != "Linux" || std::string_view(name.release) != info.release())
        return std::nullopt;
    return name;
}

}  // namespace

KdumpEncoder::KdumpEncoder(const DumpSpec& spec, const PageSource& stored, const PageSource* present,
                           Compression compression, bool digests, unsigned dump_level, PageSource& source,
                           std::string name, size_t digest_window)
    : spec_(spec),
      stored_(stored),
      present_(present),
      nr_stored_(stored.nr_entries()),
      compression_(compression),
      dump_level_(dump_level),
      source_(source),
      name_(std::move(name)),
      cursor_(stored),
      chunk_digests_(name_, digest_window) {
    validate_spec(spec, stored);
    const Index index = spec.type == format::GuestType::pv ? Index::machine : Index::pfn;
    layout_ = plan_kdump(stored, index, present);
    if (!layout_.stored_ascending) ranks_.emplace(stored, layout_);
    if (digests) hash_.emplace(uint64_t{format::kDigestChunkPages} * kPage);
}

void KdumpEncoder::begin(io::Sink& out) {
    out.reserve(layout_.data_offset);  // written in finish(); the zero page stays zeros
    // An encrypted file's chunks of page data are sealed on the workers,
    // once a batch is compressed and placed (prepare): the note area always
    // follows the pages, so none of them is the last chunk.
    sealer_ = out.sealer_ahead();
    if (sealer_) places_.start(out.offset());
}

void KdumpEncoder::prepare(pipeline::PageBatch& b) const {
    if (compression_ == Compression::none && !sealer_) return;  // every page raw
    if (!b.work) b.work = std::make_unique<CompressedBatch>(compression_);
    auto& c = static_cast<CompressedBatch&>(*b.work);
    try {
        if (compression_ != Compression::none) compress(b, c);
        if (sealer_) seal_ahead(b, c);
    } catch (...) {
        c.sealed = {};  // not written: the pass fails
        if (sealer_) places_.fail();
        throw;
    }
}

void KdumpEncoder::compress(pipeline::PageBatch& b, CompressedBatch& c) const {
    const size_t bound = compress_bound(compression_, kPage);
    c.at.assign(b.count, 0);
    c.size.assign(b.count, 0);
    c.flag.assign(b.count, 0);
    uint64_t at = 0;
    for (size_t i = 0; i < b.count; ++i) {
        if (!b.keep[i] || b.zero[i]) continue;
        if (c.bytes.size() < at + bound) c.bytes.resize(std::max<uint64_t>(at + bound, 2 * c.bytes.size()));
        const CompressedPage p = c.compressor.compress(std::span(b.page[i], kPage), std::span(c.bytes.data() + at, bound));
        c.at[i] = at;
        c.size[i] = static_cast<uint32_t>(p.size);
        c.flag[i] = p.flag;
        at += p.size;
    }
}

void KdumpEncoder::seal_ahead(pipeline::PageBatch& b, CompressedBatch& c) const {
    c.pieces.clear();
    uint64_t size = 0;
    for (size_t i = 0; i < b.count; ++i) {
        if (!b.keep[i] || b.zero[i]) continue;
        const iovec v = stored_form(b, &c, i);
        size += v.iov_len;
        io::append_adjacent(c.pieces, v.iov_base, v.iov_len);
    }
    c.place.reset();
    // Here, or on the worker that places the batch before this one (before
    // that batch, and so this one, is written): batch slots live until then.
    places_.place(b.first, b.count, size, [this, &c, size](uint64_t at) {
        c.place = at;
        sealer_->seal_ahead(at, c.pieces, at, at + size, c.sealed);
        sealer_->flush_ahead(c.sealed);
    });
}

void KdumpEncoder::write(pipeline::PageBatch& b, io::Sink& out) {
    const auto* c = static_cast<const CompressedBatch*>(b.work.get());
    if (sealer_ && c && c->place && *c->place != out.offset())
        throw Error("internal error: batch of entry " + std::to_string(b.first) + " placed at " +
                        std::to_string(*c->place) + ", written at " + std::to_string(out.offset()),
                    name_);
    const uint64_t first = next_;
    descs_.clear();
    iov_.clear();
    slots_.clear();
    uint64_t at = out.offset();
    for (size_t i = 0; i < b.count; ++i) {
        if (!b.keep[i]) continue;
        if (next_ >= nr_stored_ || cursor_.at(next_).pfn != b.pfn(i))
            throw Error("internal error: the pass kept pfn " + std::to_string(b.pfn(i)) +
                        ", not a page planned for the compact file", name_);
        if (ranks_) slots_.push_back(ranks_->rank(cursor_.at(next_).gmfn));
        ++next_;
        if (hash_)
            hash_->update(b.page[i], kPage, [this](const XXH128_canonical_t& d) { chunk_digests_.add(d); });
        if (b.zero[i]) {
            descs_.push_back({layout_.zero_page_offset, static_cast<uint32_t>(kPage), 0, 0});
            continue;
        }
        iov_.push_back(stored_form(b, c, i));
        const auto size = static_cast<uint32_t>(iov_.back().iov_len);
        descs_.push_back({at, size, size == kPage ? 0 : c->flag[i], 0});
        at += size;
    }
    out.writev(iov_);
    if (!ranks_) {
        out.write_at(layout_.desc_offset + first * sizeof(PageDesc), std::as_bytes(std::span(descs_)));
        return;
    }
    // In slot order: one write per stretch of consecutive slots.
    for (size_t k = 0; k < descs_.size();) {
        size_t j = k + 1;
        while (j < descs_.size() && slots_[j] == slots_[j - 1] + 1) ++j;
        out.write_at(layout_.desc_offset + slots_[k] * sizeof(PageDesc),
                     std::as_bytes(std::span(descs_).subspan(k, j - k)));
        k = j;
    }
}

void KdumpEncoder::finish(const pipeline::PassOutcome& pass, const pipeline::FoundNotes& found, io::Sink& out) {
    if (next_ != nr_stored_)
        throw Error("internal error: the pass kept " + std::to_string(next_) + " of the " + std::to_string(nr_stored_) +
                        " pages planned for the compact file",
                    name_);
    if (hash_ && hash_->pending()) chunk_digests_.add(hash_->finish());

    const KdumpLayout& L = layout_;
    // The bitmaps first (pages that exist, pages stored; the frames' bitmap
    // already made for the ranks, when there are ranks), hashed as they are
    // written: NT_XEN_KDUMP_HEAD records their digests.
    HeadNote head{};
    auto bitmap = [&](uint64_t at, const PageSource& entries, bool ascending) {
        return ranks_ && &entries == &stored_ ? ranks_->write_to(out, at) : write_key_bitmap(out, at, L, entries, ascending);
    };
    const XXH128_canonical_t present =
        present_ ? bitmap(L.bitmap_offset, *present_, L.present_ascending)
                 : bitmap(L.bitmap_offset, stored_, L.stored_ascending);
    const XXH128_canonical_t stored = bitmap(L.bitmap_offset + L.bitmap_size, stored_, true);
    std::memcpy(head.bitmap_digest[0], &present, sizeof present);
    std::memcpy(head.bitmap_digest[1], &stored, sizeof stored);

    // The guest kernel's utsname, when it can be read (else what VMCOREINFO says).
    const std::optional<std::string> vmcoreinfo = note_vmcoreinfo(spec_, &found);
    std::optional<kernel::Vmcoreinfo> info;
    if (vmcoreinfo && !vmcoreinfo->empty()) info = kernel::Vmcoreinfo::parse(*vmcoreinfo);
    auto uts = info ? guest_utsname(*info, source_) : std::nullopt;
    head.utsname = uts ? *uts : fallback_utsname(spec_.guest_width, info ? &*info : nullptr);
    head.status = flag_of(compression_);
    head.dump_level = static_cast<int32_t>(dump_level_);

    out.zeros((8 - out.offset() % 8) % 8);
    const uint64_t note_offset = out.offset();
    const NoteArea notes = write_note_area(out, spec_, stored_, &found, pass.unreadable_pfns,
                                           hash_ ? &chunk_digests_ : nullptr, &head);

    HeadFacts f;
    f.recorded = head;
    f.time = dump_time(notes.domain);
    f.nr_cpus = spec_.vcpus.size();
    f.max_mapnr = L.max_mapnr;
    f.phys_base = info ? info->phys_base() : 0;
    if (vmcoreinfo && !vmcoreinfo->empty()) {
        f.offset_vmcoreinfo = note_offset + notes.vmcoreinfo_offset;
        f.size_vmcoreinfo = vmcoreinfo->size();
    }
    f.offset_note = note_offset;
    f.size_note = notes.size;
    out.write_at(0, head_blocks(make_heads(f)));
}

}  // namespace xendump::kdump
