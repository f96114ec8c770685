// SPDX-License-Identifier: MIT
// crack_status and crack_forget: reading and deleting the job nodes of a hash.
#include "apps/crack/fold.hpp"
#include "apps/crack/run.hpp"
#include "apps/crack/words.hpp"
#include "protocol/ids.hpp"

#include <algorithm>
#include <utility>

namespace asio = boost::asio;

namespace zkd::crack {

namespace {

/// Folds the results of `info`'s open partitions into it, as a follower would (apply, then
/// settle) and, when that changes the job, writes it back if unchanged since read, then
/// deletes the results folded. A job nobody follows thus still ends when its partitions do.
/// A write that loses to another participant changes nothing there: `info` then shows the
/// fold, with the version read.
asio::awaitable<zkco::result<void>> catch_up(
    zkco::client& zk, const protocol::layout& l, crack_job_info& info
) {
    if (!info.job || info.job->state != crack_state::running) {
        co_return zkco::result<void>();
    }
    auto& j = *info.job;
    std::vector<partition_report> reports;
    for (std::size_t i = 0; i < j.tasks.size(); ++i) {
        if (j.partitions[i] != crack_partition::open) {
            continue;
        }
        auto node = co_await zk.get(l.result(j.tasks[i]));
        if (node) {
            reports.push_back(partition_report{i, j.tasks[i], std::move(node->data)});
        } else if (node.error() != zkco::errc::no_node) {
            co_return node.error();
        }  // no result yet (or consumed: a follower's scan tells a vanished task)
    }
    const std::int64_t now = protocol::now_ms();
    bool changed = false;
    for (const auto& report : reports) {
        changed = apply(j, report, now) || changed;
    }
    changed = settle(j, now) || changed;
    if (!changed) {
        co_return zkco::result<void>();
    }
    auto written =
        co_await zk.set(std::string(crack_jobs_dir) + "/" + info.id, encode(j), info.version);
    if (!written) {
        if (written.error() == zkco::errc::bad_version || written.error() == zkco::errc::no_node) {
            co_return zkco::result<void>();
        }
        co_return written.error();
    }
    info.version = written->version;
    for (const auto& report : reports) {
        auto removed = co_await zk.remove(l.result(report.task), zkco::any_version);
        if (!removed && removed.error() != zkco::errc::no_node) {
            co_return removed.error();
        }
    }
    co_return zkco::result<void>();
}

}  // namespace

asio::awaitable<zkco::result<std::vector<crack_job_info>>> crack_status(
    zkco::client& zk, protocol::layout l, std::string hash
) {
    const auto normalized = normalize_hash(hash);
    if (!normalized) {
        co_return zkco::error_code(crack_errc::bad_hash);
    }
    const std::string dir(crack_jobs_dir);
    std::vector<crack_job_info> out;
    auto kids = co_await zk.get_children(dir);
    if (!kids) {
        if (kids.error() == zkco::errc::no_node) {
            co_return out;
        }
        co_return kids.error();
    }
    const std::string prefix = "crack-" + *normalized + "-";
    for (const auto& name : kids->names) {
        if (name.rfind(prefix, 0) != 0) {
            continue;
        }
        std::string path = dir;
        path += '/';
        path += name;
        auto node = co_await zk.get(std::move(path));
        if (!node) {
            if (node.error() == zkco::errc::no_node) {
                continue;
            }
            co_return node.error();
        }
        crack_job_info info;
        info.id = name;
        info.version = node->stat.version;
        auto doc = decode_crack_job(node->data);
        if (doc) {
            info.job = std::move(*doc);
        } else {
            info.problem = doc.error().message;
        }
        auto caught_up = co_await catch_up(zk, l, info);
        if (!caught_up) {
            co_return caught_up.error();
        }
        out.push_back(std::move(info));
    }
    std::sort(out.begin(), out.end(), [](const crack_job_info& a, const crack_job_info& b) {
        const std::int64_t ta = a.job ? a.job->created_ms : 0;
        const std::int64_t tb = b.job ? b.job->created_ms : 0;
        return ta != tb ? ta < tb : a.id < b.id;
    });
    co_return out;
}

asio::awaitable<zkco::result<crack_forgotten>> crack_forget(
    zkco::client& zk, protocol::layout l, std::string hash
) {
    auto jobs = co_await crack_status(zk, l, std::move(hash));
    if (!jobs) {
        co_return jobs.error();
    }
    crack_forgotten out;
    for (auto& info : *jobs) {
        if (info.job && info.job->state == crack_state::running) {
            out.kept.push_back(std::move(info));
            continue;
        }
        auto removed =
            co_await zk.remove(std::string(crack_jobs_dir) + "/" + info.id, info.version);
        if (removed) {
            out.removed.push_back(std::move(info));
        } else if (removed.error() == zkco::errc::bad_version) {
            out.kept.push_back(std::move(info));  // changed meanwhile (a retry started)
        } else if (removed.error() != zkco::errc::no_node) {
            co_return removed.error();
        }
    }
    co_return out;
}

}  // namespace zkd::crack
