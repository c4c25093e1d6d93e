#include "legacy/conversion.hpp"

#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <optional>

#include "io/flattened.hpp"
#include "kdump/write_kdump.hpp"
#include "kernel/level_warnings.hpp"
#include "legacy/byte_source.hpp"
#include "legacy/layout.hpp"
#include "legacy/legacy_page_source.hpp"
#include "legacy/source_identity.hpp"
#include "legacy/xc_core.hpp"
#include "store/multipart_output.hpp"
#include "pipeline/zero_copy_source.hpp"
#include "reader/spec_of.hpp"
#include "util/util.hpp"
#include "xendump/dump_kernel_log.hpp"
#include "xendump/error.hpp"
#include "xendump/reader.hpp"
#include "xendump/s3.hpp"
#include "xendump_config.h"

namespace xendump {
namespace fs = std::filesystem;
using legacy::FileByteSource;
using legacy::looks_like_xc_core;

std::string_view to_string(InputFormat f) {
    switch (f) {
    case InputFormat::xc_core: return "xc_core";
    case InputFormat::xen_elf: return "xen-elf";
    case InputFormat::v1: return "v1";
    case InputFormat::kdump: return "kdump";
    case InputFormat::unknown: return "unknown";
    case InputFormat::flattened: return "flattened";
    }
    return "unknown";
}

InputFormat sniff_format(const fs::path& path) { return sniff_format(path, OpenOptions{}); }

InputFormat sniff_format(const fs::path& path, const OpenOptions& open) {
    FileByteSource src(path.string(), open);
    std::byte head[sizeof(Elf64_Ehdr)]{};
    size_t n = static_cast<size_t>(std::min<uint64_t>(src.size(), sizeof head));
    src.read(0, std::span(head, n), "file header");
    if (looks_like_xc_core(std::span(head, n))) return InputFormat::xc_core;
    if (n >= 8 && std::memcmp(head, "KDUMP   ", 8) == 0) return InputFormat::kdump;
    if (io::flat::has_signature(std::span(head, n))) return InputFormat::flattened;
    if (n >= EI_NIDENT && std::memcmp(head, ELFMAG, SELFMAG) == 0) {
        // Xen's own dump-core has sections only; v1 adds program headers
        // (xen-dump-core(5), "ELF header"). e_phnum sits at the same offset
        // for both ELF classes' headers only in ELF64, the only class used.
        if (n < sizeof(Elf64_Ehdr)) return InputFormat::unknown;
        Elf64_Ehdr eh;
        std::memcpy(&eh, head, sizeof eh);
        if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_type != ET_CORE) return InputFormat::unknown;
        return eh.e_phnum == 0 ? InputFormat::xen_elf : InputFormat::v1;
    }
    return InputFormat::unknown;
}

}  // namespace xendump

