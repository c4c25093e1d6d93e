#include "dump/live_image.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include "age/age.hpp"
#include "io/object_output.hpp"
#include "io/random_access.hpp"
#include "io/sealed_temp_file.hpp"
#include "io/sink.hpp"
#include "io/temp_file.hpp"
#include "kernel/level_warnings.hpp"
#include "reader/dump_file.hpp"
#include "reader/reader_impl.hpp"
#include "reader/spec_of.hpp"
#include "writer/write_v1.hpp"
#include "xendump/dump_kernel_log.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"

namespace xendump::dump {

namespace {

// The sealed image: what the v1 writer writes into it as an object
// (io::Sink's positional calls, rewrites included), read back at any offset
// (the re-digest after the final round, then the reader). A range of zeros
// is not written: a block never written reads as zeros and takes no room.
class SealedImage final : public io::ObjectOutput, public io::RandomAccess {
public:
    SealedImage(const std::string& name, const std::string& dir)
        : file_("the live image of " + name, dir), name_("the live image of " + name) {}

    void put(uint64_t at, const std::byte* data, uint64_t n) override {
        if (data) file_.write(at, data, static_cast<size_t>(n));
        grow(at + n);
    }
    void hold(uint64_t, uint64_t) override {}
    void rewrite(uint64_t offset, std::span<const std::byte> data) override { put(offset, data.data(), data.size()); }
    void ahead(uint64_t offset, std::span<const std::byte> data) override { put(offset, data.data(), data.size()); }
    void skip(uint64_t at, uint64_t n) override { grow(at + n); }
    void finish(uint64_t size) override { grow(size); }
    void cancel_on(const std::atomic<bool>*) override {}

    uint64_t size() const override { return size_.load(); }
    const std::string& name() const override { return name_; }
    size_t read_at(uint64_t offset, std::span<std::byte> out) const override {
        const uint64_t size = size_.load();
        if (offset >= size) return 0;
        const auto n = static_cast<size_t>(std::min<uint64_t>(out.size(), size - offset));
        file_.read(offset, out.data(), n);
        return n;
    }
    int fd() const { return file_.fd(); }

private:
    // The re-digest reads (the pass's reader thread) while the writing
    // thread rewrites the digests in place: the size is shared.
    void grow(uint64_t end) {
        uint64_t size = size_.load();
        while (end > size && !size_.compare_exchange_weak(size, end)) {
        }
    }
    io::SealedTempFile file_;
    std::string name_;
    std::atomic<uint64_t> size_{0};
};

// The image, written and then read: a plain or a sealed temporary file.
class Image {
public:
    Image(const LiveTarget& target, bool sealed) {
        const std::string name = target.to.name();
        // Beside the output file; for a descriptor or an object, $TMPDIR.
        std::string dir;
        if (target.to.path) {
            dir = target.to.path->parent_path().string();
            if (dir.empty()) dir = ".";
        }
        if (sealed) {
            sealed_ = std::make_unique<SealedImage>(name, dir);
        } else {
            plain_ = io::unnamed_temp_file("the live image of " + name, dir);
            name_ = "the live image of " + name + " (in " + plain_.dir + ")";
        }
    }

