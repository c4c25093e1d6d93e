#include "options.hpp"

#include <algorithm>
#include <cstdio>
#include <string_view>

#include "cli.hpp"
#include "cli_options.hpp"
#include "dump_format.hpp"
#include "identity.hpp"
#include "inputs.hpp"
#include "options_table.hpp"
#include "recipients.hpp"
#include "xendump/error.hpp"
#include "xendump/s3.hpp"
#include "xendump/writer.hpp"

#include "xendump_config.h"

namespace xendump::convert {
namespace {

constexpr const char* kHelpHead =
    "usage: xen-dump-convert [OPTIONS] FILE|DIR|s3://BUCKET/KEY|s3://BUCKET/PREFIX/...\n"
    "       xen-dump-convert [OPTIONS] - -o FILE\n"
    "\n"
    "Convert old Xen guest dumps (legacy xc_core files of Xen <= 3.0.4 and the\n"
    "section-only ELF files of 'xl dump-core') into xen-dump-core v1 files, or\n"
    "(--format kdump) those and v1 files into compact files. Formats are\n"
    "recognised from the bytes; v1 files are otherwise left alone. Directories\n"
    "are searched recursively. Sources are never modified.\n"
    "\n"
    "A flattened file (makedumpfile -F, xen-dumpd --format kdump -o -), or the\n"
    "stream on standard input ('-', with -o FILE), is rearranged into the file\n"
    "it carries, as makedumpfile -R does (default name NAME.kdump).\n"
    "\n"
    "Inputs and outputs may be objects of an S3-compatible store: s3://BUCKET/KEY\n"
    "(s3://BUCKET/PREFIX/: the objects under it) is read by ranged GETs and never\n"
    "written; --output-dir s3://BUCKET/PREFIX or -o s3://BUCKET/KEY streams each\n"
    "output into a multipart upload that appears only complete (aborted on any\n"
    "error). Endpoint, region and keys as the AWS tools take them, never from the\n"
    "command line: AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID,\n"
    "AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN), else ~/.aws/credentials\n"
    "(AWS_SHARED_CREDENTIALS_FILE, AWS_PROFILE).\n"
    "\n";

constexpr const char* kHelpTail =
    "\n"
    "Files of no known format (sidecars, text) are skipped, not failed. An output\n"
    "that exists is taken as done only when it records this very source\n"
    "(SOURCE_ID=: size, mtime, digest), and only then is a source removed.\n"
    "\n"
    "An encrypted input (age: NAME.core.age...) is read with the key of -i; its\n"
    "output is encrypted to -r/-R, or written in clear only with --decrypt.\n"
    "\n"
    "Exit status: 0 nothing failed (every file converted or skipped), 1 at least\n"
    "one file failed (an object that cannot be read or written, no credentials:\n"
    "that file fails), 2 usage error or the batch could not start, 3 the only\n"
    "failures were encrypted inputs and no identity (-i) to read them.\n";

void usage_error(const std::string& msg) { cli::usage_error("xen-dump-convert", msg); }

// Empty when what names the store (s3://) on the command line can be done;
// else why not.
std::string store_choice(const Options& o) {
    const bool to_store = (o.output && s3::is_url(*o.output)) || (o.output_dir && s3::is_url(*o.output_dir));
    bool from_store = false;
    try {
        for (const std::string& in : o.inputs)
            if (s3::is_url(in)) {
                s3::parse_url(in);
                from_store = true;
            }
        for (const auto& out : {o.output, o.output_dir})
            if (out && s3::is_url(*out)) s3::parse_url(*out);
    } catch (const Error& e) {
        return e.what();
    }
    if (from_store && o.remove_source)
        return "--remove-source: an object of the store (s3://) is never deleted; copy it, or remove it yourself";
    if (to_store && !o.recipients.empty())
        return "-r/-R: encrypted outputs are not streamed to object storage (s3://) yet; write them to files";
    if (o.output && s3::is_url(*o.output) &&
        std::find(o.inputs.begin(), o.inputs.end(), kStdin) != o.inputs.end())
        return "- (standard input) is rearranged into a local file: not -o s3://";
    if (const auto key = o.output && s3::is_url(*o.output) ? s3::parse_url(*o.output).key : "-";
        key.empty() || key.ends_with('/'))
        return "-o s3://BUCKET/KEY names an object: give its key, or use --output-dir s3://BUCKET/PREFIX";
    return {};
}

}  // namespace

ParseStatus parse_options(int argc, char** argv, Options& o) {
    cli::Parsed p;
    try {
        p = cli::parse(kConvertOptions, argc, argv);
    } catch (const cli::UsageError& e) {
        usage_error(e.message);
        return ParseStatus::usage_error;
    }
    if (p.help) {
        std::fputs(kHelpHead, stdout);
        std::fputs(cli::options_help(kConvertOptions).c_str(), stdout);
        std::fputs(kHelpTail, stdout);
        return ParseStatus::exit_ok;
    }
    if (p.has("--version")) {
        std::printf("xen-dump-convert %s\n", XENDUMP_VERSION);
        return ParseStatus::exit_ok;
    }
    o.inputs = p.operands;
    o.output = p.value("--output");
    o.output_dir = p.value("--output-dir");
    o.system_map = p.value("--system-map");
    try {
        o.jobs = p.number("--jobs", 1, 256).value_or(1);
        o.threads = p.number("--threads", 1, kMaxWriteThreads).value_or(cli::default_threads(o.jobs));
    } catch (const cli::UsageError& e) {
        usage_error(e.message);
        return ParseStatus::usage_error;
    }
    o.allow_inferred = p.has("--allow-inferred-layout");
    o.remove_source = p.has("--remove-source");
    o.dry_run = p.has("--dry-run");
    o.json = p.has("--json");
    o.digests = !p.has("--no-digests");
    o.quiet = p.has("--quiet");
    o.open = cli::identity_options(p);
    o.decrypt = p.has("--decrypt");
    if (o.inputs.empty()) {
        usage_error("no input given");
        return ParseStatus::usage_error;
    }
    if (std::find(o.inputs.begin(), o.inputs.end(), kStdin) != o.inputs.end()) {
        if (!o.output) {
            usage_error("- (standard input, a flattened stream) is rearranged into -o FILE: give -o");
            return ParseStatus::usage_error;
        }
        if (o.remove_source) {
            usage_error("--remove-source: standard input is no file to remove");
            return ParseStatus::usage_error;
        }
    }
    if (o.output && o.output_dir) {
        usage_error("-o and --output-dir exclude each other");
        return ParseStatus::usage_error;
    }
    try {
        const cli::DumpFormatChoice format = cli::dump_format_choice(p);
        o.kdump = format.kdump;
        o.compression = format.compression;
        o.dump_level = format.dump_level;
        o.recipients = cli::recipients_choice(p);
    } catch (const cli::UsageError& e) {
        usage_error(e.message);
        return ParseStatus::usage_error;
    }
    if (o.remove_source && !o.recipients.empty()) {
        // A source goes only once its output is shown to come from it, which
        // needs the output's plaintext: a private key the converter lacks.
        usage_error("--remove-source needs outputs that can be read back: not with -r or -R");
        return ParseStatus::usage_error;
    }
    if (o.decrypt && !o.recipients.empty()) {
        usage_error("--decrypt writes outputs in clear: not with -r or -R");
        return ParseStatus::usage_error;
    }
    if (const std::string why = store_choice(o); !why.empty()) {
        usage_error(why);
        return ParseStatus::usage_error;
    }
    if (o.remove_source && o.dry_run) {
        usage_error("--remove-source and --dry-run exclude each other");
        return ParseStatus::usage_error;
    }
    return ParseStatus::run;
}

}  // namespace xendump::convert
