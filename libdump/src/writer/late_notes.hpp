// Filling the room the plan kept (plan_dump's kernel_room) in the note segment
// once the page pass has found the guest kernel's VMCOREINFO.
//
// Why a reservation: the note segment (xen-dump-core(5) "Notes", xen-dump-core(5) "Layout") is written before the
// first page, yet the VMCOREINFO text (note 7) is found in guest memory
// during the single pass over the pages, and the KERNEL= / KERNELOFFSET=
// keys derived from it belong in NT_XEN_DOMAIN (note 6, xen-dump-core(5) "NT_XEN_DOMAIN keys": "writers may
// add keys"). A second pass would double the dump's cost, so the plan keeps:
//  - NT_XEN_DOMAIN's text followed by kKernelKeysRoom extra NULs (readers
//    take the text up to its NULs, KeyValues::parse drops trailing NULs);
//    the keys are appended to the text inside the same descriptor, so the
//    keys stay in the note the spec names for them and no reader needs to
//    learn a new note;
//  - at note 7's place one "XEN CORE" kNtXenPadding note (readers skip
//    unknown notes, xen-dump-core(5) "Notes") as large as a VMCOREINFO note of
//    kMaxVmcoreinfoText bytes plus one note header. It becomes the
//    VMCOREINFO note followed by a padding note covering the rest.
// Every size stays as planned: the file's layout, e_shoff, the section
// headers and expected_file_size() do not depend on what was found. Only a
// seekable output can be patched (pwrite of the note segment); a pipe keeps
// the padding, so a streamed dump carries VMCOREINFO only when the caller
// knew it up front (DumpSpec::vmcoreinfo). NT_XEN_DIGEST's note-segment
// digest is computed over the final bytes (the trailer follows the pages).
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "pipeline/found_notes.hpp"
#include "writer/plan.hpp"

namespace xendump::writer {

struct PatchedNotes {
    std::vector<std::byte> bytes;  // the whole note segment, same size as planned
    bool vmcoreinfo = false;       // the VMCOREINFO note was written
    bool domain_keys = false;      // NT_XEN_DOMAIN got the keys
};

// The note segment with `late` written into the reserved room; nullopt when
// nothing changes (no room, nothing found, or nothing that fits).
std::optional<PatchedNotes> patch_notes(const DumpPlan& plan, const pipeline::FoundNotes& late);

}  // namespace xendump::writer
