// SPDX-License-Identifier: MIT
// zkd crack: a distributed MD5 preimage search (apps/crack/run.hpp, docs/crack.md).
#include "apps/crack/run.hpp"
#include "apps/crack/words.hpp"
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/session.hpp"
#include "zkco/deadline.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace zkd::cli {

namespace {

constexpr const char* crack_help =
    R"(usage: zkd crack HASH (--wordlist FILE | --charset SET --max-length N) [options]
       zkd crack --status HASH
       zkd crack --forget HASH

Finds a string whose MD5 is HASH (32 hex digits) with the whole cluster: the search is split
into partitions (md5-crack tasks) spread over the workers. As soon as one partition finds
the preimage it is printed (alone on stdout) and the other partitions are cancelled, running
ones mid-way. Two clients cracking the same HASH over the same search share one job (the
work is done once); a client that stops leaves the job running, and running the same command
again follows it. Partitions of a worker that dies are redone elsewhere.

Exit codes: 0 found, 1 not found (or partitions failed: listed), 2 bad input, 3 ZooKeeper
unreachable, 4 --timeout ran out (the job keeps running), 5 no job for HASH (--status,
--forget).

  --wordlist FILE         try each line of FILE (UTF-8; invalid lines are skipped, with a
                          warning); the list travels in the tasks: at most about 800 KB
  --charset SET           brute force over SET: a name (lower, upper, digits, alpha, alnum,
                          hex, printable, or several joined by '+', e.g. lower+digits) or the
                          characters themselves
  --max-length N          longest candidate (1-16), with --charset
  --min-length N          shortest candidate (default 1)
  --partitions N          number of tasks (default: 4 per worker slot, 64 to 900)
  --priority P            of the partition tasks, 0-9 (default 5)
  --partition-timeout DUR time limit of each partition (default none)
  --timeout DUR           stop following after DUR (exit 4; the job goes on)
  --status                only say whether a job for HASH is running, found or failed
  --forget                delete the finished jobs of HASH (found, not found, failed; a
                          running one is kept): job nodes stay until forgotten
  --no-progress           no progress line (it is shown only when stderr is a terminal)
  --zk, --namespace, --connect-timeout, --user, --password, --password-file, --config
                          as for every command (see 'zkd submit --help')
)";

std::string human_count(double n) {
    char buf[32];
    if (n >= 1e9) {
        std::snprintf(buf, sizeof buf, "%.2fG", n / 1e9);
    } else if (n >= 1e6) {
        std::snprintf(buf, sizeof buf, "%.2fM", n / 1e6);
    } else if (n >= 1e3) {
        std::snprintf(buf, sizeof buf, "%.1fk", n / 1e3);
    } else {
        std::snprintf(buf, sizeof buf, "%.0f", n);
    }
    return buf;
}

/// "[#####.....] 12/64 partitions, 3.2M of 321M tried, 6.5M/s".
void draw_progress(const crack::crack_progress& p) {
    constexpr int width = 30;
    const int filled = p.total > 0 ? p.done * width / p.total : 0;
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(width, '.');
    std::fprintf(
        stderr, "\r[%s] %d/%d partitions, %s of %s tried, %s/s   ", bar.c_str(), p.done, p.total,
        human_count(static_cast<double>(p.tried)).c_str(),
        human_count(static_cast<double>(p.size)).c_str(), human_count(p.rate).c_str()
    );
    std::fflush(stderr);
}

void print_failed(const std::vector<crack::crack_failed_partition>& failed) {
    for (const auto& f : failed) {
        std::fprintf(
            stderr, "  partition %d (task %s): %s %s%s%s\n", f.partition, printable(f.task).c_str(),
            std::string(protocol::to_string(f.state)).c_str(), printable(f.code).c_str(),
            f.message.empty() ? "" : ": ", printable(f.message).c_str()
        );
    }
}

