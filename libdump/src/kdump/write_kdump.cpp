// write_kdump_file: a PageSource read once in pfn order, through the
// PageEncoder, into the layout of kdump/layout.hpp. The page data and then
// the note area stream through an io::Sink from the first data byte on;
// the descriptors of each batch, and at the end the header, the sub header
// and the bitmaps, are written at their places (pwrite) in the front of
// the file that the sink skipped. The file is published by AtomicFile only
// when complete.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <vector>

#include "io/sink.hpp"
#include "kdump/codec.hpp"
#include "kdump/encoder.hpp"
#include "kdump/format.hpp"
#include "kdump/layout.hpp"
#include "kdump/note_area.hpp"
#include "pipeline/kernel_observer.hpp"
#include "pipeline/page_batch.hpp"
#include "pipeline/zero_copy_source.hpp"
#include "stream_hash.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/kdump.hpp"
#include "xendump/kernel/guest_memory.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"
#include "xendump/reader.hpp"

namespace xendump {

namespace {

constexpr uint64_t kPage = format::kPageSize;
constexpr size_t kBatchPages = 1024;

void pwrite_all(int fd, std::span<const std::byte> bytes, uint64_t offset, const std::string& name) {
    while (!bytes.empty()) {
        ssize_t w = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) throw_errno("cannot write the kdump header area", name, offset);
        bytes = bytes.subspan(static_cast<size_t>(w));
        offset += static_cast<uint64_t>(w);
    }
}

// The pages of one batch, entries [first, first + pages.size()): lent by
// the source (a mapping) or read into `buffer`; a page that could not be
// read points at a page of zeros.
struct Batch {
    size_t first = 0;
    std::vector<const std::byte*> pages;
    std::vector<uint8_t> unreadable;
    std::unique_ptr<LentPages> lent;
    std::vector<std::byte> buffer;

    size_t end() const { return first + pages.size(); }

