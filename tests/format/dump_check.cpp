#include "dump_check.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "xendump/format.hpp"
#include "xendump/keyvalues.hpp"

namespace xendump::test {

namespace {
constexpr uint64_t kPage = 4096;

template <typename T>
T load(const std::vector<std::byte>& b, size_t off = 0) {
    T v{};
    if (off + sizeof v > b.size()) throw std::runtime_error("short read");
    std::memcpy(&v, b.data() + off, sizeof v);
    return v;
}

std::vector<std::byte> canonical(XXH128_hash_t h) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    std::vector<std::byte> out(16);
    std::memcpy(out.data(), &c, 16);
    return out;
}
}  // namespace

std::vector<uint64_t> pfns_with_holes(uint64_t count) {
    std::vector<uint64_t> v;
    for (uint64_t pfn = 0; v.size() < count; ++pfn)
        if (pfn % 5 != 3) v.push_back(pfn);
    return v;
}

std::vector<PageEntry> entries_for(const std::vector<uint64_t>& pfns, format::GuestType type) {
    std::vector<PageEntry> out;
    for (uint64_t pfn : pfns)
        out.push_back({pfn, type == format::GuestType::pv ? (pfn ^ 0x5a5a5) + 0x100000 : pfn});
    return out;
}

DumpSpec make_spec(format::GuestType type, unsigned guest_width, unsigned nr_vcpus) {
    DumpSpec s;
    s.type = type;
    s.guest_width = guest_width;
    const size_t ctx = (type == format::GuestType::pv && guest_width == 4) ? format::kVcpuContextSize32
                                                                          : format::kVcpuContextSize64;
    for (unsigned v = 0; v < nr_vcpus; ++v) {
        VcpuContext c;
        c.id = v * 2 + 1;  // ids need not be dense
        c.bytes.resize(ctx);
        for (size_t i = 0; i < ctx; ++i) c.bytes[i] = static_cast<std::byte>((i * 7 + v * 13 + 1) & 0xff);
        s.vcpus.push_back(std::move(c));
    }
    s.domain.set(keys::kDomid, "7");
    s.domain.set(keys::kName, "guest-under-test");
    s.domain.set(keys::kType, std::string(format::to_string(type)));
    s.domain.set(keys::kGuestWidth, std::to_string(guest_width));
    s.domain.set(keys::kNrPages, "stale value the writer replaces");
    s.xen_version.major_version = 4;
    s.xen_version.minor_version = 17;
    std::strncpy(s.xen_version.extra_version, ".2-test", sizeof s.xen_version.extra_version - 1);
    std::strncpy(s.xen_version.capabilities, "xen-3.0-x86_64 hvm-3.0-x86_32", 64);
    s.xen_version.pagesize = 4096;
    if (type == format::GuestType::pv) {
        std::vector<std::byte> si(format::kSharedInfoSize);
        for (size_t i = 0; i < si.size(); ++i) si[i] = static_cast<std::byte>(i % 251);
        s.shared_info = si;
    }
    return s;
}

ParsedDump::ParsedDump(const std::filesystem::path& path) : path_(path) {
    file_size = std::filesystem::file_size(path);
    auto head = read(0, sizeof eh);
    eh = load<Elf64_Ehdr>(head);
    for (uint16_t i = 0; i < eh.e_shnum; ++i)
        sh.push_back(load<Elf64_Shdr>(read(eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof(Elf64_Shdr))));
    phnum = eh.e_phnum == PN_XNUM && !sh.empty() ? sh[0].sh_info : eh.e_phnum;
    auto phs = read(eh.e_phoff, phnum * sizeof(Elf64_Phdr));
    for (uint64_t i = 0; i < phnum; ++i) ph.push_back(load<Elf64_Phdr>(phs, i * sizeof(Elf64_Phdr)));
    if (eh.e_shstrndx < sh.size()) {
        auto strtab = read(sh[eh.e_shstrndx].sh_offset, sh[eh.e_shstrndx].sh_size);
        for (const auto& s : sh) {
            if (s.sh_name >= strtab.size()) throw std::runtime_error("bad sh_name");
            sh_names.emplace_back(reinterpret_cast<const char*>(strtab.data()) + s.sh_name);
        }
    }
}

const Elf64_Shdr* ParsedDump::section(const std::string& name) const {
    for (size_t i = 0; i < sh.size(); ++i)
        if (sh_names[i] == name) return &sh[i];
    return nullptr;
}

