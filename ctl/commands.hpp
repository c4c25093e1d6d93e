// The subcommands of xen-dumpctl. Each gets the arguments after its name
// (args[0] is the subcommand name) and returns the exit status (cli::kExit*).
#pragma once

#include <span>
#include <string_view>

namespace xendump::ctl {

using Args = std::span<char* const>;

struct Command {
    std::string_view name;
    std::string_view summary;  // one line for `xen-dumpctl --help`
    int (*run)(Args args);
};

int cmd_info(Args args);
int cmd_verify(Args args);
int cmd_symbol(Args args);
int cmd_dmesg(Args args);
int cmd_debug(Args args);
int cmd_dump(Args args);  // cmd_dump.cpp: a plain ELF vmcore of a dump
int cmd_backtrace(Args args);
int cmd_estimate(Args args);
// The service's subcommands (cmd_list.cpp, cmd_vacuum.cpp, cmd_status.cpp, cmd_cancel.cpp).
int cmd_list(Args args);
int cmd_vacuum(Args args);
int cmd_status(Args args);
int cmd_cancel(Args args);

}  // namespace xendump::ctl