    void fill(PageSource& source, size_t from, size_t count) {
        static const std::vector<std::byte> zeros(kPage);
        first = from;
        pages.assign(count, nullptr);
        unreadable.assign(count, 0);
        auto* zero_copy = dynamic_cast<ZeroCopySource*>(&source);
        lent = zero_copy ? zero_copy->lend_pages(from, count) : nullptr;
        if (!lent) {
            if (buffer.size() < count * kPage) buffer.resize(count * kPage);
            source.read_pages(from, count, std::span(buffer.data(), count * kPage), unreadable);
        }
        for (size_t i = 0; i < count; ++i) {
            pages[i] = lent ? lent->page(i) : buffer.data() + i * kPage;
            if (!pages[i]) unreadable[i] = 1;
            if (unreadable[i]) pages[i] = zeros.data();
        }
    }
};

// The chunk digests of the uncompressed pages, in pfn order (as a v1 file's
// NT_XEN_DIGEST: 256 pages a chunk, the last one shorter).
class PageDigests {
public:
    explicit PageDigests(uint64_t nr_pages) : total_(nr_pages), hash_(uint64_t{format::kDigestChunkPages} * kPage) {}
    void add(std::span<const std::byte* const> pages) {
        for (const std::byte* p : pages) {
            hash_.update(p, kPage, [this](const XXH128_canonical_t& c) { digests.push_back(c); });
            if (++done_ == total_ && hash_.pending()) digests.push_back(hash_.finish());
        }
    }
    std::vector<XXH128_canonical_t> digests;

private:
    uint64_t total_, done_ = 0;
    ChunkedHash hash_;
};

void copy_field(char* field, size_t size, std::string_view value) {
    std::memcpy(field, value.data(), std::min(size - 1, value.size()));
}

// TIME= (RFC 3339, UTC, "2025-06-01T10:15:00Z"), else 0.
int64_t dump_time(const KeyValues& domain) {
    auto t = domain.get(keys::kTime);
    if (!t) return 0;
    std::tm tm{};
    const char* end = strptime(t->c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (!end || *end) return 0;
    return static_cast<int64_t>(timegm(&tm));
}

// The guest kernel's own utsname (init_uts_ns.name), as makedumpfile puts it
// in the header: located with VMCOREINFO's SYMBOL(init_uts_ns),
// OFFSET(uts_namespace.name) and phys_base, read again from the source
// (the guest is still paused; a file source is unchanged), and taken only
// when it is the kernel's: sysname "Linux", release = OSRELEASE.
std::optional<kdump::UtsName> guest_utsname(const kernel::Vmcoreinfo& info, PageSource& source) {
    auto uts = info.symbol("init_uts_ns");
    auto name_off = info.value("OFFSET(uts_namespace.name)");
    if (!uts || !name_off || !kernel::is_kernel_image_address(*uts)) return std::nullopt;
    uint64_t off = 0;
    if (std::from_chars(name_off->data(), name_off->data() + name_off->size(), off).ec != std::errc() || off > 4096)
        return std::nullopt;
    kernel::PhysicalMemory memory(kernel::page_reader(source));
    kdump::UtsName name{};
    if (!memory.read(kernel::kernel_virt_to_phys(*uts, info.phys_base()) + off,
                     std::as_writable_bytes(std::span(&name, 1))))
        return std::nullopt;
    for (char* field : {name.sysname, name.nodename, name.release, name.version, name.machine, name.domainname})
        if (field[64] != '\0') return std::nullopt;
    if (std::string_view(name.sysname) != "Linux" || std::string_view(name.release) != info.release())
        return std::nullopt;
    return name;
}

struct Heads {
    kdump::DiskDumpHeader header{};
    kdump::KdumpSubHeader sub{};
};

Heads heads(const DumpSpec& spec, const kdump::KdumpLayout& L, const kdump::NoteArea& notes, uint64_t note_offset,
            Compression c, PageSource& source) {
    Heads h;
    auto& d = h.header;
    std::memcpy(d.signature, kdump::kSignature.data(), sizeof d.signature);
    d.header_version = kdump::kHeaderVersion;
    copy_field(d.utsname.sysname, sizeof d.utsname.sysname, "Linux");
    copy_field(d.utsname.machine, sizeof d.utsname.machine, spec.guest_width == 4 ? "i686" : "x86_64");
    std::optional<kernel::Vmcoreinfo> info;
    if (notes.vmcoreinfo_size)
        info = kernel::Vmcoreinfo::parse(std::string_view(
            reinterpret_cast<const char*>(notes.bytes.data() + notes.vmcoreinfo_offset), notes.vmcoreinfo_size));
    if (auto uts = info ? guest_utsname(*info, source) : std::nullopt)
        d.utsname = *uts;
    else if (info)
        copy_field(d.utsname.release, sizeof d.utsname.release, info->release());
    d.tv_sec = dump_time(spec.domain);
    d.status = kdump::flag_of(c);
    d.block_size = kdump::kBlockSize;
    d.sub_hdr_size = 1;
    d.bitmap_blocks = L.bitmap_blocks();
    d.max_mapnr = static_cast<uint32_t>(std::min<uint64_t>(L.max_mapnr, UINT32_MAX));
    d.nr_cpus = static_cast<int32_t>(spec.vcpus.size());
    auto& s = h.sub;
    s.phys_base = info ? info->phys_base() : 0;
    s.end_pfn = s.end_pfn_64 = s.max_mapnr_64 = L.max_mapnr;
    if (notes.vmcoreinfo_size) {
        s.offset_vmcoreinfo = note_offset + notes.vmcoreinfo_offset;
        s.size_vmcoreinfo = notes.vmcoreinfo_size;
    }
    s.offset_note = note_offset;
    s.size_note = notes.bytes.size();
    return h;
}

WriteResult write_kdump_to(int fd, const std::string& name, const DumpSpec& spec_in, PageSource& source,
                           const KdumpOptions& options) {
    const WriteOptions& wo = options.write;
    WriteResult r;
    // The guest kernel as for a v1 file (write_dump.cpp): NT_PRSTATUS from
    // the vcpu contexts, the rest found in the pages during the pass.
    std::optional<DumpSpec> with_prstatus;
    if (wo.guest_kernel) pipeline::add_prstatus(with_prstatus.emplace(spec_in), r.warnings);
    const DumpSpec& spec = with_prstatus ? *with_prstatus : spec_in;
    for (const auto& w : r.warnings)
        if (wo.on_warning) wo.on_warning(w);
    std::optional<pipeline::KernelObserver> kernel;
    if (wo.guest_kernel) kernel.emplace(source);
    pipeline::PageBatch observed;  // a batch as the observer sees it: every page kept
    const auto entries = source.entries();
    kdump::validate_spec(spec, entries);
    const kdump::Index index = spec.type == format::GuestType::pv ? kdump::Index::machine : kdump::Index::pfn;
    const kdump::KdumpLayout L = kdump::plan_kdump(entries, index, options.present);
    const uint64_t n = entries.size();
    // Descriptors go in key order: in place per batch when that is pfn
    // order, else kept (24 bytes a page) and written at the end.
    const std::vector<uint64_t> slots = kdump::descriptor_slots(entries, index);
    std::vector<kdump::PageDesc> scattered(slots.empty() ? 0 : n);

    io::Sink sink(fd, true, wo.sparse, name);
    sink.cancel_on(wo.cancel);
    sink.zeros(L.data_offset);  // written at the end (pwrite); the zero page stays zeros

    std::optional<PageDigests> digests;
    if (wo.digests) digests.emplace(n);
    kdump::PageEncoder encoder(options.compression, std::clamp(wo.threads, 1u, kMaxWriteThreads), kPage);
    Batch batches[2];
    std::vector<kdump::PageDesc> descs;
    std::vector<iovec> iov;
    uint64_t runs = 0;
    for (size_t i = 0; i < n; ++i)
        if (i == 0 || entries[i].pfn != entries[i - 1].pfn + 1) ++runs;

    // Batch k is compressed by the workers while batch k+1 is read, and
    // batch k-1's output is written.
    if (n) {
        batches[0].fill(source, 0, std::min<size_t>(kBatchPages, n));
        encoder.submit(batches[0].pages);
    }
    for (size_t k = 0; n != 0; ++k) {
        Batch& cur = batches[k % 2];
        Batch& next = batches[(k + 1) % 2];
        for (size_t i = 0; i < cur.pages.size(); ++i) {
            const uint64_t pfn = entries[cur.first + i].pfn;
            if (cur.unreadable[i]) r.unreadable_pfns.push_back(pfn);
        }
        if (kernel) {
            observed.first = cur.first;
            observed.count = cur.pages.size();
            observed.entries = entries.subspan(cur.first, cur.pages.size());
            observed.page = cur.pages;
            observed.keep.assign(cur.pages.size(), 1);
            kernel->observe(observed);
        }
        if (digests) digests->add(cur.pages);
        const bool more = cur.end() < n;
        if (more) next.fill(source, cur.end(), std::min<size_t>(kBatchPages, n - cur.end()));
        if (wo.cancel && wo.cancel->load()) throw Error("cancelled");

        const auto out = encoder.collect();
        descs.assign(out.size(), {});
        iov.clear();
        uint64_t at = sink.offset();
        for (size_t i = 0; i < out.size(); ++i) {
            if (out[i].zero) {
                descs[i] = {L.zero_page_offset, static_cast<uint32_t>(kPage), 0, 0};
                continue;
            }
            descs[i] = {at, out[i].size, out[i].flags, 0};
            at += out[i].size;
            iov.push_back({const_cast<std::byte*>(out[i].data), out[i].size});
        }
        sink.writev(iov);
        if (slots.empty())
            pwrite_all(fd, std::as_bytes(std::span(descs)), L.desc_offset + cur.first * sizeof(kdump::PageDesc), name);
        else
            for (size_t i = 0; i < descs.size(); ++i) scattered[slots[cur.first + i]] = descs[i];
        cur.lent.reset();
        if (more) encoder.submit(next.pages);
        if (wo.on_progress) {
            WriteProgress p;
            p.pages_done = cur.end();
            p.pages_total = n;
            p.bytes_done = sink.offset();
            p.bytes_total = L.data_offset + n * kPage;  // at most (pages that do not shrink are raw)
            wo.on_progress(p);
        }
        if (!more) break;
    }

    pipeline::FoundNotes found;
    if (kernel) kernel->finish(found);
    for (auto& w : found.warnings) {
        if (wo.on_warning) wo.on_warning(w);
        r.warnings.push_back(std::move(w));
    }
    const kdump::NoteArea notes = kdump::build_note_area(spec, entries, &found, r.unreadable_pfns,
                                                         digests ? &digests->digests : nullptr);
    sink.zeros((8 - sink.offset() % 8) % 8);
    const uint64_t note_offset = sink.offset();
    sink.write(notes.bytes);
    sink.finish();

    Heads h = heads(spec, L, notes, note_offset, options.compression, source);
    h.sub.dump_level = static_cast<int32_t>(options.dump_level);
    std::vector<std::byte> front(L.desc_offset);
    std::memcpy(front.data(), &h.header, sizeof h.header);
    std::memcpy(front.data() + L.sub_header_offset, &h.sub, sizeof h.sub);
    if (!scattered.empty()) pwrite_all(fd, std::as_bytes(std::span(scattered)), L.desc_offset, name);
    const auto stored = kdump::key_bitmap(L, entries);
    const auto present = options.present.empty() ? stored : kdump::key_bitmap(L, options.present);
    std::memcpy(front.data() + L.bitmap_offset, present.data(), present.size());                // pages that exist
    std::memcpy(front.data() + L.bitmap_offset + L.bitmap_size, stored.data(), stored.size());  // pages stored
    pwrite_all(fd, front, 0, name);

    r.file_size = sink.offset();
    r.nr_pages = n;
    r.nr_runs = runs;
    if (wo.on_progress) {
        WriteProgress p;
        p.pages_done = p.pages_total = n;
        p.bytes_done = p.bytes_total = r.file_size;
        wo.on_progress(p);
    }
    return r;
}

}  // namespace

WriteResult write_kdump_file(const std::filesystem::path& path, const DumpSpec& spec, PageSource& pages,
                             const KdumpOptions& options) {
    try {
        AtomicFile file(path);
        WriteResult r = write_kdump_to(file.fd(), path.string(), spec, pages, options);
        // Nothing is read back behind a compact file's writes: its check reads the pages.
        std::function<void(const std::filesystem::path&)> check;
        if (options.write.check_before_publish)
            check = [&](const std::filesystem::path& p) { options.write.check_before_publish(p, VerifyOptions{}); };
        file.commit(check);
        return r;
    } catch (const Error& e) {
        throw e.with_object(path.string());
    }
}

}  // namespace xendump