/// Says why reading (or deleting) the jobs failed; the exit code for it.
int jobs_failed(const zkco::error_code& ec, const std::string& what) {
    if (ec.category() == crack::crack_category()) {
        complain(ec.message());  // a bad hash
        return exit_usage;
    }
    complain(what + ": " + ec.message());
    return exit_failed;
}

int print_status(const std::vector<crack::crack_job_info>& jobs, const std::string& hash) {
    if (jobs.empty()) {
        std::printf("no job for %s\n", hash.c_str());
        return exit_not_found;
    }
    for (const auto& info : jobs) {
        if (!info.job) {
            std::printf(
                "%s: unreadable (%s)\n", printable(info.id).c_str(), printable(info.problem).c_str()
            );
            continue;
        }
        const auto& j = *info.job;
        std::printf(
            "%s: %s, %d/%d partitions, %s of %s tried", printable(info.id).c_str(),
            std::string(crack::to_string(j.state)).c_str(), j.done(), j.total(),
            human_count(static_cast<double>(j.tried)).c_str(),
            human_count(static_cast<double>(j.size)).c_str()
        );
        if (j.preimage) {
            std::printf(", preimage: %s", printable(*j.preimage).c_str());
        }
        std::printf("\n");
        print_failed(j.failed);
    }
    return exit_ok;
}

}  // namespace

