// The v1 writer: a page source in, a xen-dump-core v1 file out
// (xen-dump-core(5)), in one pass over the pages. Writes to a seekable file
// or streams to a pipe: same bytes.
//
// Memory (issue 19): the writer takes the source's entries a window at a
// time (PageSource::nr_entries(), read_entries(), index_of_pfn(); never
// entries()), writes the PFN->GMFN table and .xen_pfn in windows and digests
// the table as it goes, so what it holds does not grow with the pages:
// batches of at most 4 MiB whose pages in flight stay within 32 MiB whatever
// the threads (more threads, smaller batches), 64Ki-entry windows (1 MiB),
// the page digests (16 bytes per 256 pages) 4096 at a time (64 KiB): a
// seekable output gets each window in its place in the trailer at once, a
// pipe's wait in an unnamed temporary file ($TMPDIR, else /var/tmp) until
// the trailer is written; plus what grows with the guest's shape, not its
// size: 56 bytes per run of consecutive pfns (the program headers) and 8
// bytes per page that could not be read. The dumper's page source adds 32
// bytes per extent (xendump/dumper.hpp). A usual guest of any size stays
// under 128 MiB.
// write_kdump_file() (xendump/kdump.hpp) takes the same windows: its
// bitmaps are written a 1 MiB chunk at a time, its descriptors a batch at a
// time, its note area's table a window at a time, its digests a window at a
// time through a temporary file (the note area's offset is known only after
// the pages); what grows is the same (the unreadable pages). A PV guest
// whose machine frames do not rise with its pfns has the bitmap of its
// stored frames (1 bit per machine frame up to its highest, to place each
// descriptor) made in a temporary file, with only 8 bytes per 32768 frames
// in memory (2 MiB at most). The check before publication
// (check_before_publish) takes what was read back behind the writer as one
// digest of its chunks' digests, nothing per page. A compact
// file of a dump level (xen-dump-convert --dump-level, xen-dumpd
// --dump-level) holds bitmaps of pfns up to the highest instead of lists
// (present, protected, kept by the rules, kept in the file), each at most
// 256 KiB in memory and the rest in a temporary file (kernel::PfnBitmap:
// 32 KiB of bookkeeping per TiB of guest), and, for a PV guest, its frames
// back to pfns (24 bytes per stretch of frames rising with their pfns,
// xendump/kernel/dump_level.hpp).
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
#include "xendump/s3.hpp"