std::vector<std::byte> ParsedDump::read(uint64_t offset, uint64_t size) const {
    if (offset > file_size || file_size - offset < size) throw std::runtime_error("read past end of file");
    std::vector<std::byte> out(size);
    int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error("open");
    size_t done = 0;
    while (done < size) {
        ssize_t r = ::pread(fd, out.data() + done, size - done, static_cast<off_t>(offset + done));
        if (r <= 0) {
            ::close(fd);
            throw std::runtime_error("pread");
        }
        done += static_cast<size_t>(r);
    }
    ::close(fd);
    return out;
}

std::vector<ParsedNote> ParsedDump::notes(uint64_t offset, uint64_t size) const {
    auto b = read(offset, size);
    std::vector<ParsedNote> out;
    uint64_t pos = 0;
    auto pad4 = [](uint64_t v) { return (v + 3) & ~uint64_t{3}; };
    while (pos < size) {
        if (size - pos < 12) throw std::runtime_error("truncated note header");
        if ((offset + pos) % 8 != 0) throw std::runtime_error("note start not 8-aligned");
        uint32_t namesz = load<uint32_t>(b, pos), descsz = load<uint32_t>(b, pos + 4);
        ParsedNote n;
        n.type = load<uint32_t>(b, pos + 8);
        const uint64_t desc = pos + 12 + pad4(namesz);
        if (desc > size || size - desc < pad4(descsz)) throw std::runtime_error("note past its segment");
        if (namesz > 0) n.name.assign(reinterpret_cast<const char*>(b.data()) + pos + 12, namesz - 1);
        n.desc_offset = offset + desc;
        n.desc.assign(b.begin() + static_cast<long>(desc), b.begin() + static_cast<long>(desc + descsz));
        out.push_back(std::move(n));
        pos = desc + pad4(descsz);
    }
    return out;
}

std::vector<std::byte> expected_page(PatternPageSource& source, size_t index) {
    std::vector<std::byte> page(kPage);
    uint8_t bad = 0;
    source.read_pages(index, 1, page, std::span(&bad, 1));
    return page;
}

bool makedumpfile_view(const DumpSpec& spec) {
    if (spec.type != format::GuestType::pv || spec.guest_width != 8 || !spec.shared_info) return false;
    const uint64_t fll = load<uint64_t>(*spec.shared_info, 3096);  // shared_info.arch.pfn_to_mfn_frame_list_list
    return fll != 0 && fll != ~uint64_t{0};
}

uint64_t check_makedumpfile_view(const ParsedDump& d, const DumpSpec& spec, std::span<const PageEntry> entries) {
    // xen-dump-core(5) "makedumpfile's view": e_phnum entries at offset 64.
    auto table = d.read(64, d.phnum * sizeof(Elf64_Phdr));
    std::vector<Elf64_Phdr> ph;
    for (uint64_t i = 0; i < d.phnum; ++i) ph.push_back(load<Elf64_Phdr>(table, i * sizeof(Elf64_Phdr)));
    EXPECT_EQ(ph[0].p_type, PT_NOTE);
    EXPECT_EQ(ph[0].p_offset, d.ph[0].p_offset) << "the same note segment";
    EXPECT_EQ(ph[0].p_filesz, d.ph[0].p_filesz + 88) << "and the crash info note after it";
    const auto after = d.notes(d.ph[0].p_offset + d.ph[0].p_filesz, 88);
    EXPECT_EQ(after.size(), 1u);
    if (after.size() == 1) {
        EXPECT_EQ(after[0].name, "Xen");
        EXPECT_EQ(after[0].type, 0x1000001u);  // XEN_ELFNOTE_CRASH_INFO
        EXPECT_EQ(after[0].desc.size(), 72u);
        if (after[0].desc.size() == 72) {
            EXPECT_EQ(load<uint64_t>(after[0].desc, 0), spec.xen_version.major_version);
            EXPECT_EQ(load<uint64_t>(after[0].desc, 8), spec.xen_version.minor_version);
            EXPECT_EQ(load<uint64_t>(after[0].desc, 64), load<uint64_t>(*spec.shared_info, 3096));
        }
    }
    const Elf64_Shdr* pages = d.section(".xen_pages");
    uint64_t k = 1;
    for (uint64_t i = 0; i < entries.size(); ++k) {
        uint64_t j = i + 1;
        while (j < entries.size() && entries[j].gmfn == entries[j - 1].gmfn + 1) ++j;
        if (k >= ph.size()) {
            ADD_FAILURE() << "makedumpfile's view has too few PT_LOADs";
            return k;
        }
        EXPECT_EQ(ph[k].p_type, PT_LOAD) << "view entry " << k;
        EXPECT_EQ(ph[k].p_paddr, entries[i].gmfn * kPage) << "view entry " << k;
        EXPECT_EQ(ph[k].p_offset, pages->sh_offset + i * kPage) << "view entry " << k;
        EXPECT_EQ(ph[k].p_filesz, (j - i) * kPage) << "view entry " << k;
        EXPECT_EQ(ph[k].p_memsz, (j - i) * kPage) << "view entry " << k;
        i = j;
    }
    for (uint64_t i = k; i < ph.size(); ++i) EXPECT_EQ(ph[i].p_type, PT_NULL) << "view entry " << i;
    return k;
}

