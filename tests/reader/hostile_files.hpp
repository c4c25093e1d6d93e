// Hostile xl dump-core files for the reader's tests and fuzz seeds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace xendump::test {

// Writes `bytes` to `path` (replacing it).
void write_bytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes);

// The file offset of section `name`'s header in an ELF image.
uint64_t shdr_of(const std::vector<std::byte>& elf, const std::string& name);

// The file offset of the header note's nr_vcpus in an xl dump-core image.
uint64_t xl_nr_vcpus_offset(const std::vector<std::byte>& elf);

// The xl dump-core file of issue 16.8: an xl file of `pages` pages whose
// header claims 2^40 vcpus and whose .xen_prstatus covers the whole file
// with sh_entsize 1 (each byte a "vcpu").
std::vector<std::byte> xl_vcpu_amplification(uint64_t pages);

}  // namespace xendump::test