namespace xendump {

struct WriteProgress {
    uint64_t pages_done = 0;
    uint64_t pages_total = 0;
    uint64_t bytes_done = 0;
    uint64_t bytes_total = 0;
    // A dump before its page pass, finding the guest's present pages (p2m
    // discovery: a PV guest's p2m read, an HVM/PVH guest's page types
    // asked): pages_done pfns examined of pages_total (the p2m size), no
    // bytes yet. Reported from the first pfn on, then after every window of
    // pfns (256Ki), until all are examined; then the pass's own reports.
    bool finding_pages = false;
    // A live dump after its pass (pre-copy): round live_round re-copies the
    // dirty_pages the guest dirtied since the round before; live_final: the
    // guest is paused for the last round, which copies dirty_pages more (and
    // then those dirtied in the meantime). Reported once a round.
    unsigned live_round = 0;
    uint64_t dirty_pages = 0;
    bool live_final = false;
};

struct VerifyOptions;  // reader.hpp

// The most threads one write uses (WriteOptions::threads). The pages in
// flight stay within a fixed budget whatever the number (more threads work
// on more, smaller batches), so memory does not grow with the threads;
// beyond 64 the one reading thread and the one writing in order would not
// keep more busy.
inline constexpr unsigned kMaxWriteThreads = 64;

// The steps in which a file asks for room on disk (WriteOptions::room): it
// is granted at least its next step (or what remains of its planned size,
// when less) before that much more may be written.
inline constexpr uint64_t kRoomStep = uint64_t{8} << 20;

// How a dump is written, and what its caller watches: one struct, passed
// unchanged from the service's jobs and the converter through the dumper to
// the page pass.
struct WriteOptions {
    bool digests = true;  // NT_XEN_DIGEST trailer
    bool sparse = true;   // all-zero pages become holes when the output is seekable
    // Look for the guest kernel in the pages during the single pass: write
    // NT_PRSTATUS for every vcpu (64-bit guests), and keep room for the
    // VMCOREINFO note, the KERNEL=/KERNELOFFSET= keys and the kernel image
    // segment, filled on a seekable output (a pipe keeps the room as padding).
    bool guest_kernel = false;
    // Threads that classify zero pages, hash digests and compress, batch by
    // batch, 1 to kMaxWriteThreads (0 counts as 1, more as the maximum); the
    // file's bytes and the pass's memory are the same for any number (1: the
    // pass reads on one thread and hashes and writes on the caller's).
    unsigned threads = 1;
    std::function<void(const WriteProgress&)> on_progress;  // called per batch
    std::function<void(const std::string&)> on_warning;     // guest oddities, unreadable pages
    const std::atomic<bool>* cancel = nullptr;              // set -> Error("cancelled")
    // write_dump_file only: reads the finished, unpublished file (through the
    // path it is given) while fsync makes it durable; if it throws, the file
    // is never published (AtomicFile::commit). `verify` carries what the
    // writer read back from the file as the write-behind dropped it (a
    // consistent live dump's: every chunk, read after its final round to
    // digest it): pass it (with your own settings) to DumpReader::verify,
    // which then need not read those pages again.
    std::function<void(const std::filesystem::path& unpublished, const VerifyOptions& verify)> check_before_publish;
    // The room the file may take on disk, for a storage policy (xen-dumpd's
    // MaxUse= and KeepFree=) that counts what a dump occupies, not its
    // guest's size: zero pages are holes and take none. Asked before the
    // first byte and whenever the bytes about to be written could take the
    // file past what was granted, with `occupied` the bytes its allocated
    // blocks take now (st_blocks), `needed` the least it must be granted to go
    // on (occupied plus the next kRoomStep, less near the planned end) and
    // `wanted` the most it could come to (occupied plus the planned bytes not
    // written yet; what the pass will find zero is not known before). Returns
    // the bytes it may occupy: `needed` or more to go on, less to stop the
    // write with an Error (nothing is published). Regular files only; unset:
    // no limit.
    std::function<uint64_t(uint64_t occupied, uint64_t needed, uint64_t wanted)> room;
    // Encrypt the file to these recipients (xendump/recipients.hpp; empty:
    // plaintext): the file is an age v1 file whose plaintext is exactly the
    // file written without them (xen-dump-core(5), "Encrypted dumps"); no
    // byte of the plaintext reaches a disk, temporary files included. Every
    // writer, v1 and compact, takes them; `sparse` has no effect (an age file
    // has no holes), `room` counts the encrypted file, and check_before_publish
    // is not called (the writer holds no private key to read the file back).
    std::vector<std::string> recipients;
};

struct WriteResult {
    uint64_t file_size = 0;  // the file's bytes (encrypted: the age file's)
    uint64_t nr_pages = 0;
    uint64_t nr_runs = 0;
    std::vector<uint64_t> unreadable_pfns;
    std::vector<std::string> warnings;  // also given to WriteOptions::on_warning
    bool kernel_segment = false;        // the guest kernel's image PT_LOAD (p_vaddr) was added
};

// The size of the file write_dump would write (without guest_kernel).
uint64_t expected_file_size(const DumpSpec& spec, std::span<const PageEntry> entries,
                            bool digests = true);

// Streams the file to `fd` (a pipe is fine: no seeks). When `seekable`, zero
// pages may become holes. Returns what was written.
WriteResult write_dump(int fd, bool seekable, const DumpSpec& spec, PageSource& pages,
                       const WriteOptions& options = {});

// Streams the file into the object `url` through a multipart upload
// (xendump/s3.hpp, UploadOptions): the same bytes as write_dump_file. The
// object appears only complete (the upload is completed last); on any
// error or cancel the upload is aborted. Not with options.recipients yet.
WriteResult write_dump_object(s3::Client& client, const s3::Url& url, const DumpSpec& spec, PageSource& pages,
                              const WriteOptions& options = {}, const s3::UploadOptions& upload = {});

// Writes `path` atomically: a temporary in the same directory, fsync, then
// published under `path` (never replacing an existing file: Error if it
// exists). On any error or kill nothing appears under `path`.
WriteResult write_dump_file(const std::filesystem::path& path, const DumpSpec& spec,
                            PageSource& pages, const WriteOptions& options = {});

}  // namespace xendump
