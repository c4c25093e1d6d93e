// Note parsing from a file (reader/notes.hpp): descriptors the caller does
// not want (the trailer's padding, 8 bytes a page) are never read, yet their
// bounds are checked as strictly as by the in-memory parser.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "reader/dump_file.hpp"
#include "reader/notes.hpp"
#include "test_support.hpp"
#include "xendump/error.hpp"
#include "xendump/format.hpp"

namespace xendump::test {
namespace {

void put_note(std::vector<std::byte>& out, std::string_view name_view, uint32_t type,
              std::span<const std::byte> desc) {
    const std::string name(name_view);
    auto u32 = [&](uint32_t v) {
        const auto* p = reinterpret_cast<const std::byte*>(&v);
        out.insert(out.end(), p, p + 4);
    };
    u32(static_cast<uint32_t>(name.size() + 1));
    u32(static_cast<uint32_t>(desc.size()));
    u32(type);
    const auto* n = reinterpret_cast<const std::byte*>(name.c_str());
    out.insert(out.end(), n, n + name.size() + 1);
    out.resize((out.size() + 3) & ~size_t{3});
    out.insert(out.end(), desc.begin(), desc.end());
    out.resize((out.size() + 3) & ~size_t{3});
}

class NotesInFile : public ::testing::Test {
protected:
    void SetUp() override {
        bytes_.resize(100);  // something before the notes: offsets are file offsets
        const std::vector<std::byte> first(5, std::byte{0x11}), pad(1 << 20), last(8, std::byte{0x22});
        put_note(bytes_, format::kNameXenCore, 1, first);
        padding_at_ = bytes_.size();
        put_note(bytes_, format::kNameXenCore, format::kNtXenPadding, pad);
        last_at_ = bytes_.size();
        put_note(bytes_, format::kNameXenCore, 2, last);
        save();
    }
    void save() const {
        std::ofstream(path_, std::ios::binary).write(reinterpret_cast<const char*>(bytes_.data()),
                                                      static_cast<std::streamsize>(bytes_.size()));
    }
    reader::NoteList parse(uint64_t size, uint64_t desc_limit = 64, size_t max_notes = 16) const {
        reader::DumpFile f(path_.string());
        return reader::parse_notes_in_file(
            f, 100, size, "trailer",
            [desc_limit](std::string_view name, uint32_t type) -> uint64_t {
                return type == format::kNtXenPadding && name == format::kNameXenCore ? 0 : desc_limit;
            },
            max_notes);
    }

    TempDir dir_;
    std::filesystem::path path_ = dir_ / "notes.bin";
    std::vector<std::byte> bytes_;
    uint64_t padding_at_ = 0, last_at_ = 0;
};

TEST_F(NotesInFile, SkipsUnwantedDescriptorsAndKeepsTheRest) {
    const auto got = parse(bytes_.size() - 100);
    ASSERT_FALSE(got.error.has_value()) << got.error->message;
    const auto all = reader::parse_notes(std::span(bytes_).subspan(100), 100, "trailer");
    ASSERT_EQ(got.notes.size(), 3u);
    ASSERT_EQ(all.notes.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(got.notes[i].name, all.notes[i].name);
        EXPECT_EQ(got.notes[i].type, all.notes[i].type);
        EXPECT_EQ(got.notes[i].offset, all.notes[i].offset);
        EXPECT_EQ(got.notes[i].desc_offset, all.notes[i].desc_offset);
        EXPECT_EQ(got.notes[i].end_offset, all.notes[i].end_offset);
    }
    EXPECT_EQ(got.notes[0].desc, all.notes[0].desc);
    EXPECT_TRUE(got.notes[1].desc.empty()) << "the padding descriptor was read";
    EXPECT_EQ(all.notes[1].desc.size(), 1u << 20);
    EXPECT_EQ(got.notes[2].desc, all.notes[2].desc);
    EXPECT_EQ(got.notes[1].offset, padding_at_);
}

TEST_F(NotesInFile, ASkippedDescriptorPastTheEndIsStillAnError) {
    // End the notes inside the padding descriptor.
    const auto got = parse(padding_at_ + 1000 - 100);
    ASSERT_TRUE(got.error.has_value());
    EXPECT_EQ(got.error->check, "notes-parse");
    EXPECT_EQ(got.error->offset, padding_at_);
    EXPECT_EQ(got.notes.size(), 1u);
}

TEST_F(NotesInFile, ATruncatedHeaderIsAnError) {
    const auto got = parse(last_at_ + 8 - 100);
    ASSERT_TRUE(got.error.has_value());
    EXPECT_EQ(got.error->offset, last_at_);
    EXPECT_EQ(got.notes.size(), 2u);
}

// Hostile files: limits end the parse with a finding at the offending note
// instead of reading (and allocating) what the header claims.
TEST_F(NotesInFile, ADescriptorOverItsLimitIsAnError) {
    const auto got = parse(bytes_.size() - 100, 6);  // the last note's 8 bytes are too many
    ASSERT_TRUE(got.error.has_value());
    EXPECT_EQ(got.error->offset, last_at_);
    EXPECT_NE(got.error->message.find("more than it can hold"), std::string::npos) << got.error->message;
    EXPECT_EQ(got.notes.size(), 2u);
}

TEST_F(NotesInFile, TooManyNotesIsAnError) {
    const auto got = parse(bytes_.size() - 100, 64, 2);
    ASSERT_TRUE(got.error.has_value());
    EXPECT_EQ(got.error->offset, last_at_);
    EXPECT_EQ(got.notes.size(), 2u);
}

TEST_F(NotesInFile, ANameLongerThanAnyNoteNameIsAnError) {
    // The padding note re-declared with a 68-byte name and a descriptor 56
    // bytes shorter: still exactly in bounds, so only the name limit speaks.
    const uint32_t namesz = reader::kMaxNoteName + 4, descsz = (1u << 20) - 56;
    std::memcpy(bytes_.data() + padding_at_, &namesz, 4);
    std::memcpy(bytes_.data() + padding_at_ + 4, &descsz, 4);
    save();
    const auto in_memory = reader::parse_notes(std::span(bytes_).subspan(100), 100, "trailer");
    ASSERT_FALSE(in_memory.error.has_value()) << in_memory.error->message;  // the layout is sound
    const auto got = parse(bytes_.size() - 100);
    ASSERT_TRUE(got.error.has_value());
    EXPECT_EQ(got.error->offset, padding_at_);
    EXPECT_NE(got.error->message.find("name of 68 bytes"), std::string::npos) << got.error->message;
}

TEST_F(NotesInFile, ARangePastTheFileNamesTheFile) {
    try {
        parse(bytes_.size());  // 100 bytes too many
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("notes.bin"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("trailer"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace xendump::test
