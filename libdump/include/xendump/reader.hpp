// Reading dump files: v1 files (this project's format), compact (kdump)
// files, and Xen's own section-only ELF dump-core files (`xl dump-core`). Opened with libelf, an
// independent path from the writer so each checks the other.
//
// Memory (issue 19): a reader never holds the PFN->GMFN table (16 bytes a
// page) nor anything per page. open() streams the table once, in 1 MiB
// windows, to find the runs; pfn lookups search the runs, entry(i) reads
// the table through a 1 MiB block cache, gmfn lookups (PV) search the
// stretches of entries whose gmfns rise by one, and verify() streams the
// table and the pages. What a DumpReader holds, whatever the dump's size:
//   ~2.5 MiB (windows, cache, read buffers) + the note segment (kilobytes)
//   + ~100 bytes a run (PT_LOAD + PageRun)
//   + 32 bytes a gmfn stretch (PV, after the first gmfn lookup or verify)
//   + 8 bytes an unreadable page.
// The NT_XEN_DIGEST note (16 bytes a 256-page chunk: 16 MiB for 1 TiB of
// guest) stays on disk too: verify reads the stored digests 64 KiB at a
// time as it hashes the chunks, and keeps nothing per chunk.
// A compact (kdump) file adds 8 bytes per 32768 frames of its two bitmaps
// (which stay on disk: a count of set bits per 4 KiB block, 64 KiB a bitmap
// for 1 TiB of frames) and a 32 KiB block cache for each; its runs (an HVM
// or PVH guest's table is made from them) are as many as the stretches of
// pfns its dump level kept.
// A usual guest has few runs and stretches: a 1 TiB guest stays well under
// 128 MiB. Only entries() (a span) loads the whole table, on first use;
// page_source() reads it a window at a time (PageSource::read_entries).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "xendump/dump_spec.hpp"
#include "xendump/kdump.hpp"
#include "xendump/page_source.hpp"
#include "xendump/pages_read_back.hpp"

