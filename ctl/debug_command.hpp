// How `xen-dumpctl debug` finds a guest kernel's debug vmlinux and builds the
// debugger's command line (cmd_debug.cpp).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace xendump::ctl {

// Where Debian's linux-image-RELEASE-dbg puts the image, under `root` ("/",
// or $XENDUMP_DEBUG_ROOT); none when `release` is no release name
// (kernel::is_release_name: a guest's "/tmp/x" or "../.." names no file).
std::vector<std::filesystem::path> vmlinux_candidates(const std::string& release, const std::filesystem::path& root);

// The first candidate that is a file; throws Error naming the paths tried and
// the package to install, or, for a release that is no release name, saying
// it is untrusted and asking for --vmlinux.
std::filesystem::path find_vmlinux(const std::string& release, const std::filesystem::path& root);

// The debug image of build id `build_id` (hex) from debuginfod: the path
// `debuginfod-find debuginfo BUILD_ID` prints (it reads DEBUGINFOD_URLS and
// caches). Throws Error naming the build id when it fails.
std::filesystem::path debuginfod_vmlinux(const std::string& build_id);

// crash|gdb ARGS VMLINUX DUMP, or drgn -c DUMP -s VMLINUX ARGS.
std::vector<std::string> debugger_command(const std::string& debugger, const std::filesystem::path& vmlinux,
                                          const std::filesystem::path& dump, const std::vector<std::string>& extra);

// `word` as a POSIX shell reads it back (single quotes when needed).
std::string shell_quote(const std::string& word);

}  // namespace xendump::ctl
