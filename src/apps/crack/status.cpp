// SPDX-License-Identifier: MIT
// crack_status and crack_forget: reading and deleting the job nodes of a hash.
#include "apps/crack/run.hpp"
#include "apps/crack/words.hpp"

#include <algorithm>
#include <utility>

namespace asio = boost::asio;

namespace zkd::crack {

asio::awaitable<zkco::result<std::vector<crack_job_info>>> crack_status(
    zkco::client& zk, std::string hash
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
        out.push_back(std::move(info));
    }
    std::sort(out.begin(), out.end(), [](const crack_job_info& a, const crack_job_info& b) {
        const std::int64_t ta = a.job ? a.job->created_ms : 0;
        const std::int64_t tb = b.job ? b.job->created_ms : 0;
        return ta != tb ? ta < tb : a.id < b.id;
    });
    co_return out;
}

asio::awaitable<zkco::result<crack_forgotten>> crack_forget(zkco::client& zk, std::string hash) {
    auto jobs = co_await crack_status(zk, std::move(hash));
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
