#include "batch.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "cli.hpp"
#include "identity.hpp"
#include "inputs.hpp"
#include "util/util.hpp"
#include "xendump/convert.hpp"
#include "xendump/error.hpp"
#include "xendump/keyvalues.hpp"
#include "xendump/reader.hpp"
#include "xendump/s3.hpp"

namespace xendump::convert {
namespace fs = std::filesystem;

namespace {

bool in_store(const fs::path& p) { return s3::is_url(p.string()); }

// Whether an output is there already: a file of that name (with
// `dangling`, a symbolic link to none too), or an object under that key (a
// HEAD; an Error naming the object when the store cannot be asked: no or
// wrong credentials, no such bucket).
bool output_exists(const fs::path& output, bool dangling = false) {
    if (in_store(output)) {
        const s3::Url url = s3::parse_url(output.string());
        return store_client(url.str())->head_object(url).has_value();
    }
    std::error_code ec;
    return fs::exists(output, ec) || (dangling && fs::is_symlink(output, ec));
}

// The directory an output file goes into (an object needs none).
void make_parent(const fs::path& output) {
    if (!in_store(output) && !output.parent_path().empty()) fs::create_directories(output.parent_path());
}

// Empty when the output opens and verifies; else the first finding, one
// line, naming it `name` (`path` may be the unpublished file's /proc path).
// Without `digests` (--no-digests) an output without digests verifies.
// Its pages leave the page cache as they are checked, as they did when
// written: a batch over an archive does not evict the host's files.
std::string verify_output(const fs::path& path, const fs::path& name, bool digests,
                          const PagesReadBack* read_back = nullptr) {
    std::vector<Finding> findings;
    try {
        VerifyOptions vo;
        vo.allow_no_digests = !digests;
        vo.drop_behind = true;
        vo.pages_read_back = read_back;
        findings = DumpReader::open(path).verify(vo);
    } catch (const Error& e) {
        // The reader names the path it opened (/proc/self/fd/N before publication).
        throw Error(e.message(), name.string(), e.offset(), e.sys_errno());
    }
    if (findings.empty()) return {};
    const Finding& f = findings.front();
    return "output " + name.string() + " does not verify: " + f.check + " (" + f.structure + "): " + f.message;
}

// Empty when `output` records (SOURCE_ID=) the identity `input` has now;
// else why the output cannot be taken for the conversion of this input.
std::string not_from(const fs::path& output, const fs::path& input, const OpenOptions& open) {
    struct stat st {};
    if (in_store(output)) {
        // An object: read where it lies (its head only).
    } else if (::stat(output.c_str(), &st) != 0) {
        return "output " + output.string() + " cannot be examined: " + std::strerror(errno);
    } else if (!S_ISREG(st.st_mode)) {  // never open a FIFO: that would wait for a writer
        return "output " + output.string() + " exists but is not a regular file: it is " +
               util::file_kind(st.st_mode);
    }
    std::optional<std::string> recorded;
    try {
        recorded = DumpReader::open(output).domain().get(keys::kSourceId);
    } catch (const Error& e) {
        return "output " + output.string() + " exists but is not a readable dump (" + e.message() + ")";
    }
    const auto id = recorded ? SourceIdentity::parse(*recorded) : std::nullopt;
    if (!id)
        return "output " + output.string() + " exists but does not record which file it was converted from (" +
               (recorded ? "SOURCE_ID=" + *recorded + " is not understood" : "no SOURCE_ID=") +
               "), so it is not taken for this file's conversion";
    if (auto diff = identify_source(input, open).difference_from(*id); !diff.empty())
        return "output " + output.string() + " exists but was converted from another file or an older version of it (" +
               diff + ")";
    return {};
}

// Deletes the source once its output is shown to come from it.
void remove_source(const Job& job, FileReport& rep, const OpenOptions& open) {
    std::error_code ec;
    if (auto why = not_from(job.output, job.input, open); !why.empty()) {
        rep.result = Result::failed;
        rep.error = job.input.string() + ": not removed: " + why;
        return;
    }
    fs::remove(job.input, ec);
    if (ec) {
        rep.result = Result::failed;
        rep.error = job.input.string() + ": converted and verified, but the source could not be removed: " +
                    ec.message();
    }
}

class Batch {
public:
    Batch(const Options& o, std::vector<Job> jobs) : o_(o), jobs_(std::move(jobs)), reports_(jobs_.size()) {}

