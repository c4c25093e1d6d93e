#include "batch.hpp"

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "cli.hpp"
#include "inputs.hpp"
#include "legacy/conversion.hpp"
#include "xendump/error.hpp"
#include "xendump/reader.hpp"

namespace xendump::convert {
namespace fs = std::filesystem;

namespace {

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

void remove_source(const Job& job, FileReport& rep) {
    std::error_code ec;
    fs::remove(job.input, ec);
    if (ec) {
        rep.result = Result::failed;
        rep.error = job.input.string() + ": converted and verified, but the source could not be removed: " +
                    ec.message();
    }
}

class Batch {
public:
    Batch(const Options& o, std::vector<Job> jobs) : o_(o), jobs_(std::move(jobs)), reports_(jobs_.size()) {
        for (const auto& j : jobs_) total_bytes_ += j.size;
    }

    std::vector<FileReport> run() {
        unsigned n = std::min<unsigned>(o_.jobs, static_cast<unsigned>(std::max<size_t>(jobs_.size(), 1)));
        current_ = std::vector<std::atomic<uint64_t>>(n);
        std::vector<std::thread> workers;
        for (unsigned w = 0; w < n; ++w) workers.emplace_back([this, w] { work(w); });
        for (auto& t : workers) t.join();
        bar_.finish();
        return std::move(reports_);
    }

private:
    void work(unsigned worker) {
        for (size_t i = next_++; i < jobs_.size(); i = next_++) {
            reports_[i] = convert_one(jobs_[i], worker);
            finished_bytes_ += jobs_[i].size;
            current_[worker] = 0;
            show_progress();
            if (reports_[i].result == Result::failed) {
                std::lock_guard lock(print_mutex_);
                if (bar_.enabled()) std::fputs("\r\033[K", stderr);
                std::fprintf(stderr, "xen-dump-convert: %s\n", reports_[i].error.c_str());
            }
        }
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
        rep.format = "unknown";
        try {
            auto fmt = legacy::sniff_format(job.input);
            rep.format = std::string(legacy::to_string(fmt));
            if (fmt == legacy::InputFormat::v1) {
                rep.result = Result::skipped;
                rep.reason = "already current (v1)";
                return rep;
            }
            legacy::ConvertOptions co;
            co.system_map = o_.system_map;
            co.allow_inferred = o_.allow_inferred;
            co.digests = o_.digests;
            co.on_progress = [this, &job, worker](const WriteProgress& p) {
                if (p.pages_total) current_[worker] = job.size * p.pages_done / p.pages_total;
                show_progress();
            };
            std::error_code ec;
            if (fs::exists(job.output, ec)) {
                // A previous run's output: done if it verifies, else leave it alone.
                if (auto bad = verify_output(job.output, job.output, o_.digests); !bad.empty())
                    throw Error(bad, job.input.string());
                rep.result = Result::skipped;
                rep.reason = "already converted";
                rep.output = job.output.string();
                if (o_.remove_source && !o_.dry_run) remove_source(job, rep);
                return rep;
            }
            legacy::Plan plan;
            if (o_.dry_run) {
                plan = legacy::plan_conversion(job.input, co);
                rep.result = Result::skipped;
                rep.reason = "dry run: would write " + job.output.string();
            } else {
                if (!job.output.parent_path().empty()) fs::create_directories(job.output.parent_path());
                // Verified while it is made durable; one that does not verify
                // is never published.
                co.check_output = [&job, digests = o_.digests](const fs::path& unpublished,
                                                               const PagesReadBack& read_back) {
                    if (auto bad = verify_output(unpublished, job.output, digests, &read_back); !bad.empty())
                        throw Error(bad, job.input.string());
                };
                plan = legacy::convert_file(job.input, job.output, co);
                rep.result = Result::converted;
                rep.output = job.output.string();
            }
            rep.layout = plan.layout;
            rep.pages = plan.pages;
            rep.inferred = plan.inferred;
            if (rep.result == Result::converted && o_.remove_source) remove_source(job, rep);
        } catch (const std::exception& e) {
            rep.result = Result::failed;
            rep.error = e.what();
            // Errors from lower layers that do not name the file get its name.
            if (rep.error.find(rep.path) == std::string::npos) rep.error = rep.path + ": " + rep.error;
        }
        return rep;
    }

    const Options& o_;
    std::vector<Job> jobs_;
    std::vector<FileReport> reports_;
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
