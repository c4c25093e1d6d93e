// xen-dumpctl dump [MATCH...] -o FILE: the pages of a dump as a plain ELF
// vmcore, for tools that want one (as `coredumpctl dump -o` writes a core):
// ET_CORE, one PT_NOTE (an NT_PRSTATUS per vcpu of a 64-bit guest, the
// guest kernel's VMCOREINFO when the dump has it), one PT_LOAD per run of
// pfns (p_paddr = pfn * 4096, p_vaddr 0, p_align 0: crash takes a p_align 0
// file for a kdump vmcore, as it does our v1 files), and the kernel image
// PT_LOAD (p_vaddr = the image's virtual address) when the dump has one.
// None of the Xen notes, no digests: what is not in the pages stays in the
// dump. For a PV guest, whose page tables hold machine frames, the vmcore
// holds the pages but crash cannot walk them (a warning says so; crash reads
// the dump itself). A FILE appears only when complete (AtomicFile); '-' streams to
// standard output. With -r/-R (issue 33) the vmcore is an age file encrypted
// to those recipients (xendump/recipients.hpp AgeWriter): the plaintext
// reaches neither FILE nor the pipe, so an encrypted dump's vmcore may then go
// to a file too.
#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"
#include "dump_selection.hpp"
#include "recipients.hpp"
#include "util/util.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/kernel/prstatus.hpp"
#include "xendump/reader.hpp"
#include "xendump/recipients.hpp"