    std::vector<FileReport> run() {
        prepare();
        for (size_t i : pending_) total_bytes_ += jobs_[i].size;
        unsigned n = std::min<unsigned>(o_.jobs, static_cast<unsigned>(std::max<size_t>(pending_.size(), 1)));
        current_ = std::vector<std::atomic<uint64_t>>(n);
        std::vector<std::thread> workers;
        for (unsigned w = 0; w < n; ++w) workers.emplace_back([this, w] { work(w); });
        for (auto& t : workers) t.join();
        bar_.finish();
        return std::move(reports_);
    }

private:
    // Before anything is written: each file's format from its first bytes
    // (files that are no Xen dump, or v1 already, are skipped), then the
    // outputs two files would share. What is settled here is reported as is.
    void prepare() {
        for (Job& job : jobs_) {
            if (job.settled) continue;
            try {
                if (job.input == kStdin) {  // not read before its turn: a flattened stream or nothing
                    refuse_as_is(job);
                    continue;
                }
                // An encrypted input is sniffed through its plaintext: it needs a key.
                cli::require_key(job.input, o_.open);
                const auto fmt = sniff_format(job.input, o_.open);
                job.format = std::string(to_string(fmt));
                if (fmt == InputFormat::flattened) {
                    // The compact file it carries, beside it by default.
                    if (!o_.output && !o_.output_dir) job.output = output_beside(o_, job.input, true);
                    refuse_as_is(job);
                }
                if (job.settled) continue;
                if (fmt == InputFormat::v1 && !o_.kdump)
                    not_converted(job, "already current (v1)");
                else if (fmt == InputFormat::kdump)
                    not_converted(job, "already compact (kdump)");
                else if (fmt == InputFormat::unknown)
                    not_converted(job, "not a Xen dump: neither an xc_core magic nor an ELF core file");
                else if (o_.recipients.empty() && !o_.decrypt && encryption_of(job.input))
                    // Plaintext never on a disk unless the operator asks (xen-dump-convert(1)).
                    job.settle(Result::failed, job.input.string() +
                                                   ": is encrypted: its output would be its plaintext on a disk; "
                                                   "encrypt it (-r RECIPIENT, -R FILE) or give --decrypt");
            } catch (const cli::KeyNeeded& e) {
                job.settle(Result::failed, named(job, e.what()));
                job.needs_key = true;
            } catch (const std::exception& e) {
                job.settle(Result::failed, named(job, e.what()));
            }
        }
        refuse_shared_outputs(jobs_);
        for (size_t i = 0; i < jobs_.size(); ++i) {
            const Job& job = jobs_[i];
            if (!job.settled) {
                pending_.push_back(i);
                continue;
            }
            FileReport& rep = reports_[i];
            rep.path = job.input.string();
            rep.format = job.format;
            rep.result = *job.settled;
            rep.needs_key = job.needs_key;
            (rep.result == Result::failed ? rep.error : rep.reason) = job.why;
            if (rep.result == Result::failed) report_failure(rep);
        }
    }

    // A flattened input is rearranged as it is (rearrange_flattened): what
    // would change its bytes is refused.
    void refuse_as_is(Job& job) const {
        const std::string what = job.input == kStdin ? "standard input" : job.input.string();
        if (!o_.recipients.empty() || o_.dump_level != 0)
            job.settle(Result::failed,
                       what + ": a flattened file is rearranged as it is, into the file it carries: not " +
                           (o_.recipients.empty() ? "filtered (--dump-level)" : "encrypted (-r, -R)") +
                           "; rearrange it, then convert the result");
    }

    // A file that is not converted: skipped with the reason in a batch, but
    // a failure when it was named with -o FILE (the FILE asked for is not
    // written, and the exit status must say so).
    void not_converted(Job& job, const std::string& why) const {
        if (o_.output && job.named)
            job.settle(Result::failed, job.input.string() + ": cannot be converted: " + why + "; nothing written to " +
                                           *o_.output);
        else
            job.settle(Result::skipped, why);
    }

    void work(unsigned worker) {
        for (size_t k = next_++; k < pending_.size(); k = next_++) {
            const size_t i = pending_[k];
            reports_[i] = convert_one(jobs_[i], worker);
            finished_bytes_ += jobs_[i].size;
            current_[worker] = 0;
            show_progress();
            if (reports_[i].result == Result::failed) report_failure(reports_[i]);
        }
    }

    void report_failure(const FileReport& rep) {
        std::lock_guard lock(print_mutex_);
        if (bar_.enabled()) std::fputs("\r\033[K", stderr);
        std::fprintf(stderr, "xen-dump-convert: %s\n", rep.error.c_str());
    }

    // A warning (a dump level the guest cannot have): printed even with -q.
    void report_warning(const std::string& w) {
        std::lock_guard lock(print_mutex_);
        if (bar_.enabled()) std::fputs("\r\033[K", stderr);
        std::fprintf(stderr, "xen-dump-convert: warning: %s\n", w.c_str());
    }

    // Errors from lower layers that do not name the file get its name.
    static std::string named(const Job& job, std::string error) {
        const std::string path = job.input == kStdin ? "standard input" : job.input.string();
        return error.find(path) == std::string::npos ? path + ": " + error : error;
    }

    void show_progress() {
        uint64_t done = finished_bytes_;
        for (auto& c : current_) done += c;
        std::lock_guard lock(print_mutex_);
        bar_.update(std::min(done, total_bytes_), total_bytes_);
    }

