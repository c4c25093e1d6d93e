// write_dump / write_dump_file: the plan's head, the page pass, then
// everything after the pages in xen-dump-core(5) "Layout" order. Every byte goes out front to back
// through one Sink, so a pipe and a file get the same bytes (see plan.hpp for
// how the trailer keeps the layout fixed in advance).
#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <optional>
#include <vector>

#include "io/sink.hpp"
#include "writer/late_notes.hpp"
#include "writer/notes.hpp"
#include "writer/page_pass.hpp"
#include "writer/read_behind.hpp"
#include "writer/plan.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/writer.hpp"

namespace xendump {

namespace {

using writer::bytes_of;

void write_pfn_array(io::Sink& sink, std::span<const PageEntry> entries) {
    constexpr size_t kPart = 65536;
    std::vector<uint64_t> pfns;
    pfns.reserve(std::min(entries.size(), kPart));
    for (size_t i = 0; i < entries.size(); i += kPart) {
        pfns.clear();
        for (size_t j = i; j < std::min(entries.size(), i + kPart); ++j) pfns.push_back(entries[j].pfn);
        sink.write(std::as_bytes(std::span(pfns)));
    }
}

void pwrite_all(int fd, std::span<const std::byte> bytes, uint64_t offset, const std::string& name) {
    while (!bytes.empty()) {
        ssize_t w = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) throw_errno("cannot rewrite the head of the file", name, offset);
        bytes = bytes.subspan(static_cast<size_t>(w));
        offset += static_cast<uint64_t>(w);
    }
}

// After the pass: the notes found in the guest go into the room the plan
// kept (see writer/late_notes.hpp), rewritten in place. Returns the digest
// of the note segment as it finally is.
XXH128_canonical_t finish_notes(int fd, const std::string& name, const writer::DumpPlan& plan,
                                const std::optional<LateNotes>& late, WriteResult& result) {
    if (!late) return plan.notes_digest;
    auto patched = writer::patch_notes(plan, *late);
    if (!patched) return plan.notes_digest;
    pwrite_all(fd, patched->bytes, plan.layout.notes_offset, name);
    result.late_vmcoreinfo = patched->vmcoreinfo;
    result.late_domain_keys = patched->domain_keys;
    return writer::digest_of(patched->bytes);
}

// After the pass: the kernel image PT_LOAD for the program header room the
// plan kept. The segment starts at the page of `paddr` and runs over
// consecutive present pfns, at most max_size bytes: it always points at
// bytes of .xen_pages that hold exactly those pages.
std::optional<Elf64_Phdr> kernel_segment(const writer::DumpPlan& plan, std::span<const PageEntry> entries,
                                         const std::optional<LateNotes>& late) {
    if (!late || !late->kernel_image || !plan.kernel_phdr_offset) return std::nullopt;
    const KernelImageSegment& k = *late->kernel_image;
    constexpr uint64_t kPage = format::kPageSize;
    if (k.vaddr % kPage || k.paddr % kPage || k.max_size < kPage) return std::nullopt;
    const uint64_t pfn = k.paddr / kPage;
    auto it = std::lower_bound(entries.begin(), entries.end(), pfn,
                               [](const PageEntry& e, uint64_t p) { return e.pfn < p; });
    if (it == entries.end() || it->pfn != pfn) return std::nullopt;
    const auto first = static_cast<uint64_t>(it - entries.begin());
    uint64_t count = 1;
    while (first + count < entries.size() && (count + 1) * kPage <= k.max_size &&
           entries[first + count].pfn == pfn + count)
        ++count;
    Elf64_Phdr ph{};
    ph.p_type = PT_LOAD;
    ph.p_flags = PF_R | PF_W | PF_X;
    ph.p_offset = plan.layout.pages_offset + first * kPage;
    ph.p_vaddr = k.vaddr;
    ph.p_paddr = k.paddr;
    ph.p_filesz = ph.p_memsz = count * kPage;
    ph.p_align = 0;  // as the runs
    return ph;
}

// The kernel image segment goes into the program header room: rewritten in
// place when the table sits in the head (written already); when it comes at
// the end (PV, see writer::program_headers_at_end) write_phdrs_at_end puts it
// there. Either way e_phnum then counts it.
void count_kernel_segment(int fd, const std::string& name, const writer::DumpPlan& plan,
                          const std::optional<Elf64_Phdr>& kernel, WriteResult& result) {
    if (!kernel) return;
    if (!plan.phdrs_at_end()) pwrite_all(fd, bytes_of(*kernel), plan.kernel_phdr_offset, name);
    const auto phnum = static_cast<Elf64_Half>(plan.layout.phnum + 1);
    pwrite_all(fd, bytes_of(phnum), offsetof(Elf64_Ehdr, e_phnum), name);
    result.kernel_segment = true;
}

void write_phdrs_at_end(io::Sink& sink, const writer::DumpPlan& plan, const std::optional<Elf64_Phdr>& kernel) {
    sink.zeros(plan.phdr_offset - sink.offset());
    const std::span<const std::byte> table(plan.phdrs);
    if (!kernel) {
        sink.write(table);
        return;
    }
    const size_t at = static_cast<size_t>(plan.kernel_phdr_offset - plan.phdr_offset);
    sink.write(table.first(at));
    sink.write(bytes_of(*kernel));
    sink.write(table.subspan(at + sizeof(Elf64_Phdr)));
}

void write_trailer(io::Sink& sink, const writer::DumpPlan& plan, const writer::PassResult& pass,
                   const XXH128_canonical_t& notes_digest) {
    using format::kNameXenCore;
    if (plan.digest_note_size) {
        const format::DigestDescHead head{format::kDigestXxh3_128, format::kDigestChunkPages};
        const uint64_t descsz = plan.digest_note_size - writer::note_header_size(kNameXenCore);
        sink.write(writer::note_header(kNameXenCore, format::kNtXenDigest, descsz));
        sink.write(bytes_of(head));
        sink.write(std::as_bytes(std::span(pass.chunk_digests)));
        sink.write(bytes_of(notes_digest));
        sink.write(bytes_of(plan.p2m_digest));
    }
    uint64_t used = 0;
    const auto& bad = pass.unreadable_pfns;
    if (!bad.empty()) {
        const uint64_t count = bad.size();
        const uint64_t descsz = sizeof count + count * sizeof(uint64_t);
        auto header = writer::note_header(kNameXenCore, format::kNtXenUnreadable, descsz);
        sink.write(header);
        sink.write(bytes_of(count));
        sink.write(std::as_bytes(std::span(bad)));
        used = header.size() + descsz;
    }
    // The rest of the reserved area: one padding note of zeros.
    const uint64_t pad_desc = plan.unreadable_area_size - used - writer::note_header_size(kNameXenCore);
    sink.write(writer::note_header(kNameXenCore, format::kNtXenPadding, pad_desc));
    sink.zeros(pad_desc);
}

// `read_back`: when given (and the file has digests), the pages the
// write-behind drops are read back from the file first (read_behind.hpp).
WriteResult write_to(int fd, bool seekable, const std::string& name, const DumpSpec& spec, PageSource& pages,
                     const WriteOptions& options, PagesReadBack* read_back = nullptr) {
    const auto entries = pages.entries();
    const writer::DumpPlan plan = writer::plan_dump(spec, entries, options.digests);
    const Layout& L = plan.layout;
    std::optional<writer::ReadBehind> behind;  // before the sink: the sink's hook refers to it
    io::Sink sink(fd, seekable, options.sparse, name);
    sink.cancel_on(options.cancel);
    if (read_back && plan.digest_note_size) {
        behind.emplace(fd, L.pages_offset, L.pages_size, uint64_t{format::kDigestChunkPages} * format::kPageSize, name);
        sink.before_drop([&behind](uint64_t offset, uint64_t size) { behind->take(offset, size); });
    }

    sink.write(plan.head);
    writer::PassResult pass = writer::write_pages(sink, pages, plan, options);
    if (plan.digest_note_size && pass.chunk_digests.size() != plan.nr_chunks)
        throw Error("internal error: digest chunk count", name);
    WriteResult r;
    // What the pass found in the guest goes into the head; a pipe's head is
    // gone already, so only seekable outputs ask.
    std::optional<LateNotes> late;
    if (plan.late_room && seekable && options.after_pages) late = options.after_pages();
    const XXH128_canonical_t notes_digest = finish_notes(fd, name, plan, late, r);
    const std::optional<Elf64_Phdr> kernel = kernel_segment(plan, entries, late);
    count_kernel_segment(fd, name, plan, kernel, r);

    sink.zeros(L.p2m_note_offset - (L.pages_offset + L.pages_size));
    sink.write(plan.p2m_note_header);
    sink.write(std::as_bytes(plan.p2m));
    if (L.pfn_size) write_pfn_array(sink, entries);
    write_trailer(sink, plan, pass, notes_digest);
    sink.write(plan.shstrtab);
    sink.zeros(plan.shdr_offset - sink.offset());
    sink.write(plan.shdrs);
    if (plan.phdrs_at_end()) write_phdrs_at_end(sink, plan, kernel);
    sink.finish();
    if (sink.offset() != plan.file_size)
        throw Error("internal error: wrote " + std::to_string(sink.offset()) + " bytes, planned " +
                        std::to_string(plan.file_size),
                    name);

    if (options.on_progress) {
        WriteProgress p;
        p.pages_done = p.pages_total = entries.size();
        p.bytes_done = p.bytes_total = plan.file_size;
        options.on_progress(p);
    }
    r.file_size = plan.file_size;
    r.nr_pages = entries.size();
    r.nr_runs = plan.nr_runs;
    r.unreadable_pfns = std::move(pass.unreadable_pfns);
    if (behind) *read_back = behind->result();
    return r;
}

}  // namespace

uint64_t expected_file_size(const DumpSpec& spec, std::span<const PageEntry> entries, bool digests) {
    return writer::plan_dump(spec, entries, digests).file_size;
}

WriteResult write_dump(int fd, bool seekable, const DumpSpec& spec, PageSource& pages,
                       const WriteOptions& options) {
    return write_to(fd, seekable, "fd " + std::to_string(fd), spec, pages, options);
}

WriteResult write_dump_file(const std::filesystem::path& path, const DumpSpec& spec, PageSource& pages,
                            const WriteOptions& options) {
    try {
        AtomicFile file(path);
        const auto& check = options.check_before_publish;
        PagesReadBack read_back;
        WriteResult r = write_to(file.fd(), true, path.string(), spec, pages, options, check ? &read_back : nullptr);
        if (check)
            file.commit([&](const std::filesystem::path& p) { check(p, read_back); });
        else
            file.commit();
        return r;
    } catch (const Error& e) {
        throw e.with_object(path.string());
    }
}

}  // namespace xendump
