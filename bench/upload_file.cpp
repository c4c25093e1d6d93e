// bench-upload-file FILE s3://BUCKET[/PREFIX] [PART_MIB]: uploads one
// existing dump file the way the service's spool uploader does ([Upload],
// daemon/uploader.hpp): the public Uploader class, given a dump directory
// that holds the file (a hard link beside it, so nothing is copied), uploads
// it as a multipart upload of PartSize= parts (default 16 MiB), each part's
// ETag checked against the MD5 of the local bytes, then HEAD. The object is
// PREFIX/bench/NAME (NAME the file's name, "bench" the host part of the
// service's keys); printed on stdout. Exits 1 when the upload fails (the
// uploader's error on stderr): the service would wait and try again, a
// benchmark must not. The store and its keys come from AWS_ENDPOINT_URL,
// AWS_ACCESS_KEY_ID, ... as for the service. Target #18b of
// bench/run-benchmarks.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "config.hpp"
#include "journal_log.hpp"
#include "uploader.hpp"

namespace fs = std::filesystem;
using namespace xendump::daemon;

int main(int argc, char** argv) {
    if (argc < 3 || argc > 4 || std::string(argv[2]).rfind("s3://", 0) != 0) {
        std::fprintf(stderr, "usage: bench-upload-file FILE s3://BUCKET[/PREFIX] [PART_MIB]\n");
        return 2;
    }
    const fs::path file = fs::absolute(argv[1]);
    std::string target = std::string(argv[2]).substr(5);
    while (!target.empty() && target.back() == '/') target.pop_back();
    UploadConfig cfg;
    const size_t slash = target.find('/');
    cfg.bucket = target.substr(0, slash);
    cfg.prefix = slash == std::string::npos ? "" : target.substr(slash + 1);
    cfg.keep_local = true;  // the file is the caller's
    if (argc == 4) cfg.part_size = std::stoull(argv[3]) << 20;
    if (const char* n = std::getenv("BENCH_PARTS_IN_FLIGHT")) cfg.in_flight = static_cast<unsigned>(std::stoul(n));
    std::string name = file.filename().string();
    if (!name.ends_with(".core")) name += ".core";  // a dump's name, as the service's are

    // The dump directory: a new one beside the file (same filesystem), the
    // file hard-linked into it.
    std::string tmpl = (file.parent_path() / ".bench-upload-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) {
        std::perror("mkdtemp");
        return 1;
    }
    const fs::path dir = tmpl;
    int rc = 1;
    try {
        fs::create_hard_link(file, dir / name);
        log_to_stderr_only(true);
        Uploader up(dir, "bench", [cfg] { return cfg; });
        up.start();
        up.add(dir / name);
        for (;;) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            const auto snap = up.snapshot();
            if (snap.empty()) {  // uploaded and verified: the entry is gone
                std::printf("s3://%s/%s\n", cfg.bucket.c_str(), upload_key(cfg, "bench", name).c_str());
                rc = 0;
                break;
            }
            if (snap.front().attempts > 0) {
                std::fprintf(stderr, "bench-upload-file: the upload failed: %s\n", snap.front().reason.c_str());
                break;
            }
        }
        up.stop(std::chrono::seconds(30));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench-upload-file: %s\n", e.what());
        rc = 1;
    }
    std::error_code ec;
    fs::remove_all(dir, ec);  // the link and the upload state, never the file itself
    return rc;
}