    FileReport convert_one(const Job& job, unsigned worker) {
        FileReport rep;
        rep.path = job.input.string();
        rep.format = job.format;
        try {
            ConvertOptions co;
            co.system_map = o_.system_map;
            co.allow_inferred = o_.allow_inferred;
            co.write.digests = o_.digests;
            co.write.threads = o_.threads;
            co.kdump = o_.kdump;
            co.compression = o_.compression;
            co.dump_level = o_.dump_level;
            co.write.recipients = o_.recipients;
            co.open = o_.open;
            co.write.on_warning = [this, &job](const std::string& w) { report_warning(named(job, w)); };
            co.write.on_progress = [this, &job, worker](const WriteProgress& p) {
                if (p.pages_total) current_[worker] = job.size * p.pages_done / p.pages_total;
                show_progress();
            };
            if (job.input == kStdin) return from_stdin(job, co, rep);
            const bool exists = output_exists(job.output);
            if (exists && !o_.recipients.empty())
                throw Error("output " + job.output.string() +
                                " exists, and an encrypted output cannot be read back (no private key) to show it "
                                "comes from this file; not overwritten: move it away to convert this file",
                            job.input.string());
            if (exists) {
                // A previous run's output: done if it came from this very
                // file and verifies; anything else is left alone, and so is
                // the source.
                if (auto other = not_from(job.output, job.input, o_.open); !other.empty())
                    throw Error(other + "; not overwritten: move it away to convert this file", job.input.string());
                if (auto bad = verify_output(job.output, job.output, o_.digests); !bad.empty())
                    throw Error(bad, job.input.string());
                rep.result = Result::skipped;
                rep.reason = "already converted";
                rep.output = job.output.string();
                if (o_.remove_source && !o_.dry_run) remove_source(job, rep, o_.open);
                return rep;
            }
            ConversionPlan plan;
            if (o_.dry_run) {
                plan = plan_conversion(job.input, co);
                rep.result = Result::skipped;
                rep.reason = "dry run: would write " + job.output.string();
            } else {
                make_parent(job.output);
                // Verified while it is made durable; one that does not verify
                // is never published. (Not an encrypted one: the writer
                // cannot read it back, WriteOptions::recipients. Not an
                // object: streamed, it is complete only once it appears.)
                if (o_.recipients.empty() && !in_store(job.output))
                    co.write.check_before_publish = [&job, digests = o_.digests](const fs::path& unpublished,
                                                                                 const VerifyOptions& read_back) {
                        if (auto bad = verify_output(unpublished, job.output, digests, read_back.pages_read_back);
                            !bad.empty())
                            throw Error(bad, job.input.string());
                    };
                plan = convert_file(job.input, job.output, co);
                rep.result = Result::converted;
                rep.output = job.output.string();
            }
            rep.layout = plan.layout;
            rep.pages = plan.pages;
            rep.inferred = plan.inferred;
            if (rep.result == Result::converted && o_.remove_source) remove_source(job, rep, o_.open);
        } catch (const std::exception& e) {
            rep.result = Result::failed;
            rep.error = named(job, e.what());
        }
        return rep;
    }

    // `xen-dump-convert - -o FILE`: the flattened stream on standard input
    // rearranged into FILE, verified before it appears, as any output.
    FileReport& from_stdin(const Job& job, ConvertOptions& co, FileReport& rep) {
        if (output_exists(job.output, true))
            throw Error("output " + job.output.string() +
                        " exists; standard input is rearranged into a new file only: move it away");
        if (o_.dry_run) {
            rep.result = Result::skipped;
            rep.reason = "dry run: would rearrange standard input into " + job.output.string();
            return rep;
        }
        make_parent(job.output);
        co.write.check_before_publish = [&job, digests = o_.digests](const fs::path& unpublished, const VerifyOptions&) {
            if (auto bad = verify_output(unpublished, job.output, digests); !bad.empty())
                throw Error(bad, "standard input");
        };
        const ConversionPlan plan = rearrange_flattened(STDIN_FILENO, "standard input", job.output, co);
        rep.result = Result::converted;
        rep.output = job.output.string();
        rep.layout = plan.layout;
        rep.pages = plan.pages;
        return rep;
    }

    const Options& o_;
    std::vector<Job> jobs_;
    std::vector<FileReport> reports_;
    std::vector<size_t> pending_;  // jobs to convert (the rest were settled by prepare)
    std::atomic<size_t> next_{0};
    uint64_t total_bytes_ = 0;
    std::atomic<uint64_t> finished_bytes_{0};
    std::vector<std::atomic<uint64_t>> current_;
    std::mutex print_mutex_;
    cli::ProgressBar bar_{"converting"};
};

}  // namespace

std::vector<FileReport> run_batch(const Options& o) {
    auto jobs = collect_jobs(o);
    if (o.output && jobs.size() != 1)
        throw Error("-o names one output but the inputs hold " + std::to_string(jobs.size()) + " files");
    return Batch(o, std::move(jobs)).run();
}

}  // namespace xendump::convert
