// A consistent live dump whose final form cannot take pages rewritten in
// place (issue 35 item 5, issue 33's "-r with a consistent --live"): a
// compact file (its pages are compressed and packed, flattened or not), an
// encrypted file (age's chunks are sealed once), a pipe or standard output,
// an object of the store (Mode=stream). The pre-copy (dump/precopy.hpp)
// writes its v1 image, rounds and all, into an unnamed temporary file; once
// the final round is done and the guest runs again, the asked form is made
// from that image by the writers that exist: the compact writer reading it
// as the converter reads a v1 file (its dump level decided on the image: the
// guest at the paused instant), or its bytes as they are into an encrypted
// file, a stream or an object. The pause is the v1 file's: the final round
// writes into the image, and the conversion comes after the unpause (with
// Precopy::leave_paused the guest stays paused through it, as it would
// after a v1 file; LiveStats::pause_usec counts to the end of the image's
// final round either way).
//
// The temporary image (the rule: no plaintext on a disk when the output is
// encrypted, temporary files included):
//  - a plaintext output: a plain unnamed file (io/temp_file.hpp), sparse,
//    written as the v1 file would be (same page cache, write-behind, holes:
//    the pause is the v1 file's to the microsecond);
//  - an encrypted output: a SealedTempFile (io/sealed_temp_file.hpp) under a
//    key of this run's, which dies with the process's memory; its blocks
//    never written (zero pages) take no room. Sealing a page costs a few
//    microseconds, in the pause too, for the pages of the final round.
// It lies in the output file's directory (the room the dump will take is
// there already), or for a descriptor or an object in $TMPDIR, else
// /var/tmp; it goes with its descriptor, on every path, a crash included.
// Disk: the image (the guest's nonzero pages and the v1 metadata; sealed:
// 0.9 % more) and the final form side by side until the end; the room
// WriteOptions::room grants the final file counts the image's blocks too.
// Memory: a 1 MiB buffer for a copy, and the writers' own bounds.
#pragma once

#include <optional>

#include "kdump/write_kdump.hpp"
#include "writer/live_rounds.hpp"
#include "xendump/dumper.hpp"
#include "xendump/kernel/dump_level.hpp"

namespace xendump::dump {

// Where a consistent live dump's final form goes: a file (published
// atomically: nothing under its name on any error), a descriptor
// (`seekable`: positional writes from offset 0; a compact file is written
// to any descriptor as its flattened stream), or an object.
struct LiveTarget {
    kdump::Destination to;
    bool seekable = false;
};

// Whether a consistent live dump to `target` goes through an image: all but
// a plaintext v1 file.
bool needs_image(const LiveTarget& target, const DumpOptions& options);

// The pre-copy's v1 image written with `rounds` (writer::write_v1), then
// `target` made from it. `selection`: set to what options.dump_level kept
// (decided on the image). The result is the final form's; its unreadable
// pages are the image's (the final round's).
WriteResult write_through_image(const LiveTarget& target, const DumpSpec& spec, PageSource& source,
                                const DumpOptions& options, const writer::LiveRounds& rounds,
                                std::optional<kernel::PageSelection>& selection);

// A compact dump of the pages `selection` keeps (null: every page) to `to`.
WriteResult write_compact(const kdump::Destination& to, const DumpSpec& spec, PageSource& src, const WriteOptions& wo,
                          const kernel::PageSelection* selection, const DumpOptions& options);

// The warnings of a selection below the level asked (what the guest cannot
// support), to on_warning and `warnings`.
void level_warnings(const kernel::PageSelection& sel, unsigned asked, const WriteOptions& wo,
                    std::vector<std::string>& warnings);

// DumpOptions::inspect_guest of a consistent live dump: the guest as the
// file (or image) holds it, the paused instant, since the guest runs again.
void inspect_dump(const DumpReader& reader, const DumpOptions& options);

}  // namespace xendump::dump