namespace xendump::ctl {

namespace fs = std::filesystem;

namespace {

void append_note(std::vector<std::byte>& out, std::string_view name, uint32_t type, std::span<const std::byte> desc) {
    auto pad4 = [&] { out.resize((out.size() + 3) & ~size_t{3}); };
    Elf64_Nhdr h{};
    h.n_namesz = static_cast<Elf64_Word>(name.size() + 1);
    h.n_descsz = static_cast<Elf64_Word>(desc.size());
    h.n_type = type;
    const auto* hb = reinterpret_cast<const std::byte*>(&h);
    out.insert(out.end(), hb, hb + sizeof h);
    const auto* nb = reinterpret_cast<const std::byte*>(name.data());
    out.insert(out.end(), nb, nb + name.size());
    out.push_back(std::byte{0});
    pad4();
    out.insert(out.end(), desc.begin(), desc.end());
    pad4();
}

// FILE (published by commit()) or standard output; with recipients, the
// age file of what is written.
class Output {
public:
    Output(const std::string& target, const std::vector<std::string>& recipients) : name_(target) {
        if (target == "-") {
            fd_ = STDOUT_FILENO;
        } else {
            file_.emplace(fs::path(target), 0600);
            fd_ = file_->fd();
        }
        if (!recipients.empty()) age_.emplace(fd_, name_, recipients);
    }
    void write(std::span<const std::byte> data) {
        if (age_)
            age_->write(data);
        else
            util::write_all(fd_, data.data(), data.size(), name_);
    }
    void commit() {
        if (age_) age_->finish();
        if (file_) file_->commit();
    }

private:
    std::string name_;
    std::optional<AtomicFile> file_;
    int fd_ = -1;
    std::optional<AgeWriter> age_;
};

template <typename T>
std::span<const std::byte> bytes_of(const T& v) {
    return {reinterpret_cast<const std::byte*>(&v), sizeof v};
}

}  // namespace

void write_vmcore(const DumpReader& reader, const std::string& target, const std::vector<std::string>& recipients) {
    const uint64_t page = reader.page_size();
    const auto& runs = reader.runs();
    // The notes crash, gdb and drgn read from a kdump vmcore.
    std::vector<std::byte> notes;
    if (reader.guest_width() == 8) {
        const auto vcpus = reader.vcpus();
        for (const auto& desc : kernel::prstatus_notes(vcpus, reader.type())) append_note(notes, "CORE", NT_PRSTATUS, desc);
    }
    if (auto info = reader.vmcoreinfo())
        append_note(notes, "VMCOREINFO", 0, std::as_bytes(std::span(info->data(), info->size())));

    const auto image = reader.kernel_image_mapping();
    const size_t nr_phdrs = 1 + runs.size() + (image ? 1 : 0);
    if (nr_phdrs >= PN_XNUM) throw Error("too many runs of pages for one ELF file", reader.path().string());
    const uint64_t notes_offset = sizeof(Elf64_Ehdr) + nr_phdrs * sizeof(Elf64_Phdr);
    const uint64_t pages_offset = (notes_offset + notes.size() + page - 1) / page * page;

    Elf64_Ehdr eh = util::core_elf_header(reader.guest_width() == 4 ? EM_386 : EM_X86_64);
    eh.e_phoff = sizeof(Elf64_Ehdr);
    eh.e_phnum = static_cast<Elf64_Half>(nr_phdrs);

    std::vector<Elf64_Phdr> ph;
    Elf64_Phdr note{};
    note.p_type = PT_NOTE;
    note.p_offset = notes_offset;
    note.p_filesz = note.p_memsz = notes.size();
    ph.push_back(note);
    uint64_t offset = pages_offset;
    std::vector<uint64_t> run_offsets;
    for (const auto& r : runs) {
        Elf64_Phdr load{};
        load.p_type = PT_LOAD;
        load.p_flags = PF_R | PF_W | PF_X;
        load.p_offset = offset;
        load.p_paddr = r.first_pfn * page;
        load.p_filesz = load.p_memsz = r.count * page;
        ph.push_back(load);
        run_offsets.push_back(offset);
        offset += r.count * page;
    }
    if (image) {
        // The image's first page, in whichever run holds it; the segment ends
        // with that run (a gap in the pfns would read as other pages).
        for (size_t i = 0; i < runs.size(); ++i) {
            const uint64_t start = runs[i].first_pfn * page, end = start + runs[i].count * page;
            if (image->paddr < start || image->paddr >= end) continue;
            Elf64_Phdr load{};
            load.p_type = PT_LOAD;
            load.p_flags = PF_R | PF_W | PF_X;
            load.p_offset = run_offsets[i] + (image->paddr - start);
            load.p_vaddr = image->vaddr;
            load.p_paddr = image->paddr;
            load.p_filesz = load.p_memsz = std::min(image->size, end - image->paddr);
            ph.push_back(load);
            break;
        }
        eh.e_phnum = static_cast<Elf64_Half>(ph.size());
    }

    Output out(target, recipients);
    std::vector<std::byte> head;
    auto put = [&](std::span<const std::byte> b) { head.insert(head.end(), b.begin(), b.end()); };
    put(bytes_of(eh));
    for (const auto& p : ph) put(bytes_of(p));
    // A missing image segment leaves one Elf64_Phdr of room: zeros, before the notes.
    head.resize(notes_offset);
    put(notes);
    head.resize(pages_offset);
    out.write(head);

    constexpr uint64_t kBatch = 256;
    std::vector<std::byte> buf(kBatch * page);
    for (const auto& r : runs) {
        for (uint64_t done = 0; done < r.count;) {
            const uint64_t n = std::min(kBatch, r.count - done);
            for (uint64_t k = 0; k < n; ++k) {
                std::span<std::byte> slot(buf.data() + k * page, page);
                // An unreadable page of the dump reads as zeros, as in the dump itself.
                if (!reader.read_page_by_pfn(r.first_pfn + done + k, slot))
                    std::fill(slot.begin(), slot.end(), std::byte{0});
            }
            out.write(std::span(buf.data(), n * page));
            done += n;
        }
    }
    out.commit();
}

std::string check_dump(const Invocation& c) {
    const auto target = c.p.value("--output");
    if (!target || target->empty()) return "-o FILE is required";
    if (*target == "-" && isatty(STDOUT_FILENO)) return "refusing to write a vmcore to a terminal (-o FILE, or a pipe)";
    try {
        (void)cli::recipients_choice(c.p);  // a bad -r or -R is a usage error before anything is read
    } catch (const cli::UsageError& e) {
        return e.message;
    }
    std::error_code ec;
    if (*target != "-" && fs::symlink_status(*target, ec).type() != fs::file_type::not_found)
        throw Error("exists; not replacing it", *target);  // before the pages are read (AtomicFile checks again)
    return {};
}

// The vmcore of an encrypted dump is its plaintext: written to a pipe only
// (-o - on a pipe or socket), never to a file on a disk, unless it is
// encrypted again (-r/-R) (xen-dumpctl(1) "ENCRYPTED DUMPS"; issue 33:
// plaintext never on a disk).
void refuse_plaintext_file(const DumpReader& reader, const std::string& target, bool encrypted) {
    if (!reader.encryption() || encrypted) return;
    struct stat st{};
    if (target == "-" && ::fstat(STDOUT_FILENO, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) return;
    throw Error("is encrypted: its vmcore would be its plaintext on a disk; encrypt it (-r RECIPIENT, -R FILE) or "
                "write it to a pipe (-o - | ...) instead",
                reader.path().string());
}

int cmd_dump(Invocation& c) {
    const DumpReader& reader = *c.dump;
    const std::string target = *c.p.value("--output");  // check_dump: given
    const std::vector<std::string> recipients = cli::recipients_choice(c.p);  // check_dump: they parse
    refuse_plaintext_file(reader, target, !recipients.empty());
    write_vmcore(reader, target, recipients);
    // A PV guest's page tables hold machine frames, which a pfn-addressed
    // vmcore cannot resolve (crash stops at the first page-table walk);
    // crash reads the dump itself through its xendump support.
    if (reader.type() == format::GuestType::pv)
        std::fprintf(stderr,
                     "xen-dumpctl dump: warning: %s is a PV guest's: its page tables hold machine frames that the "
                     "vmcore's physical addresses do not resolve; give crash the dump itself "
                     "(xen-dumpctl debug)\n",
                     reader.path().c_str());
    return cli::kExitOk;
}

}  // namespace xendump::ctl
