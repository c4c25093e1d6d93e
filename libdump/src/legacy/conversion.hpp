// Converting one old dump file into a v1 file: the public API is
// xendump/convert.hpp; its names are also reachable as xendump::legacy::NAME
// inside libdump and its tests.
#pragma once

#include "xendump/convert.hpp"

namespace xendump::legacy {

using xendump::ConvertOptions;
using xendump::convert_file;
using xendump::InputFormat;
using xendump::plan_conversion;
using xendump::sniff_format;
using xendump::to_string;
using Plan = xendump::ConversionPlan;

}  // namespace xendump::legacy