    WriteResult write(const DumpSpec& spec, PageSource& source, const WriteOptions& options,
                      const writer::LiveRounds& rounds) {
        WriteResult r;
        if (sealed_) {
            r = writer::write_v1(-1, true, sealed_->name(), spec, source, options, {}, nullptr, &rounds,
                                 sealed_.get(), sealed_.get());
        } else {
            r = writer::write_v1(plain_.fd.get(), true, name_, spec, source, options, {}, nullptr, &rounds);
            bytes_ = std::make_unique<io::FdRandomAccess>(plain_.fd.get(), r.file_size, name_);
        }
        return r;
    }
    const io::RandomAccess& bytes() const { return sealed_ ? static_cast<const io::RandomAccess&>(*sealed_) : *bytes_; }
    // The blocks it takes on disk.
    uint64_t occupied() const {
        struct stat st {};
        return ::fstat(sealed_ ? sealed_->fd() : plain_.fd.get(), &st) == 0 ? static_cast<uint64_t>(st.st_blocks) * 512
                                                                           : 0;
    }
    DumpReader open() const {
        // Not owned: the reader goes before the image.
        struct Borrowed final : io::RandomAccess {
            explicit Borrowed(const io::RandomAccess& in) : in_(in) {}
            uint64_t size() const override { return in_.size(); }
            const std::string& name() const override { return in_.name(); }
            size_t read_at(uint64_t offset, std::span<std::byte> out) const override { return in_.read_at(offset, out); }
            const io::RandomAccess& in_;
        };
        return DumpReader::Impl::open_file(std::make_shared<reader::DumpFile>(std::make_unique<Borrowed>(bytes())));
    }

private:
    std::unique_ptr<SealedImage> sealed_;
    io::UnnamedTempFile plain_;
    std::string name_;
    std::unique_ptr<io::FdRandomAccess> bytes_;
};

// The room the final file asks for, with the image's blocks counted too:
// the dump occupies both until the image goes.
decltype(WriteOptions::room) with_image_room(const WriteOptions& wo, const Image& image) {
    if (!wo.room) return nullptr;
    return [room = wo.room, &image](uint64_t occupied, uint64_t needed, uint64_t wanted) -> uint64_t {
        const uint64_t held = image.occupied();
        const uint64_t granted = room(occupied + held, needed + held, wanted + held);
        return granted > held ? granted - held : 0;
    };
}

// The image's bytes as they are, into `sink` (an encrypted file, a stream,
// an object): a MiB at a time, zero ranges as zeros (holes where they may be).
void copy_bytes(const io::RandomAccess& image, io::Sink& sink, const WriteOptions& wo, const std::string& name) {
    constexpr size_t kStep = size_t{1} << 20;
    std::vector<std::byte> buf(kStep);
    const uint64_t size = image.size();
    for (uint64_t at = 0; at < size;) {
        if (wo.cancel && wo.cancel->load()) throw Error("cancelled", name, at);
        const auto want = static_cast<size_t>(std::min<uint64_t>(kStep, size - at));
        const auto part = std::span(buf).first(want);
        if (image.read_at(at, part) != want) throw Error("the live image ends early", image.name(), at);
        if (std::all_of(part.begin(), part.end(), [](std::byte b) { return b == std::byte{0}; }))
            sink.zeros(want);
        else
            sink.write(part);
        at += want;
        if (wo.on_progress) {
            WriteProgress p;
            p.bytes_done = at;
            p.bytes_total = size;
            p.pages_done = at / format::kPageSize;
            p.pages_total = size / format::kPageSize;
            wo.on_progress(p);
        }
    }
    sink.finish();
}

// A v1 final form: the image's bytes.
WriteResult copy_image(const LiveTarget& target, const io::RandomAccess& image, const WriteOptions& wo) {
    const std::string name = target.to.name();
    const std::vector<age::Recipient> recipients = age::parse_recipient_list(wo.recipients);
    WriteResult r;
    if (target.to.object) {
        if (!recipients.empty()) throw Error(io::kEncryptedNotStreamed, name);
        io::Sink sink(*target.to.object, name);
        sink.cancel_on(wo.cancel);
        copy_bytes(image, sink, wo, name);
        r.file_size = sink.file_size();
        return r;
    }
    if (!target.to.path) {
        io::Sink sink(target.to.fd, target.seekable, wo.sparse, name, recipients, wo.threads);
        sink.cancel_on(wo.cancel);
        copy_bytes(image, sink, wo, name);
        r.file_size = sink.file_size();
        return r;
    }
    try {
        AtomicFile file(*target.to.path);
        io::Sink sink(file.fd(), true, wo.sparse, name, recipients, wo.threads);
        sink.cancel_on(wo.cancel);
        sink.ask_room(wo.room, image.size());
        copy_bytes(image, sink, wo, name);
        r.file_size = sink.file_size();
        // An encrypted file cannot be read back without a private key.
        if (const auto& check = recipients.empty() ? wo.check_before_publish : nullptr)
            file.commit([&](const std::filesystem::path& p) { check(p, VerifyOptions{}); });
        else
            file.commit();
        return r;
    } catch (const Error& e) {
        throw e.with_object(name);
    }
}

}  // namespace

bool needs_image(const LiveTarget& target, const DumpOptions& options) {
    return !target.to.path || options.kdump || !options.write.recipients.empty();
}

WriteResult write_compact(const kdump::Destination& to, const DumpSpec& spec, PageSource& src, const WriteOptions& wo,
                          const kernel::PageSelection* selection, const DumpOptions& options) {
    KdumpOptions ko{options.compression, wo};
    ko.flattened = options.flattened;
    if (selection) return kdump::write_kdump_selection(to, spec, src, *selection, ko);
    return kdump::write_kdump_every_page(to, spec, src, ko);
}

void level_warnings(const kernel::PageSelection& sel, unsigned asked, const WriteOptions& wo,
                    std::vector<std::string>& warnings) {
    for (std::string& w : kernel::level_warnings(sel, asked)) {
        if (wo.on_warning) wo.on_warning(w);
        warnings.push_back(std::move(w));
    }
}

void inspect_dump(const DumpReader& reader, const DumpOptions& options) {
    if (!options.inspect_guest) return;
    const std::optional<kernel::Vmcoreinfo> info =
        reader.guest_width() == 8 ? dump_vmcoreinfo(reader, true) : std::nullopt;
    options.inspect_guest(guest_view(reader), info ? &*info : nullptr);
}

WriteResult write_through_image(const LiveTarget& target, const DumpSpec& spec, PageSource& source,
                                const DumpOptions& options, const writer::LiveRounds& rounds,
                                std::optional<kernel::PageSelection>& selection) {
    const WriteOptions& wo = options.write;
    Image image(target, !wo.recipients.empty());
    // The image is the v1 file the pre-copy writes; its own check before
    // publication has nothing to publish, the final form's comes later.
    WriteOptions image_wo = wo;
    image_wo.recipients.clear();
    image_wo.check_before_publish = nullptr;
    const WriteResult in_image = image.write(spec, source, image_wo, rounds);

    // The guest runs again: the final form, from the image.
    WriteOptions final_wo = wo;
    final_wo.room = with_image_room(wo, image);
    WriteResult r;
    {
        const DumpReader reader = image.open();
        inspect_dump(reader, options);
        if (options.kdump) {
            auto pages = reader.page_source();
            if (options.dump_level != 0) {
                const auto info = dump_vmcoreinfo(reader, true);
                selection = kernel::select_pages(dump_level_input(reader, info ? &*info : nullptr), options.dump_level);
            }
            r = write_compact(target.to, reader::spec_of(reader), *pages, final_wo, selection ? &*selection : nullptr,
                              options);
            if (selection) level_warnings(*selection, options.dump_level, wo, r.warnings);
        } else {
            r = copy_image(target, image.bytes(), final_wo);
            r.nr_pages = in_image.nr_pages;
            r.nr_runs = in_image.nr_runs;
            r.kernel_segment = in_image.kernel_segment;
        }
    }
    // What the pre-copy could not read is the image's: the final form holds its zeros.
    r.unreadable_pfns = in_image.unreadable_pfns;
    r.warnings.insert(r.warnings.begin(), in_image.warnings.begin(), in_image.warnings.end());
    return r;
}

}  // namespace xendump::dump
