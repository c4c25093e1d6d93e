// DumpReader accessors and page lookups (pfn: binary search of the runs;
// gmfn: binary search of the gmfn extents, built by one pass over the table
// on first use). Nothing here holds the table itself but entries().
#include <algorithm>
#include <future>

#include "reader/check_error.hpp"
#include "reader/checked.hpp"
#include "reader/flattened_image.hpp"
#include "reader/reader_impl.hpp"
#include "util/runs.hpp"
#include "kdump/codec.hpp"
#include "kdump/kdump_file.hpp"

namespace xendump {

DumpReader::DumpReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DumpReader::DumpReader(DumpReader&&) noexcept = default;
DumpReader& DumpReader::operator=(DumpReader&&) noexcept = default;
DumpReader::~DumpReader() = default;

const std::filesystem::path& DumpReader::path() const { return impl_->path; }
FileFormat DumpReader::format() const { return impl_->format; }
uint64_t DumpReader::file_size() const { return impl_->file->size(); }
std::optional<EncryptionInfo> DumpReader::encryption() const { return impl_->file->encryption(); }
std::optional<StoreInfo> DumpReader::store() const { return impl_->file->store(); }
std::optional<FlattenedInfo> DumpReader::flattened() const {
    const reader::FlattenedImage* f = impl_->file->flattened();
    if (!f) return std::nullopt;
    return FlattenedInfo{impl_->file->stored_size(), f->records(), f->stretches()};
}
format::GuestType DumpReader::type() const { return impl_->type; }
unsigned DumpReader::guest_width() const { return impl_->guest_width; }
uint64_t DumpReader::nr_pages() const { return impl_->nr_entries(); }
uint64_t DumpReader::page_size() const { return impl_->header.xch_page_size; }
const format::HeaderDesc& DumpReader::header() const { return impl_->header; }
const format::XenVersionDesc& DumpReader::xen_version() const { return impl_->xen_version; }
const KeyValues& DumpReader::domain() const { return impl_->domain; }
std::span<const PageEntry> DumpReader::entries() const { return *impl_->all_entries(); }
PageEntry DumpReader::entry(uint64_t index) const {
    if (index >= impl_->nr_entries())
        throw Error("entry " + std::to_string(index) + " is past the table (" + std::to_string(impl_->nr_entries()) +
                        " entries)",
                    impl_->file_name());
    if (impl_->type != format::GuestType::pv) {
        const uint64_t pfn = impl_->pfn_of_index(index);
        return {pfn, pfn};
    }
    return impl_->table.at(index);
}
const std::vector<PageRun>& DumpReader::runs() const { return impl_->runs; }
std::vector<VcpuContext> DumpReader::vcpus() const { return impl_->vcpus; }
std::optional<std::vector<std::byte>> DumpReader::shared_info() const { return impl_->shared_info; }
std::optional<std::string> DumpReader::vmcoreinfo() const { return impl_->vmcoreinfo; }
std::vector<uint64_t> DumpReader::unreadable_pfns() const { return impl_->unreadable; }
bool DumpReader::has_digests() const { return impl_->digest != nullptr; }
uint64_t DumpReader::pages_offset() const { return impl_->pages_offset; }

std::optional<CompactFormat> DumpReader::compact_format() const {
    if (!impl_->kdump) return std::nullopt;
    CompactFormat f;
    const uint32_t status = impl_->kdump->header().status;
    for (Compression c : {Compression::zstd, Compression::lz4, Compression::lzo, Compression::zlib})
        if (status & kdump::flag_of(c)) {
            f.compression = c;
            break;
        }
    const int32_t level = impl_->kdump->sub_header().dump_level;
    if (level >= 0 && level <= 31) f.dump_level = static_cast<unsigned>(level);
    return f;
}

std::optional<uint64_t> DumpReader::zero_pages() const {
    if (!impl_->kdump) return std::nullopt;
    return impl_->kdump->shared_zero_pages();
}

std::optional<KernelImageMapping> DumpReader::kernel_image_mapping() const {
    const auto& segs = impl_->elf.segments;
    if (impl_->format != FileFormat::v1 || segs.size() < 3) return std::nullopt;
    const auto& p = segs.back().phdr;
    if (p.p_type != PT_LOAD || p.p_vaddr == 0) return std::nullopt;
    return KernelImageMapping{p.p_vaddr, p.p_paddr, p.p_filesz, p.p_offset};
}

std::optional<uint64_t> DumpReader::index_of_pfn(uint64_t pfn) const { return impl_->index_of_pfn(pfn); }

std::optional<uint64_t> DumpReader::Impl::index_of_pfn(uint64_t pfn) const {
    const auto it = util::run_holding(runs, pfn, &PageRun::first_pfn, &PageRun::count);
    if (it == runs.end()) return std::nullopt;
    return it->first_index + (pfn - it->first_pfn);
}

uint64_t DumpReader::Impl::pfn_of_index(uint64_t index) const {
    // Every index lies in a run (the runs cover the table).
    const auto it = util::run_at_or_before(runs, index, &PageRun::first_index);
    return it->first_pfn + (index - it->first_index);
}

const std::vector<DumpReader::Impl::GmfnExtent>& DumpReader::Impl::gmfn_extents() const {
    std::call_once(gmfn_once, [this] {
        std::vector<GmfnExtent> v;
        table.scan([&v](uint64_t i, const PageEntry& e) {
            if (!v.empty() && v.back().index + v.back().count == i && v.back().gmfn + v.back().count == e.gmfn &&
                e.gmfn != ~uint64_t{0})
                ++v.back().count;
            else
                v.push_back({e.gmfn, i, 1, 0});
            return true;
        });
        std::sort(v.begin(), v.end(),
                  [](const GmfnExtent& a, const GmfnExtent& b) { return a.gmfn != b.gmfn ? a.gmfn < b.gmfn : a.index < b.index; });
        uint64_t end_max = 0;
        for (auto& x : v) {
            const uint64_t end = x.count > UINT64_MAX - x.gmfn ? UINT64_MAX : x.gmfn + x.count;
            x.end_max = end_max = std::max(end_max, end);
        }
        v.shrink_to_fit();
        by_gmfn = std::move(v);
    });
    return by_gmfn;
}

const std::shared_ptr<const reader::EntryTable>& DumpReader::Impl::all_entries() const {
    std::call_once(all_once, [this] {
        auto v = std::make_shared<reader::EntryTable>(table.size());
        for (uint64_t at = 0; at < v->size(); at += reader::TableOnDisk::kWindow) {
            const uint64_t n = std::min<uint64_t>(reader::TableOnDisk::kWindow, v->size() - at);
            table.read(at, std::span(*v).subspan(at, n));
        }
        all = std::move(v);
    });
    return all;
}

std::optional<uint64_t> DumpReader::index_of_gmfn(uint64_t gmfn) const {
    if (impl_->type != format::GuestType::pv) return index_of_pfn(gmfn);
    const auto& x = impl_->gmfn_extents();
    auto it = std::upper_bound(x.begin(), x.end(), gmfn, [](uint64_t g, const Impl::GmfnExtent& e) { return g < e.gmfn; });
    if (it == x.begin()) return std::nullopt;
    // Look back over the extents that may still reach gmfn (one in a
    // conforming file; with duplicate gmfns, a verify finding, the lowest
    // index holding it wins).
    std::optional<uint64_t> found;
    do {
        --it;
        if (gmfn - it->gmfn < it->count) {
            const uint64_t idx = it->index + (gmfn - it->gmfn);
            if (!found || idx < *found) found = idx;
        }
    } while (it != x.begin() && std::prev(it)->end_max > gmfn);
    return found;
}

uint64_t DumpReader::page_offset(uint64_t index) const {
    const auto& d = *impl_;
    if (d.kdump) throw Error("a compact (kdump) file's pages are compressed: they have no fixed offset", d.file_name());
    if (index >= d.nr_entries())
        throw Error("page index " + std::to_string(index) + " is past the table (" +
                        std::to_string(d.nr_entries()) + " entries)",
                    d.file_name());
    const uint64_t rel = index * format::kPageSize;  // index < file size / 16: no overflow
    if (!reader::range_inside(rel, format::kPageSize, d.pages_size))
        throw Error(".xen_pages: page " + std::to_string(index) + " at " + reader::hex(d.pages_offset + rel) +
                        " is past the end of the section (" + reader::hex(d.pages_offset + d.pages_size) + ")",
                    d.file_name(), d.pages_offset + rel);
    return d.pages_offset + rel;
}

uint64_t DumpReader::Impl::kdump_desc(uint64_t index, uint64_t gmfn) const {
    return type == format::GuestType::pv ? kdump->stored_bitmap().rank(gmfn) : index;
}

namespace {
void read_page_at(const DumpReader& r, const DumpReader::Impl& d, uint64_t index, std::span<std::byte> out) {
    if (out.size() < format::kPageSize)
        throw Error("page buffer of " + std::to_string(out.size()) + " bytes is smaller than a page", d.file_name());
    if (d.kdump) {
        const uint64_t gmfn = d.type == format::GuestType::pv ? d.table.at(index).gmfn : index;
        return d.kdump->read_page(d.kdump_desc(index, gmfn), out);
    }
    d.file->read_exact(r.page_offset(index), out.first(format::kPageSize), "page " + std::to_string(index));
}
}  // namespace

void DumpReader::read_pages(uint64_t first, uint64_t count, std::span<std::byte> out) const {
    const auto& d = *impl_;
    if (count == 0) return;
    if (first >= d.nr_entries() || d.nr_entries() - first < count || out.size() / format::kPageSize < count)
        throw Error("pages " + std::to_string(first) + "+" + std::to_string(count) + " are past the table (" +
                        std::to_string(d.nr_entries()) + " entries) or the buffer",
                    d.file_name());
    if (d.kdump) {  // compressed one by one
        for (uint64_t i = 0; i < count; ++i)
            read_page_at(*this, d, first + i, out.subspan(i * format::kPageSize, format::kPageSize));
        return;
    }
    const uint64_t from = page_offset(first);
    page_offset(first + count - 1);  // the last page lies inside .xen_pages too
    d.file->read_exact(from, out.first(count * format::kPageSize), ".xen_pages");
}

bool DumpReader::read_page_by_pfn(uint64_t pfn, std::span<std::byte> out) const {
    auto idx = index_of_pfn(pfn);
    if (!idx) return false;
    read_page_at(*this, *impl_, *idx, out);
    return true;
}

bool DumpReader::read_page_by_gmfn(uint64_t gmfn, std::span<std::byte> out) const {
    auto idx = index_of_gmfn(gmfn);
    if (!idx) return false;
    read_page_at(*this, *impl_, *idx, out);
    return true;
}

std::vector<Finding> DumpReader::verify(const VerifyOptions& options) const { return verify_report(options).findings; }

VerifyReport DumpReader::verify_report(const VerifyOptions& options) const {
    VerifyReport rep;
    rep.digests = !options.digests ? DigestCheck::skipped : impl_->digest ? DigestCheck::compared : DigestCheck::absent;
    std::vector<Finding>& out = rep.findings;
    out = impl_->open_findings;
    // The page digests (reads and hashing, most of the time) run while the
    // structural checks do; both only read the opened file. Findings keep
    // their order: structure first, then digests.
    std::future<std::vector<Finding>> digests;
    if (rep.digests == DigestCheck::compared && !impl_->kdump)  // check_kdump reads the pages once for both
        digests = std::async(std::launch::async, [this, &options] { return reader::check_digests(*impl_, options); });
    std::vector<Finding> more;
    try {
        more = impl_->kdump ? reader::check_kdump(*impl_, options) : reader::run_checks(*impl_, options);
    } catch (...) {
        if (digests.valid()) digests.wait();  // it uses *impl_: let it finish first
        throw;
    }
    out.insert(out.end(), more.begin(), more.end());
    if (digests.valid()) {
        auto dig = digests.get();
        out.insert(out.end(), dig.begin(), dig.end());
    }
    if (rep.digests == DigestCheck::absent && !options.allow_no_digests) out.push_back(reader::digests_absent(*impl_));
    return rep;
}

std::vector<Finding> DumpReader::verify_file(const std::filesystem::path& path, const VerifyOptions& options) {
    return verify_file_report(path, options).findings;
}

VerifyReport DumpReader::verify_file_report(const std::filesystem::path& path, const VerifyOptions& options) {
    return verify_file_report(path, options, OpenOptions{});
}

VerifyReport DumpReader::verify_file_report(const std::filesystem::path& path, const VerifyOptions& options,
                                            const OpenOptions& open_options) {
    try {
        return open(path, open_options).verify_report(options);
    } catch (const reader::CheckError& e) {
        return {{e.finding()}, DigestCheck::skipped};
    }
}

}  // namespace xendump
