// The dumps of a fleet in S3-compatible object storage (xen-dumpctl list
// --store s3://BUCKET/PREFIX, issue 34 item 4): the service uploads each dump
// as PREFIX/HOST/NAME with its sidecar NAME.json beside it, the sidecar last
// (daemon/uploader.hpp), so a sidecar in the store stands for a finished
// upload. The keys come from ListObjectsV2 (every page), each sidecar from
// one GET; nothing else is read. A dump object without its sidecar is an
// upload still under way: not listed.
#pragma once

#include <string>
#include <vector>

#include "dump_dir.hpp"

namespace xendump::ctl {

// The dumps under `store` (s3://BUCKET[/PREFIX]), oldest first, as
// scan_dump_dir gives a directory's: `dump` and `sidecar` are the objects'
// URLs, `host` the HOST of their keys, in_store whether the dump's object
// is there (a sidecar whose dump is gone shows MISSING), bytes_on_disk the
// sizes of the dump's objects. The client's settings come from the
// environment (AWS_* variables, the shared credentials file). Throws Error
// naming the store when it cannot be listed; a sidecar that does not parse
// is kept as sidecar_error.
std::vector<daemon::DumpEntry> scan_store(const std::string& store);

}  // namespace xendump::ctl
