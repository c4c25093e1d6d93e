// -r/--recipient and -R/--recipients-file of the programs that write dumps
// (xen-dumpd, xen-dump-convert), as age takes them: each repeatable, the
// recipients of every -r and every -R FILE together.
#pragma once

#include <string>
#include <vector>

#include "cli_options.hpp"

namespace xendump::cli {

// The recipients given (canonical form, xendump/recipients.hpp); empty
// when neither option is. Throws UsageError saying which -r does not parse
// ("-r #2: …", never repeating its text) or FILE:LINE of a bad -R line.
std::vector<std::string> recipients_choice(const Parsed& p);

}  // namespace xendump::cli