void check_dump(const std::filesystem::path& path, const DumpSpec& spec, PatternPageSource& source,
                bool digests) {
    const ParsedDump d(path);
    const auto entries = source.entries();
    const uint64_t n = entries.size();
    const bool pv = spec.type == format::GuestType::pv;

    // xen-dump-core(5) "ELF header".
    EXPECT_EQ(std::memcmp(d.eh.e_ident, ELFMAG, SELFMAG), 0);
    EXPECT_EQ(d.eh.e_ident[EI_CLASS], ELFCLASS64);
    EXPECT_EQ(d.eh.e_ident[EI_DATA], ELFDATA2LSB);
    EXPECT_EQ(d.eh.e_ident[EI_VERSION], EV_CURRENT);
    EXPECT_EQ(d.eh.e_type, ET_CORE);
    EXPECT_EQ(d.eh.e_machine, (pv && spec.guest_width == 4) ? EM_386 : EM_X86_64);
    EXPECT_EQ(d.eh.e_shoff % 8, 0u);
    EXPECT_EQ(d.file_size, expected_file_size(spec, entries, digests));
    const uint64_t shdrs_end = d.eh.e_shoff + d.eh.e_shnum * sizeof(Elf64_Shdr);
    if (pv) {
        // xen-dump-core(5): a PV guest's program headers come last, after the
        // section headers, so crash does not take its ELF path.
        EXPECT_EQ(d.eh.e_phoff, shdrs_end);
        EXPECT_GT(d.eh.e_phoff, 192u);
        // Last in the file, perhaps with the kernel image header's unused room.
        const uint64_t table_end = d.eh.e_phoff + d.phnum * sizeof(Elf64_Phdr);
        EXPECT_TRUE(table_end == d.file_size || table_end + sizeof(Elf64_Phdr) == d.file_size)
            << "program headers come last";
        // xen-dump-core(5) "makedumpfile's view": its table at offset 64, then the notes.
        EXPECT_EQ(d.ph[0].p_offset, 64 + (makedumpfile_view(spec) ? d.phnum * sizeof(Elf64_Phdr) : 0))
            << "the notes follow the ELF header or makedumpfile's table";
    } else {
        EXPECT_EQ(d.eh.e_phoff, 64u);
        EXPECT_EQ(shdrs_end, d.file_size) << "section headers come last";
        EXPECT_EQ(d.ph[0].p_offset, 64 + d.phnum * sizeof(Elf64_Phdr)) << "the notes follow the program headers";
    }

    // xen-dump-core(5) "Program headers": PT_NOTE, then the maximal runs.
    std::vector<std::pair<uint64_t, uint64_t>> runs;  // first index, length
    for (uint64_t i = 0; i < n; ++i) {
        if (i == 0 || entries[i].pfn != entries[i - 1].pfn + 1)
            runs.push_back({i, 1});
        else
            ++runs.back().second;
    }
    if (makedumpfile_view(spec)) {
        // Both tables have e_phnum entries, with the kernel image room counted.
        const uint64_t view = check_makedumpfile_view(d, spec, entries);
        EXPECT_TRUE(d.phnum == std::max(runs.size() + 1, view) || d.phnum == std::max(runs.size() + 2, view))
            << d.phnum << " program headers for " << runs.size() << " runs, makedumpfile's view " << view;
        for (uint64_t i = runs.size() + 1; i < d.phnum; ++i)
            EXPECT_EQ(d.ph[i].p_type, PT_NULL) << "program header " << i << " pads the table";
    } else {
        ASSERT_EQ(d.phnum, runs.size() + 1);
    }
    if (d.phnum >= PN_XNUM) {
        EXPECT_EQ(d.eh.e_phnum, PN_XNUM);
        EXPECT_EQ(d.sh[0].sh_info, d.phnum);
    } else {
        EXPECT_EQ(d.eh.e_phnum, d.phnum);
        EXPECT_EQ(d.sh[0].sh_info, 0u);
    }
    ASSERT_EQ(d.ph[0].p_type, PT_NOTE);
    const Elf64_Shdr* pages = d.section(".xen_pages");
    ASSERT_NE(pages, nullptr);
    EXPECT_EQ(pages->sh_offset % kPage, 0u);
    EXPECT_EQ(pages->sh_size, n * kPage);
    EXPECT_EQ(pages->sh_entsize, kPage);
    EXPECT_EQ(pages->sh_addralign, kPage);
    for (size_t r = 0; r < runs.size(); ++r) {
        const Elf64_Phdr& p = d.ph[r + 1];
        ASSERT_EQ(p.p_type, PT_LOAD) << "program header " << r + 1;
        EXPECT_EQ(p.p_paddr, entries[runs[r].first].pfn * kPage);
        EXPECT_EQ(p.p_vaddr, 0u);
        EXPECT_EQ(p.p_offset, pages->sh_offset + runs[r].first * kPage);
        EXPECT_EQ(p.p_filesz, runs[r].second * kPage);
        EXPECT_EQ(p.p_memsz, runs[r].second * kPage);
        EXPECT_EQ(p.p_flags, static_cast<Elf64_Word>(PF_R | PF_W | PF_X));
        EXPECT_EQ(p.p_align, 0u);  // crash takes the file for a kdump vmcore and derives KASLR
    }

    // xen-dump-core(5) "Sections" sections, in the table's order.
    std::vector<std::string> names = {"", ".shstrtab", ".note.Xen", ".xen_prstatus"};
    if (spec.shared_info) names.push_back(".xen_shared_info");
    names.insert(names.end(), {".xen_pages", ".note.xen_p2m", pv ? ".xen_p2m" : ".xen_pfn", ".note.xen_trailer"});
    EXPECT_EQ(d.sh_names, names);
    EXPECT_EQ(d.eh.e_shstrndx, 1);

    // xen-dump-core(5) "Notes" note segment.
    const auto notes = d.notes(d.ph[0].p_offset, d.ph[0].p_filesz);
    std::vector<std::pair<std::string, uint32_t>> expect = {
        {"Xen", format::kNoteDumpcoreNone},          {"Xen", format::kNoteDumpcoreHeader},
        {"Xen", format::kNoteDumpcoreXenVersion},    {"Xen", format::kNoteDumpcoreFormatVersion},
        {"XEN CORE", format::kNtXenHeader},          {"XEN CORE", format::kNtXenDomain}};
    if (spec.vmcoreinfo) expect.push_back({"VMCOREINFO", 0});
    for (size_t i = 0; i < spec.prstatus.size(); ++i) expect.push_back({"CORE", format::kNtPrstatus});
    expect.push_back({"XEN CORE", format::kNtXenPrstatus});
    if (spec.shared_info) expect.push_back({"XEN CORE", format::kNtXenSharedInfo});
    ASSERT_EQ(notes.size(), expect.size());
    for (size_t i = 0; i < notes.size(); ++i) {
        EXPECT_EQ(notes[i].name, expect[i].first) << "note " << i;
        EXPECT_EQ(notes[i].type, expect[i].second) << "note " << i;
    }
    const format::HeaderDesc want{spec.magic(), spec.vcpus.size(), n, kPage};
    ASSERT_EQ(notes[1].desc.size(), sizeof want);
    EXPECT_EQ(std::memcmp(notes[1].desc.data(), &want, sizeof want), 0);
    EXPECT_EQ(notes[4].desc, notes[1].desc);
    ASSERT_EQ(notes[2].desc.size(), sizeof(format::XenVersionDesc));
    EXPECT_EQ(std::memcmp(notes[2].desc.data(), &spec.xen_version, sizeof spec.xen_version), 0);
    EXPECT_EQ(load<uint64_t>(notes[3].desc), 1u);
    const auto dom = KeyValues::parse(
        std::string_view(reinterpret_cast<const char*>(notes[5].desc.data()), notes[5].desc.size()));
    EXPECT_EQ(dom.get("NR_PAGES"), std::to_string(n));
    std::string ids;
    for (const auto& v : spec.vcpus) ids += (ids.empty() ? "" : ",") + std::to_string(v.id);
    EXPECT_EQ(dom.get("VCPUS"), ids);
    EXPECT_EQ(dom.get("NAME"), spec.domain.get("NAME"));
    size_t k = 6;
    if (spec.vmcoreinfo) {
        std::string text(reinterpret_cast<const char*>(notes[k].desc.data()), notes[k].desc.size());
        EXPECT_EQ(text.substr(0, text.find('\0')), *spec.vmcoreinfo);
        ++k;
    }
    for (const auto& p : spec.prstatus) {
        ASSERT_GE(notes[k].desc.size(), p.size());
        EXPECT_EQ(std::memcmp(notes[k].desc.data(), p.data(), p.size()), 0);
        ++k;
    }
    const auto& prs = notes[k];
    ASSERT_EQ(prs.desc.size(), spec.vcpus.size() * format::kVcpuSlotSize);
    for (size_t v = 0; v < spec.vcpus.size(); ++v) {
        std::vector<std::byte> slot(format::kVcpuSlotSize);
        std::memcpy(slot.data(), spec.vcpus[v].bytes.data(), spec.vcpus[v].bytes.size());
        EXPECT_EQ(std::memcmp(prs.desc.data() + v * format::kVcpuSlotSize, slot.data(), slot.size()), 0)
            << "vcpu slot " << v;
    }
    const Elf64_Shdr* note_xen = d.section(".note.Xen");
    EXPECT_EQ(note_xen->sh_offset, d.ph[0].p_offset);
    EXPECT_EQ(note_xen->sh_size, notes[4].desc_offset - 24 - d.ph[0].p_offset);
    EXPECT_EQ(note_xen->sh_addralign, 4u);
    const Elf64_Shdr* xprs = d.section(".xen_prstatus");
    EXPECT_EQ(xprs->sh_offset, prs.desc_offset);
    EXPECT_EQ(xprs->sh_size, prs.desc.size());
    EXPECT_EQ(xprs->sh_entsize, format::kVcpuSlotSize);
    if (spec.shared_info) {
        const Elf64_Shdr* si = d.section(".xen_shared_info");
        EXPECT_EQ(si->sh_offset, notes[k + 1].desc_offset);
        EXPECT_EQ(si->sh_size, 4096u);
        EXPECT_EQ(d.read(si->sh_offset, si->sh_size), *spec.shared_info);
    }
    EXPECT_LE(d.ph[0].p_offset + d.ph[0].p_filesz, pages->sh_offset);

    // xen-dump-core(5) "Page data" pages (and the chunk digests, recomputed independently).
    std::vector<std::vector<std::byte>> chunk_digests;
    std::vector<uint64_t> bad_pfns;
    constexpr size_t kBatch = 1024;
    for (size_t first = 0; first < n; first += kBatch) {
        const size_t cnt = std::min<size_t>(kBatch, n - first);
        auto got = d.read(pages->sh_offset + first * kPage, cnt * kPage);
        std::vector<std::byte> want_pages(cnt * kPage);
        std::vector<uint8_t> bad(cnt);
        source.read_pages(first, cnt, want_pages, bad);
        for (size_t i = 0; i < cnt; ++i)
            if (bad[i]) bad_pfns.push_back(entries[first + i].pfn);
        ASSERT_EQ(std::memcmp(got.data(), want_pages.data(), got.size()), 0) << "pages from index " << first;
        for (size_t c = first; c < first + cnt; c += 256)
            chunk_digests.push_back(canonical(XXH3_128bits(got.data() + (c - first) * kPage,
                                                           std::min<size_t>(256, first + cnt - c) * kPage)));
    }

    // xen-dump-core(5) "The PFN->GMFN table" the table.
    const Elf64_Shdr* p2m_note = d.section(".note.xen_p2m");
    ASSERT_NE(p2m_note, nullptr);
    EXPECT_GE(p2m_note->sh_offset, pages->sh_offset + pages->sh_size);
    const auto p2m = d.notes(p2m_note->sh_offset, p2m_note->sh_size);
    ASSERT_EQ(p2m.size(), 1u);
    EXPECT_EQ(p2m[0].name, "XEN CORE");
    EXPECT_EQ(p2m[0].type, format::kNtXenP2m);
    EXPECT_EQ(p2m[0].desc_offset % kPage, 0u);
    ASSERT_EQ(p2m[0].desc.size(), n * 16);
    for (uint64_t i = 0; i < n; ++i) {
        EXPECT_EQ(load<uint64_t>(p2m[0].desc, i * 16), entries[i].pfn);
        EXPECT_EQ(load<uint64_t>(p2m[0].desc, i * 16 + 8), pv ? entries[i].gmfn : entries[i].pfn);
    }
    uint64_t next = p2m[0].desc_offset + n * 16;
    if (pv) {
        const Elf64_Shdr* x = d.section(".xen_p2m");
        EXPECT_EQ(x->sh_offset, p2m[0].desc_offset);
        EXPECT_EQ(x->sh_size, n * 16);
        EXPECT_EQ(x->sh_entsize, 16u);
    } else {
        const Elf64_Shdr* x = d.section(".xen_pfn");
        EXPECT_EQ(x->sh_offset, next);
        ASSERT_EQ(x->sh_size, n * 8);
        EXPECT_EQ(x->sh_entsize, 8u);
        auto pfns = d.read(x->sh_offset, x->sh_size);
        for (uint64_t i = 0; i < n; ++i) EXPECT_EQ(load<uint64_t>(pfns, i * 8), entries[i].pfn);
        next += n * 8;
    }

    // xen-dump-core(5) "Trailer notes" trailer.
    const Elf64_Shdr* tr = d.section(".note.xen_trailer");
    ASSERT_NE(tr, nullptr);
    EXPECT_EQ(tr->sh_offset, next);
    const auto trailer = d.notes(tr->sh_offset, tr->sh_size);
    bool saw_digest = false, saw_unreadable = false;
    for (const auto& t : trailer) {
        ASSERT_EQ(t.name, "XEN CORE");
        if (t.type == format::kNtXenDigest) {
            saw_digest = true;
            ASSERT_EQ(t.desc.size(), 8 + 16 * (chunk_digests.size() + 2));
            EXPECT_EQ(load<uint32_t>(t.desc, 0), 1u);
            EXPECT_EQ(load<uint32_t>(t.desc, 4), 256u);
            for (size_t c = 0; c < chunk_digests.size(); ++c)
                EXPECT_EQ(std::memcmp(t.desc.data() + 8 + c * 16, chunk_digests[c].data(), 16), 0) << "chunk " << c;
            auto seg = d.read(d.ph[0].p_offset, d.ph[0].p_filesz);
            auto nd = canonical(XXH3_128bits(seg.data(), seg.size()));
            EXPECT_EQ(std::memcmp(t.desc.data() + 8 + chunk_digests.size() * 16, nd.data(), 16), 0) << "notes digest";
            auto table = d.read(p2m[0].desc_offset, p2m[0].desc.size());
            auto td = canonical(XXH3_128bits(table.data(), table.size()));
            EXPECT_EQ(std::memcmp(t.desc.data() + 24 + chunk_digests.size() * 16, td.data(), 16), 0) << "table digest";
        } else if (t.type == format::kNtXenUnreadable) {
            saw_unreadable = true;
            const uint64_t count = load<uint64_t>(t.desc);
            ASSERT_EQ(t.desc.size(), 8 + 8 * count);
            std::vector<uint64_t> listed(count);
            std::memcpy(listed.data(), t.desc.data() + 8, 8 * count);
            EXPECT_EQ(listed, bad_pfns);
        } else {
            EXPECT_EQ(t.type, format::kNtXenPadding);
        }
    }
    EXPECT_EQ(saw_digest, digests);
    EXPECT_EQ(saw_unreadable, !bad_pfns.empty());
    const Elf64_Shdr* strtab = d.section(".shstrtab");
    EXPECT_EQ(strtab->sh_offset, tr->sh_offset + tr->sh_size) << "xen-dump-core(5) Layout: .shstrtab follows the trailer";
}

}  // namespace xendump::test
