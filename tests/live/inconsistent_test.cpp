// A live dump without pre-copy (--live=inconsistent) reads pages the guest
// keeps writing while they are mapped. Its image is torn (precopy_test's
// InconsistentDumpIsTorn), but the file must still verify: every stage that
// reads a page (the zero check, the digest, compression, sealing, the
// write) must see the same bytes of it, or a chunk's digest is not that of
// the bytes in the file and xen-dumpctl verify reports a healthy dump as
// corrupt. v1 and compact, plaintext and encrypted.
#include <cstring>
#include <mutex>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "../age-write/age_write_helpers.hpp"
#include "hv/forwarding_hypervisor.hpp"
#include "live_support.hpp"
#include "xendump/dumper.hpp"
#include "xendump/reader.hpp"

namespace xendump::test::live {
namespace {

using test::sim::Host;
using namespace xendump::test::agewrite;

constexpr uint64_t kPages = 4096;  // 16 MiB: 4 batches of the pass
constexpr size_t kPage = 4096;

// A hypervisor whose mappings' bytes change after they are handed out, as a
// running guest's pages do under a real foreign mapping (the simulator's
// writer writes between mapping calls only, under the host's lock, so a
// mapping it gave never changes). Each mapping holds its own copy of the
// pages; change() alters a byte of every page of every mapping still held.
class ChangingMappings final : public ForwardingHypervisor {
public:
    using ForwardingHypervisor::ForwardingHypervisor;

    std::unique_ptr<ForeignMapping> map_foreign(uint32_t domid, std::span<const uint64_t> frames) override {
        const std::unique_ptr<ForeignMapping> inner = ForwardingHypervisor::map_foreign(domid, frames);
        return std::make_unique<Mapping>(*this, *inner);
    }

    // What the guest does between two reads of a page by the dump.
    void change() {
        const std::lock_guard lock(mutex_);
        ++changes;
        for (Mapping* m : held_) m->change();
    }
    uint64_t changes = 0;  // calls of change()

private:
    class Mapping final : public ForeignMapping {
    public:
        Mapping(ChangingMappings& owner, const ForeignMapping& inner)
            : owner_(owner), bytes_(inner.count() * kPage), errors_(inner.count()) {
            for (size_t i = 0; i < errors_.size(); ++i)
                if (!(errors_[i] = inner.error(i))) std::memcpy(bytes_.data() + i * kPage, inner.page(i), kPage);
            const std::lock_guard lock(owner_.mutex_);
            owner_.held_.insert(this);
        }
        ~Mapping() override {
            const std::lock_guard lock(owner_.mutex_);
            owner_.held_.erase(this);
        }
        size_t count() const override { return errors_.size(); }
        const std::byte* page(size_t i) const override { return bytes_.data() + i * kPage; }
        int error(size_t i) const override { return errors_[i]; }
        // Under the owner's lock. The dump may be reading the page meanwhile,
        // as it reads a running guest's.
        void change() {
            for (size_t i = 0; i < errors_.size(); ++i)
                if (!errors_[i]) bytes_[i * kPage + 100] ^= std::byte{0x5a};
        }

    private:
        ChangingMappings& owner_;
        std::vector<std::byte> bytes_;
        std::vector<int> errors_;
    };

    std::mutex mutex_;
    std::set<Mapping*> held_;
};

struct Form {
    const char* name;
    bool kdump;
    Compression compression;
    bool encrypted;
};

// Onto a pipe, drained here: each time another 256 KiB are read the
// mappings the dump still holds change. The pass writes a batch (4 MiB)
// with one writev (v1), its digests made before, into a 64 KiB pipe; a
// compact file's pages are hashed, then gathered into records of 4 MiB
// (the flattened stream), which the guest's 8 zero pages (no data) make
// end inside a batch. Either way the change comes while a batch whose
// digests are made is being written: the file would hold bytes no digest
// saw. (Compressed, the bytes written are the compressor's: there the
// change must come between compression and hashing, which two threads
// make likely, not certain.)
TEST(InconsistentLive, DigestsAreThoseOfTheFile) {
    const Form forms[] = {
        {"v1", false, Compression::none, false},
        {"v1 encrypted", false, Compression::none, true},
        {"compact, not compressed", true, Compression::none, false},
        {"compact, zstd", true, Compression::zstd, false},
        {"compact encrypted", true, Compression::none, true},
    };
    uint32_t domid = 60;
    for (const Form& form : forms) {
        for (unsigned threads : {1u, 2u}) {
            SCOPED_TRACE(std::string(form.name) + ", " + std::to_string(threads) + " threads");
            json d = guest(domid, "hvm", kPages, 250, "random");
            d["zero_ranges"] = json::array({json::array({1, 8})});  // below the writer's pages
            Host host(host_spec({d}));
            const AgeKey key = age_keygen(host.tmp.path());
            ChangingMappings hv(*host.hv);
            DumpOptions o;
            o.live = true;
            o.write.threads = threads;
            o.kdump = form.kdump;
            o.compression = form.compression;
            if (form.encrypted) o.write.recipients = {key.recipient};
            const auto file = host.tmp / "streamed";
            {
                PipeToFile pipe(file, [&] { hv.change(); });
                dump_domain_to_fd(hv, domid, pipe.fd(), false, o);
                pipe.close();
            }
            EXPECT_GT(hv.changes, 0u);
            OpenOptions open;
            open.identity_files = {key.identity};
            const DumpReader reader = DumpReader::open(file, open);
            EXPECT_EQ(reader.format(), form.kdump ? FileFormat::kdump : FileFormat::v1);
            EXPECT_EQ(reader.domain().get(keys::kLive).value_or(""), "inconsistent");
            for (const auto& f : reader.verify()) ADD_FAILURE() << f.check << ": " << f.message;
            ++domid;
        }
    }
}

}  // namespace
}  // namespace xendump::test::live