int cmd_crack(int argc, char** argv) {
    const auto a = args::parse(
        argc, argv, 2,
        cluster_options(
            {{"--wordlist", true, false},
             {"--charset", true, false},
             {"--max-length", true, false},
             {"--min-length", true, false},
             {"--partitions"},
             {"--priority"},
             {"--partition-timeout"},
             {"--timeout", true, false},
             {"--status", false, false},
             {"--forget", false, false},
             {"--no-progress", false, false}}
        )
    );
    if (a.has("--help")) {
        std::fputs(crack_help, stdout);
        return exit_ok;
    }
    if (a.positional.size() != 1) {
        throw usage_error("crack wants exactly one HASH (32 hex digits)");
    }
    crack::crack_spec spec;
    spec.hash = a.positional[0];
    const bool forget = a.has("--forget");
    if (forget && a.has("--status")) {
        throw usage_error("--status and --forget exclude each other");
    }
    const bool status_only = a.has("--status") || forget;
    if (status_only && (a.has("--wordlist") || a.has("--charset") || a.has("--max-length"))) {
        throw usage_error(
            std::string(forget ? "--forget" : "--status") + " takes only HASH, no search options"
        );
    }
    if (!status_only) {
        const bool words = a.has("--wordlist");
        const bool brute = a.has("--charset") || a.has("--max-length");
        if (words == brute) {
            throw usage_error("crack wants either --wordlist FILE or --charset SET --max-length N");
        }
        if (words) {
            const auto file = *a.value("--wordlist");
            std::ifstream in(file, std::ios::binary);
            if (!in) {
                throw usage_error("cannot read --wordlist '" + file + "'");
            }
            std::ostringstream text;
            text << in.rdbuf();
            std::size_t skipped = 0;
            spec.words = crack::parse_word_list(text.str(), &skipped);
            if (skipped > 0) {
                std::fprintf(
                    stderr, "zkd: %zu line(s) of %s are not UTF-8: skipped\n", skipped, file.c_str()
                );
            }
        } else {
            if (!a.has("--charset") || !a.has("--max-length")) {
                throw usage_error("brute force wants both --charset SET and --max-length N");
            }
            const auto set = *a.value("--charset");
            spec.charset = crack::named_charset(set).value_or(set);
            spec.max_len = static_cast<int>(a.number("--max-length", 0, 1, 16));
            spec.min_len = static_cast<int>(a.number("--min-length", 1, 1, 16));
        }
        spec.partitions = static_cast<int>(a.number("--partitions", 0, 1, 900));
        spec.priority = static_cast<int>(a.number(
            "--priority", protocol::default_priority, protocol::min_priority, protocol::max_priority
        ));
        spec.partition_timeout = a.duration("--partition-timeout", 0ms, 0ms, 24h);
        // Refuse a bad spec here, as a usage error, before touching the network.
        if (auto id = crack::crack_job_id(spec); !id) {
            throw usage_error(id.error().message());
        }
    }
    const auto timeout = a.duration("--timeout", 0ms, 0ms, 24h * 365);
    const bool progress = !a.has("--no-progress") && ::isatty(2) == 1;
    const auto target = target_of(a);
    return with_cluster(
        target, namespace_mode::existing,
        [&](zkco::client& zk, protocol::layout l) -> asio::awaitable<int> {
            if (forget) {
                auto done = co_await crack::crack_forget(zk, l, spec.hash);
                if (!done) {
                    co_return jobs_failed(done.error(), "cannot forget the jobs");
                }
                for (const auto& info : done->removed) {
                    std::printf(
                        "forgot %s (%s)\n", printable(info.id).c_str(),
                        info.job ? std::string(crack::to_string(info.job->state)).c_str()
                                 : "unreadable"
                    );
                }
                for (const auto& info : done->kept) {
                    std::printf(
                        "kept %s (%s)\n", printable(info.id).c_str(),
                        info.job ? std::string(crack::to_string(info.job->state)).c_str()
                                 : "changed meanwhile"
                    );
                }
                if (done->removed.empty() && done->kept.empty()) {
                    std::printf("no job for %s\n", spec.hash.c_str());
                    co_return exit_not_found;
                }
                co_return exit_ok;
            }
            if (status_only) {
                auto jobs = co_await crack::crack_status(zk, l, spec.hash);
                if (!jobs) {
                    co_return jobs_failed(jobs.error(), "cannot read the jobs");
                }
                co_return print_status(*jobs, spec.hash);
            }
            bool announced = false;
            std::function<void(const crack::crack_progress&)> on_progress =
                [&](const crack::crack_progress& p) {
                    if (!announced) {
                        announced = true;
                        std::fprintf(
                            stderr, "zkd: %s job %s: %d partitions, %s candidates\n",
                            p.joined ? "joined" : "started", p.job.c_str(), p.total,
                            human_count(static_cast<double>(p.size)).c_str()
                        );
                    }
                    if (progress) {
                        draw_progress(p);
                    }
                };
            auto op = crack::run_crack(zk, l, spec, std::move(on_progress));
            zkco::result<crack::crack_outcome> r = zkco::error_code(zkco::errc::operation_timeout);
            if (timeout.count() > 0) {
                r = co_await zkco::with_timeout(std::move(op), timeout);
            } else {
                r = co_await std::move(op);
            }
            if (progress && announced) {
                std::fputs("\n", stderr);
            }
            if (!r) {
                if (r.error() == zkco::errc::operation_timeout) {
                    complain(
                        "no answer within " + std::to_string(timeout.count()) +
                        " ms; the job keeps running: run the same command again to follow it"
                    );
                    co_return exit_timeout;
                }
                complain(r.error().message());
                co_return r.error().category() == crack::crack_category() ? exit_usage
                                                                          : exit_failed;
            }
            const auto& out = *r;
            const double secs = std::max(0.001, std::chrono::duration<double>(out.elapsed).count());
            switch (out.state) {
            case crack::crack_state::found:
                std::printf("%s\n", out.preimage.value_or("").c_str());
                std::fprintf(
                    stderr, "zkd: found in %.1f s (%s candidates tried, %d/%d partitions)\n", secs,
                    human_count(static_cast<double>(out.tried)).c_str(), out.done, out.total
                );
                co_return exit_ok;
            case crack::crack_state::not_found:
                std::fprintf(
                    stderr, "zkd: not found: all %s candidates tried in %.1f s\n",
                    human_count(static_cast<double>(out.size)).c_str(), secs
                );
                co_return exit_failed;
            default:
                std::fprintf(
                    stderr, "zkd: the search is incomplete: %zu partition(s) failed:\n",
                    out.failed.size()
                );
                print_failed(out.failed);
                co_return exit_failed;
            }
        }
    );
}

}  // namespace zkd::cli