namespace xendump {

enum class FileFormat {
    v1,      // program headers + sections (this project)
    xen_elf, // sections only (xl dump-core, Xen >= 3.1)
    kdump    // compact: makedumpfile's compressed kdump file with the v1 notes
};

// A maximal run of consecutive pfns, stored contiguously.
struct PageRun {
    uint64_t first_pfn;
    uint64_t count;
    uint64_t file_offset;  // of the first page
    uint64_t first_index;  // table index of the first page
};

// The kernel image PT_LOAD of a v1 file (xen-dump-core(5)): the last program
// header, a PT_LOAD with a virtual address, over bytes of .xen_pages.
struct KernelImageMapping {
    uint64_t vaddr;
    uint64_t paddr;
    uint64_t size;
    uint64_t file_offset;
};

// One failed conformance check (xen-dump-core(5) "Conformance").
struct Finding {
    std::string check;      // short stable name, e.g. "phdr-run-mismatch"
    std::string structure;  // e.g. "program header [3]"
    uint64_t offset;        // file offset of that structure
    std::string message;    // the full sentence
};

struct VerifyOptions {
    // Recompute the digests (NT_XEN_DIGEST) and compare. False skips them:
    // only the structure is checked, and a file without digests passes.
    bool digests = true;
    // With `digests`, a file that has no digests (written with Digests=no or
    // --no-digests, or an xl dump-core file, whose format has none) is a
    // "digests-absent" finding unless this is set. Only a plain absence is
    // accepted: a trailer whose sections, notes or size do not fit the format
    // (a digest note or trailer section renamed or retyped, a trailer sized
    // for digests that holds none) is a finding either way.
    bool allow_no_digests = false;
    // Pages read for the digests leave the page cache behind the reading, as
    // the writer's pages do: for a file read once, just after it was written
    // (the converter's check of its output), so that neither evicts the
    // host's own files.
    bool drop_behind = false;
    // Page chunks already read back from this very file (the writer's
    // read-behind, see pages_read_back.hpp), taken when .xen_pages' offset
    // and size and the chunk size match this file's: the stored digests of
    // those chunks are folded as the read-back folded its own; equal, the
    // chunks are not read again; different, they are all read and compared
    // as without a read-back (a bad chunk is named all the same).
    const PagesReadBack* pages_read_back = nullptr;
    std::function<void(uint64_t done, uint64_t total)> on_progress;
};

// What a verify did with the digests.
enum class DigestCheck {
    compared,     // the file's digests were recomputed (findings list mismatches)
    skipped,      // VerifyOptions::digests was false
    absent,       // the file has none (a finding unless allow_no_digests)
};

// How a compact (kdump) file was written: the page compression its
// header's status names (none when it names none) and the dump level its
// sub header records (makedumpfile's -d; nullopt when it holds no level
// from 0 to 31).
struct CompactFormat {
    Compression compression = Compression::none;
    std::optional<unsigned> dump_level;
};

struct VerifyReport {
    std::vector<Finding> findings;  // empty when the file passes
    DigestCheck digests = DigestCheck::skipped;
};

// How a dump is opened: the private keys of an age-encrypted one
// (xen-dump-core(5) "Encrypted dumps"). A plain file needs none.
struct OpenOptions {
    // Identity files as `age -i` reads them: AGE-SECRET-KEY-1... lines or one
    // unencrypted OpenSSH ed25519 private key; the first that matches is used.
    // Read only when the dump is encrypted.
    std::vector<std::filesystem::path> identity_files;
    // Accept an identity file that group or others may read (else refused).
    bool allow_insecure_identity = false;
};

// What an age-encrypted file says without a key: its header.
struct EncryptionInfo {
    std::vector<std::string> recipient_types;  // each stanza's type, in order ("X25519", "ssh-ed25519", ...)
    uint64_t file_size = 0;                    // of the encrypted file
    uint64_t header_size = 0;                  // bytes of the age header
    uint64_t chunks = 0;                       // 64 KiB chunks the file's size makes
    uint64_t chunks_decrypted = 0;             // so far by the reader (DumpReader::encryption())
};

// The age header of `path` when the file is encrypted (its first line is
// "age-encryption.org/v1"), parsed and checked to be well-formed; nullopt for
// a file that is not. Throws Error, naming the file and offset, for a header
// that does not parse (no key is needed: the header's MAC is not checked).
std::optional<EncryptionInfo> encryption_of(const std::filesystem::path& path);

// A dump read from S3-compatible object storage (DumpReader::open of
// s3://BUCKET/KEY, issue 34 item 4): what its reads have cost so far. The
// object is read in aligned blocks of block_size bytes, each by one ranged
// GET, a few kept in memory.
struct StoreInfo {
    std::string object;        // s3://BUCKET/KEY
    uint64_t object_size = 0;  // of the stored object (encrypted: of the age file)
    uint64_t block_size = 0;
    uint64_t requests = 0;       // ranged GETs so far
    uint64_t bytes_fetched = 0;  // object bytes they brought
};

// A flattened file (makedumpfile -F's format, xen-dump-core(5) "The
// flattened stream"), which DumpReader reads as the file it carries: what
// it is made of.
struct FlattenedInfo {
    uint64_t stored_size = 0;  // of the flattened file (of its plaintext when encrypted)
    uint64_t records = 0;      // records before the end record
    uint64_t stretches = 0;    // what the reader maps them to (records that follow on make one)
};

class DumpReader {
public:
    // Throws Error naming the file and offset when the file cannot be opened
    // as a dump at all (not ELF, truncated headers, ...). An encrypted file
    // needs `options.identity_files` (an Error says it is encrypted, else
    // "no identity matches"); it is then read with random access, 64 KiB at
    // a time, and every chunk read is authenticated (an Error names a chunk
    // that is not, and its offset). A flattened file (makedumpfile -F), plain
    // or encrypted, is read as the file it carries (flattened()): one pass
    // over its record heads at open, then reads in place; an Error names the
    // file and the offset of a header or record that is wrong.
    static DumpReader open(const std::filesystem::path& path);
    static DumpReader open(const std::filesystem::path& path, const OpenOptions& options);
    DumpReader(DumpReader&&) noexcept;
    DumpReader& operator=(DumpReader&&) noexcept;
    ~DumpReader();

