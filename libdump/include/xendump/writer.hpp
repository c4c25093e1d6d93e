// The v1 writer. Layout (xen-dump-core(5) "Layout"): ELF header, program headers, note segment,
// pages, PFN->GMFN table note, .xen_pfn (HVM/PVH), trailer, .shstrtab, section
// headers. Writes to a seekable file or streams to a pipe: same bytes.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <span>
#include <vector>

#include "xendump/dump_spec.hpp"
#include "xendump/page_source.hpp"
#include "xendump/pages_read_back.hpp"

namespace xendump {

struct WriteProgress {
    uint64_t pages_done = 0;
    uint64_t pages_total = 0;
    uint64_t bytes_done = 0;
    uint64_t bytes_total = 0;
};

// The guest kernel's image mapping, as kdump's /proc/vmcore describes it: a
// PT_LOAD whose p_vaddr is the image's virtual address, over the same file
// bytes as the RAM segment holding its physical pages (readers that translate
// kernel addresses without page tables, drgn among them, need it).
struct KernelImageSegment {
    uint64_t vaddr = 0;     // page-aligned, in the kernel image region
    uint64_t paddr = 0;     // page-aligned guest physical address of vaddr
    uint64_t max_size = 0;  // at most this many bytes; cut at the first absent page
};

// What the page pass found about the guest kernel, written into the room
// DumpSpec::reserve_vmcoreinfo kept (xen-dump-core(5) "Notes" note 7, xen-dump-core(5) "NT_XEN_DOMAIN keys" keys, xen-dump-core(5) "Program headers" the
// kernel image program header).
struct LateNotes {
    std::optional<std::string> vmcoreinfo;  // the VMCOREINFO text (at most kMaxVmcoreinfoText bytes)
    KeyValues domain;                       // keys added to NT_XEN_DOMAIN (KERNEL=, KERNELOFFSET=)
    std::optional<KernelImageSegment> kernel_image;  // written into the reserved program header
};

struct WriteOptions {
    bool digests = true;  // NT_XEN_DIGEST trailer
    bool sparse = true;   // all-zero pages become holes when the output is seekable
    std::function<void(const WriteProgress&)> on_progress;  // called per batch
    const std::atomic<bool>* cancel = nullptr;              // set -> Error("cancelled")
    // Sees every page once, in pfn order, during the single pass (guest-kernel scanners).
    std::function<void(uint64_t pfn, std::span<const std::byte> page)> page_observer;
    // Called once after the page pass when the spec reserved room and the
    // output is seekable (a pipe cannot be patched: the room stays padding).
    std::function<LateNotes()> after_pages;
    // write_dump_file only: reads the finished, unpublished file (through the
    // path it is given) while fsync makes it durable; if it throws, the file
    // is never published (AtomicFile::commit). The converter verifies here.
    // With digests, the pages the write-behind dropped were read back from
    // the file first (pages_read_back.hpp), so the check need not read them.
    std::function<void(const std::filesystem::path& unpublished, const PagesReadBack& read_back)>
        check_before_publish;
};

struct WriteResult {
    uint64_t file_size = 0;
    uint64_t nr_pages = 0;
    uint64_t nr_runs = 0;
    std::vector<uint64_t> unreadable_pfns;
    bool late_vmcoreinfo = false;  // a VMCOREINFO note was patched into the reserved room
    bool late_domain_keys = false; // NT_XEN_DOMAIN got the after_pages keys
    bool kernel_segment = false;   // the kernel image PT_LOAD was added
};

// Offsets of every part of the file, computed before anything is written.
struct Layout {
    uint64_t phnum = 0;            // real count (PT_NOTE + runs)
    uint64_t notes_offset = 0, notes_size = 0;
    uint64_t pages_offset = 0, pages_size = 0;
    uint64_t p2m_note_offset = 0, p2m_desc_offset = 0, p2m_desc_size = 0;
    uint64_t pfn_offset = 0, pfn_size = 0;  // HVM/PVH
    uint64_t trailer_offset = 0;            // trailer size depends on unreadable pages
};
uint64_t expected_file_size(const DumpSpec& spec, std::span<const PageEntry> entries,
                            bool digests = true);

// Streams the file to `fd` (a pipe is fine: no seeks). When `seekable`, zero
// pages may become holes. Returns what was written.
WriteResult write_dump(int fd, bool seekable, const DumpSpec& spec, PageSource& pages,
                       const WriteOptions& options = {});

// Writes `path` atomically: a temporary in the same directory, fsync, then
// published under `path` (never replacing an existing file: Error if it
// exists). On any error or kill nothing appears under `path`.
WriteResult write_dump_file(const std::filesystem::path& path, const DumpSpec& spec,
                            PageSource& pages, const WriteOptions& options = {});

}  // namespace xendump
