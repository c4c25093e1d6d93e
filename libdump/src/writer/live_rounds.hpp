// A live dump's rounds in the v1 writer (issue 35; ARCHITECTURE.md "Live
// dumps"): the pass copies every page of the running guest; then, before
// the trailer, the dumper's pre-copy rounds write the pages the guest
// dirtied again, each in its fixed slot of .xen_pages (a v1 page's place
// depends on its pfn alone), and the final, paused round gives the vcpu
// state the head is written again with. The digests of every chunk are
// re-done from the file (NT_XEN_DIGEST is written after), so the file's
// digests are those of its final bytes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <vector>

#include "xendump/dump_spec.hpp"
#include "xendump/keyvalues.hpp"
#include "xendump/page_source.hpp"
#include "xendump/writer.hpp"

namespace xendump::writer {

// Writes source entry `index`'s page again in its slot.
class SlotRewriter {
public:
    virtual ~SlotRewriter() = default;
    virtual void rewrite(uint64_t index, std::span<const std::byte> page) = 0;
};

// What the final round read from the paused guest.
struct LiveFinal {
    std::vector<VcpuContext> vcpus;        // replaces the spec's (same vcpus, same sizes)
    std::vector<std::byte> shared_info;    // PV: replaces the spec's; empty: unchanged
    KeyValues domain_keys;                 // added to NT_XEN_DOMAIN (kLiveKeysRoom bytes at most)
    // The pages the paused round could not read (their slots hold zeros):
    // the whole list, as the pass's own failures are read again there.
    std::vector<uint64_t> unreadable_pfns;
};

// The rounds, given the pages the pass could not read (sorted pfns): a page
// a running guest's hypervisor would not map is tried again under the pause.
using LiveRounds = std::function<LiveFinal(SlotRewriter&, std::span<const uint64_t> unreadable_in_pass)>;

// write_dump_file with the rounds run after the pass, before the trailer.
// No read-back behind the write (the pages change after it): the re-digest
// after the final round reads .xen_pages back instead, and a
// check_before_publish is given that read-back (VerifyOptions::
// pages_read_back), so it reads the pages no second time. Plaintext only
// (Error with recipients).
WriteResult write_dump_file_live(const std::filesystem::path& path, const DumpSpec& spec, PageSource& pages,
                                 const WriteOptions& options, const LiveRounds& rounds);

}  // namespace xendump::writer
