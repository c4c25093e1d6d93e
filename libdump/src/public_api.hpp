// Included first in every source file of libdump (the compiler's -include,
// libdump/meson.build). The library is built with -fvisibility=hidden: what
// is declared here, the public headers, keeps the default visibility and is
// exported; everything declared later, in libdump/src, stays inside the
// library. (A declaration's visibility is fixed where it is first seen, so
// including the headers here first marks the API without an export macro in
// every header.) libdump/libxendump.map then keeps only xendump's own names
// out of what is visible, not the template code instantiated for them.
// A new public header is added to this list; tests/abi checks that the
// exported symbols are those the public headers declare.
#pragma once

#pragma GCC visibility push(default)
#include "xendump/convert.hpp"
#include "xendump/dump_kernel_log.hpp"
#include "xendump/dump_spec.hpp"
#include "xendump/dumper.hpp"
#include "xendump/error.hpp"
#include "xendump/fd.hpp"
#include "xendump/format.hpp"
#include "xendump/hypervisor.hpp"
#include "xendump/kdump.hpp"
#include "xendump/logdirty_records.hpp"
#include "xendump/kernel/backtrace.hpp"
#include "xendump/kernel/dump_level.hpp"
#include "xendump/kernel/guest_memory.hpp"
#include "xendump/kernel/kallsyms.hpp"
#include "xendump/kernel/printk_log.hpp"
#include "xendump/kernel/prstatus.hpp"
#include "xendump/kernel/virtual_memory.hpp"
#include "xendump/kernel/vmcoreinfo.hpp"
#include "xendump/keyvalues.hpp"
#include "xendump/page_source.hpp"
#include "xendump/pages_read_back.hpp"
#include "xendump/reader.hpp"
#include "xendump/recipients.hpp"
#include "xendump/simulated_host.hpp"
#include "xendump/text.hpp"
#include "xendump/writer.hpp"
#pragma GCC visibility pop