    const std::filesystem::path& path() const;
    FileFormat format() const;
    uint64_t file_size() const;  // an encrypted file: of its plaintext; a flattened one: of the file it carries
    // An encrypted file's header, and the chunks decrypted so far; nullopt for a plain file.
    std::optional<EncryptionInfo> encryption() const;
    // A flattened file's records; nullopt for a file that is not flattened.
    std::optional<FlattenedInfo> flattened() const;
    // A dump read from the store (s3://BUCKET/KEY): the bytes fetched so far; nullopt for a file.
    std::optional<StoreInfo> store() const;
    format::GuestType type() const;    // from magic + NT_XEN_DOMAIN TYPE= when present
    unsigned guest_width() const;      // 4 (EM_386) or 8
    uint64_t nr_pages() const;
    uint64_t page_size() const;
    const format::HeaderDesc& header() const;
    const format::XenVersionDesc& xen_version() const;
    const KeyValues& domain() const;   // empty for xen_elf files
    // The whole table, loaded into memory on first use (16 bytes a page):
    // prefer nr_pages(), entry() and the lookups, which do not.
    std::span<const PageEntry> entries() const;  // ascending pfn; gmfn == pfn for HVM/PVH
    // Entry `index` (< nr_pages()), read from the file through a bounded cache.
    PageEntry entry(uint64_t index) const;
    const std::vector<PageRun>& runs() const;
    std::vector<VcpuContext> vcpus() const;
    std::optional<std::vector<std::byte>> shared_info() const;
    std::optional<std::string> vmcoreinfo() const;
    std::vector<uint64_t> unreadable_pfns() const;
    std::optional<KernelImageMapping> kernel_image_mapping() const;  // v1 files that have one
    bool has_digests() const;
    uint64_t pages_offset() const;    // file offset of .xen_pages (0 for kdump files)
    std::optional<CompactFormat> compact_format() const;  // kdump files only
    // A compact (kdump) file's zero pages: those of nr_pages() (its second
    // bitmap) stored as its one shared zero page, which take no page data
    // (xen-dump-core(5)); counted over the descriptors on each call. nullopt
    // for v1 and xen_elf files, which store every page in its own place.
    std::optional<uint64_t> zero_pages() const;

    // Page lookups: O(log runs) / O(log pages). Return false for a page not in
    // the dump (a hole is "not found", never zeros).
    bool read_page_by_pfn(uint64_t pfn, std::span<std::byte> out) const;
    bool read_page_by_gmfn(uint64_t gmfn, std::span<std::byte> out) const;
    std::optional<uint64_t> index_of_pfn(uint64_t pfn) const;
    std::optional<uint64_t> index_of_gmfn(uint64_t gmfn) const;
    uint64_t page_offset(uint64_t index) const;
    // Pages [first, first + count) of .xen_pages (table order) into `out`,
    // with one read: count * 4096 bytes.
    void read_pages(uint64_t first, uint64_t count, std::span<std::byte> out) const;

    // Every conformance check of xen-dump-core(5) "Conformance"; empty when the file conforms.
    std::vector<Finding> verify(const VerifyOptions& options = {}) const;
    // Opens `path` and verifies it; a file that cannot even be opened as a
    // dump yields the one Finding that stopped open() instead of an Error.
    // (I/O errors such as a missing file still throw Error.)
    static std::vector<Finding> verify_file(const std::filesystem::path& path,
                                            const VerifyOptions& options = {});
    // The same, also saying what was done with the digests (a file that
    // cannot be opened: DigestCheck::skipped).
    static VerifyReport verify_file_report(const std::filesystem::path& path, const VerifyOptions& options = {});
    static VerifyReport verify_file_report(const std::filesystem::path& path, const VerifyOptions& options,
                                           const OpenOptions& open);
    VerifyReport verify_report(const VerifyOptions& options = {}) const;

    // A PageSource over this file's pages (for the converter and tests). It
    // reads the table a window at a time (its entries() alone loads it
    // whole) and refers to this reader, which must outlive it.
    std::unique_ptr<PageSource> page_source() const;

    struct Impl;

private:
    explicit DumpReader(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace xendump