namespace xendump::legacy {
namespace {

// Drops the entries of ~0 that Xen's writer leaves at the end of .xen_p2m /
// .xen_pfn (doc/legacy-formats.md 2), passing everything else through.
class TrimmedSource : public ZeroCopySource {
public:
    // Reads the table's end backwards, a window at a time.
    TrimmedSource(std::unique_ptr<PageSource> inner) : inner_(std::move(inner)), count_(inner_->nr_entries()) {
        std::vector<PageEntry> w(4096);
        while (count_ > 0) {
            const uint64_t k = std::min<uint64_t>(w.size(), count_);
            inner_->read_entries(count_ - k, std::span(w).first(static_cast<size_t>(k)));
            uint64_t kept = k;
            while (kept > 0 && w[static_cast<size_t>(kept - 1)].pfn == ~uint64_t{0}) --kept;
            count_ -= k - kept;
            if (kept) break;
        }
    }
    uint64_t nr_entries() const override { return count_; }
    void read_entries(uint64_t first, std::span<PageEntry> out) const override {
        if (first > count_ || out.size() > count_ - first)
            throw Error("page entries " + std::to_string(first) + "+" + std::to_string(out.size()) + " are past the " +
                        std::to_string(count_) + " pages");
        inner_->read_entries(first, out);
    }
    std::optional<uint64_t> index_of_pfn(uint64_t pfn) const override {
        auto i = inner_->index_of_pfn(pfn);
        return i && *i < count_ ? i : std::nullopt;
    }
    void read_pages(size_t first, size_t count, std::span<std::byte> out, std::span<uint8_t> unreadable) override {
        inner_->read_pages(first, count, out, unreadable);
    }
    size_t preferred_batch() const override { return inner_->preferred_batch(); }
    std::optional<FileRange> file_range(size_t first, size_t count) const override {
        auto* zero_copy = dynamic_cast<const ZeroCopySource*>(inner_.get());
        return zero_copy ? zero_copy->file_range(first, count) : std::nullopt;
    }

private:
    std::unique_ptr<PageSource> inner_;
    uint64_t count_;
};

std::string rfc3339(time_t t) { return util::utc_time(t, "%Y-%m-%dT%H:%M:%SZ"); }

void common_keys(KeyValues& kv, const fs::path& input, const std::string& source_kind, const std::string& layout,
                 const SourceIdentity& id, const ConvertOptions& opt) {
    kv.set(keys::kReason, std::string(format::to_string(format::Reason::convert)));
    kv.set(keys::kSource, source_kind + ":" + input.filename().string());
    kv.set(keys::kLayout, layout);
    kv.set(keys::kSourceId, id.value());
    kv.set(keys::kP2m, std::string(format::to_string(format::P2mKind::file)));
    kv.set(keys::kWriter, opt.writer_name + " " XENDUMP_VERSION);
    // The source's modification time is the best known time of the dump.
    kv.set(keys::kTime, rfc3339(static_cast<time_t>(id.mtime_sec)));
}

void set_max_pfn(KeyValues& kv, const PageSource& pages) {
    kv.set(keys::kMaxPfn, std::to_string(end_pfn(pages)));
}

// Writes the v1 file. The guest kernel's notes come from the same single
// pass as in the dumper (WriteOptions::guest_kernel): outputs are always
// seekable files, so the room the writer reserves is always filled when the
// source's pages hold a kernel.
//
// With a check of the output, the source is identified again first: one that
// changed (or was replaced) while it was read gives an output that is never
// published, since SOURCE_ID= would not name what it holds.
// --dump-level: what the level keeps of `pages`, classified through `reader`
// (null: the input cannot be read by the classifier; zero pages only).
kernel::PageSelection select_for_level(const fs::path& input, const DumpReader* reader, PageSource& pages,
                                       const ConvertOptions& opt) {
    kernel::PageSelection sel;
    if (!reader) {
        sel = kdump::zero_pages_only(pages, opt.dump_level, "an xc_core input is not classified by its kernel");
    } else {
        const auto info = dump_vmcoreinfo(*reader, true);
        sel = kernel::select_pages(dump_level_input(*reader, info ? &*info : nullptr), opt.dump_level);
    }
    if (opt.write.on_warning)
        for (const std::string& w : kernel::level_warnings(sel, opt.dump_level)) opt.write.on_warning(input.string() + ": " + w);
    return sel;
}

// `output` s3://BUCKET/KEY: streamed into the object (a multipart upload
// completed last, aborted on any error: nothing under the key unless the
// whole file is there), the store's client from the environment as for
// xen-dumpd -o s3://. Not read back (check_before_publish is not called):
// the store checks each part it takes.
void write_converted(const fs::path& input, const SourceIdentity& id, const fs::path& output, DumpSpec& spec,
                     PageSource& pages, const ConvertOptions& opt, const DumpReader* reader = nullptr) {
    WriteOptions wo = opt.write;
    wo.guest_kernel = true;
    if (const auto& check = opt.write.check_before_publish)
        wo.check_before_publish = [&](const fs::path& unpublished, const VerifyOptions& verify) {
            if (auto changed = identify_source(input, opt.open).difference_from(id); !changed.empty())
                throw Error("the source changed while it was converted (" + changed + "): output not published",
                            input.string());
            check(unpublished, verify);
        };
    std::optional<s3::Client> client;
    std::optional<s3::Url> url;
    if (s3::is_url(output.string())) {
        url = s3::parse_url(output.string());
        try {
            client.emplace(s3::settings_from_environment());
        } catch (const Error& e) {
            throw e.with_object(url->str());
        }
    }
    // A compact file into an object: the upload is made here, completed by
    // the writer's last write, aborted by its destructor on any error.
    std::optional<store::MultipartOutput> object;
    if (url && opt.kdump) {
        try {
            object.emplace(*client, *url);
        } catch (const Error& e) {
            throw e.with_object(url->str());
        }
    }
    const kdump::Destination to =
        object ? kdump::Destination::object_output(*object, url->str()) : kdump::Destination(output);
    if (opt.kdump && opt.dump_level != 0) {
        const kernel::PageSelection sel = select_for_level(input, reader, pages, opt);
        kdump::write_kdump_selection(to, spec, pages, sel, {opt.compression, wo});
        return;
    }
    if (opt.kdump)
        kdump::write_kdump_every_page(to, spec, pages, {opt.compression, wo});
    else if (url)
        write_dump_object(*client, *url, spec, pages, wo);
    else
        write_dump_file(output, spec, pages, wo);
}

// A v1 file to a compact one: its notes as they are (the dump's own
// DOMID, TIME, REASON, KERNEL...), with the source named as for any
// conversion.
Plan v1_to_kdump(const fs::path& input, const fs::path* output, const ConvertOptions& opt) {
    DumpReader reader = DumpReader::open(input, opt.open);
    Plan plan{InputFormat::v1, "v1", reader.nr_pages(), false};
    if (!output) return plan;
    auto pages = reader.page_source();
    const SourceIdentity id = identify_source(input, opt.open);
    DumpSpec spec = reader::spec_of(reader);
    spec.domain.set(keys::kSource, "v1:" + input.filename().string());
    spec.domain.set(keys::kLayout, "v1");
    spec.domain.set(keys::kSourceId, id.value());
    spec.domain.set(keys::kWriter, opt.writer_name + " " XENDUMP_VERSION);
    write_converted(input, id, *output, spec, *pages, opt, &reader);
    return plan;
}

// The legacy path: parse, decide, and (when `output`) write.
Plan legacy(const fs::path& input, const fs::path* output, const ConvertOptions& opt) {
    FileByteSource src(input.string(), opt.open);
    XcCoreFile file = parse_xc_core(src);
    LegacyLayout layout = decide_layout(src, file, {opt.system_map, opt.allow_inferred});
    Plan plan{InputFormat::xc_core, layout.layout, layout.entries.size(), layout.inferred};
    if (layout.entries.empty()) throw Error("no page of the dump has a known pfn", input.string());
    if (!output) return plan;

    const SourceIdentity id = identify_source(src);
    DumpSpec spec;
    spec.type = layout.type;
    // A 32-bit tool's context is a 32-bit guest's (Xen <= 3.0.4 had no compat guests).
    spec.guest_width = file.guest_width;
    common_keys(spec.domain, input, "legacy-xc_core", layout.layout, id, opt);
    spec.domain.set(keys::kType, std::string(format::to_string(layout.type)));
    spec.domain.set(keys::kGuestWidth, std::to_string(file.guest_width));
    for (uint32_t v = 0; v < file.contexts.size(); ++v) spec.vcpus.push_back({v, file.contexts[v]});
    spec.xen_version.pagesize = 4096;
    LegacyPageSource pages(src, file, layout);
    set_max_pfn(spec.domain, pages);
    write_converted(input, id, *output, spec, pages, opt);
    return plan;
}

Plan xen_elf(const fs::path& input, const fs::path* output, const ConvertOptions& opt) {
    // The reader drops the table's trailing ~0 entries and does not load the
    // table: planning (no output) costs no memory per page, and neither does
    // the writer (it reads the table a window at a time).
    DumpReader reader = DumpReader::open(input, opt.open);
    bool pv = reader.type() == format::GuestType::pv;
    std::string layout = std::string(pv ? "pfn-table" : "pfn-array") + ";decided-by=" + (pv ? ".xen_p2m" : ".xen_pfn");
    Plan plan{InputFormat::xen_elf, layout, reader.nr_pages(), false};
    if (!output) return plan;
    TrimmedSource pages(reader.page_source());

    const SourceIdentity id = identify_source(input, opt.open);
    DumpSpec spec;
    spec.type = reader.type();
    spec.guest_width = reader.guest_width();
    common_keys(spec.domain, input, "xen-elf-core", layout, id, opt);
    spec.domain.set(keys::kType, std::string(format::to_string(spec.type)));
    spec.domain.set(keys::kGuestWidth, std::to_string(spec.guest_width));
    set_max_pfn(spec.domain, pages);
    spec.vcpus = reader.vcpus();
    spec.xen_version = reader.xen_version();
    spec.shared_info = reader.shared_info();
    write_converted(input, id, *output, spec, pages, opt, &reader);
    return plan;
}

// The flattened stream `read` (named `name`; `total` bytes, 0 when not
// known) rearranged into `output` (rearrange_flattened).
Plan rearranged(const io::flat::ReadSome& read, const std::string& name, uint64_t total, const fs::path& output,
                const ConvertOptions& opt) {
    if (s3::is_url(output.string()))
        throw Error("a flattened stream is rearranged into a local file, not into object storage (yet): "
                    "rearrange it into a file, then convert or upload that",
                    output.string());
    try {
        AtomicFile file(output);
        const auto progress = [&](uint64_t bytes) {
            if (!opt.write.on_progress) return;
            WriteProgress p;
            p.pages_done = p.bytes_done = bytes;
            p.pages_total = p.bytes_total = total;
            opt.write.on_progress(p);
        };
        const io::flat::Rearranged r =
            io::flat::rearrange(read, name, file.fd(), output.string(), opt.write.cancel, progress);
        if (const auto& check = opt.write.check_before_publish)
            file.commit([&](const fs::path& unpublished) { check(unpublished, VerifyOptions{}); });
        else
            file.commit();
        Plan plan{InputFormat::flattened, "rearranged;records=" + std::to_string(r.records), 0, false};
        try {
            plan.pages = DumpReader::open(output).nr_pages();
        } catch (const Error&) {
            // Not a dump the readers open: rearranged all the same, as makedumpfile -R would.
        }
        return plan;
    } catch (const Error& e) {
        throw e.with_object(output.string());
    }
}

// A flattened input file (encrypted: its plaintext), read front to back;
// without an output, read in place for its pages.
Plan flattened(const fs::path& input, const fs::path* output, const ConvertOptions& opt) {
    if (!output) return Plan{InputFormat::flattened, "rearranged", DumpReader::open(input, opt.open).nr_pages(), false};
    FileByteSource src(input.string(), opt.open);
    uint64_t pos = 0;
    const io::flat::ReadSome read = [&](std::span<std::byte> out) {
        const auto n = static_cast<size_t>(std::min<uint64_t>(out.size(), src.size() - pos));
        src.read(pos, out.first(n), "flattened stream");
        pos += n;
        return n;
    };
    return rearranged(read, input.string(), src.size(), *output, opt);
}

Plan run(const fs::path& input, const fs::path* output, const ConvertOptions& opt) {
    switch (sniff_format(input, opt.open)) {
    case InputFormat::xc_core: return legacy(input, output, opt);
    case InputFormat::xen_elf: return xen_elf(input, output, opt);
    case InputFormat::v1:
        if (opt.kdump) return v1_to_kdump(input, output, opt);
        return Plan{InputFormat::v1, {}, 0, false};
    case InputFormat::kdump: return Plan{InputFormat::kdump, {}, 0, false};
    case InputFormat::flattened: return flattened(input, output, opt);
    case InputFormat::unknown: break;
    }
    throw Error("not a Xen dump: neither an xc_core magic (0xf00febed/0xf00febee) nor an ELF core file",
                input.string(), 0);
}

}  // namespace
}  // namespace xendump::legacy

namespace xendump {

ConversionPlan plan_conversion(const fs::path& input, const ConvertOptions& options) {
    return legacy::run(input, nullptr, options);
}

ConversionPlan convert_file(const fs::path& input, const fs::path& output, const ConvertOptions& options) {
    return legacy::run(input, &output, options);
}

ConversionPlan rearrange_flattened(int fd, const std::string& name, const fs::path& output,
                                   const ConvertOptions& options) {
    uint64_t total = 0;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
        if (const off_t at = ::lseek(fd, 0, SEEK_CUR); at >= 0 && at <= st.st_size)
            total = static_cast<uint64_t>(st.st_size - at);
    uint64_t pos = 0;
    const io::flat::ReadSome read = [&](std::span<std::byte> out) {
        const ssize_t n = util::retry_eintr([&] { return ::read(fd, out.data(), out.size()); });
        if (n < 0) throw_errno("cannot read the flattened stream", name, pos);
        pos += static_cast<uint64_t>(n);
        return static_cast<size_t>(n);
    };
    return legacy::rearranged(read, name, total, output, options);
}

}  // namespace xendump
