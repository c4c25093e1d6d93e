// "0x…" formatting for error messages and LAYOUT= values: util::hex, under
// the name the legacy code uses.
#pragma once

#include "util/util.hpp"

namespace xendump::legacy {

using util::hex;

}  // namespace xendump::legacy
