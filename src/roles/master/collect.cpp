// SPDX-License-Identifier: MIT
// T8: results nobody consumed deleted after the retention, and empty client directories
// (docs/protocol.md §6 T8).
#include "protocol/ids.hpp"
#include "roles/inspect.hpp"
#include "roles/master/master_session.hpp"
#include "roles/txn_io.hpp"
#include "zkco/read_batch.hpp"

#include <spdlog/spdlog.h>

namespace zkd::roles::detail {

/// T8, every gc_interval: lists /results (the result shards and the clients' directories,
/// list_result_dirs), reads the stat of up to gc_dirs_per_sweep of them at once (the next
/// sweep goes on after the last), lists again only those whose children changed since
/// they were last listed (cversion), reads the ctime of each result not seen before, and
/// deletes the results older than result_retention. A client's
/// directory (never a result shard) whose stat shows no children, and a ctime and mtime
/// both older than the retention, is deleted too, at the version that stat showed: a
/// result created in it since fails the delete (not_empty), and so does a change to its
/// data (bad_version); the next sweep looks again, as after any failure.
asio::awaitable<void> master_session::collect_garbage() {
    asio::steady_timer timer(zk_.get_executor());
    std::map<std::string, result_dir_seen> known;  // directory -> what the last sweep saw
    std::string swept_to;                          // the last directory the last sweep looked at
    for (;;) {
        timer.expires_after(opts_.gc_interval);
        auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        if (ec || stopping()) {
            co_return;
        }
        const std::int64_t cutoff = protocol::now_ms() - opts_.result_retention.count();
        auto all_dirs = co_await list_result_dirs(zk_);
        if (!all_dirs) {
            continue;  // the next sweep looks again
        }
        std::sort(all_dirs->begin(), all_dirs->end());
        auto window = sweep_window(*all_dirs, swept_to, opts_.gc_dirs_per_sweep);
        swept_to = std::move(window.next_after);
        const std::vector<std::string>& in_window = window.dirs;
        const auto* dirs = &in_window;
        auto stats = co_await zkco::exists_all(zk_, *dirs);
        // What is known of the directories this sweep does not look at stays known.
        std::map<std::string, result_dir_seen> now;
        for (const auto& dir : *all_dirs) {
            if (auto it = known.find(dir);
                it != known.end() && !std::binary_search(in_window.begin(), in_window.end(), dir)) {
                now.insert(known.extract(it));
            }
        }
        std::vector<std::string> changed;
        std::vector<std::pair<std::string, zkco::stat>> empty_clients;
        for (std::size_t i = 0; i < dirs->size(); ++i) {
            if (!stats[i] || !*stats[i]) {
                continue;  // gone, or not read: listed afresh when seen again
            }
            const auto& st = **stats[i];
            const auto& dir = (*dirs)[i];
            const auto name = std::string_view(dir).substr(dir.rfind('/') + 1);
            if (protocol::layout::is_client_results(name) && st.num_children == 0 &&
                st.ctime < cutoff && st.mtime < cutoff) {
                empty_clients.emplace_back(dir, st);
                continue;
            }
            auto& seen = now[dir];
            if (auto it = known.find(dir); it != known.end()) {
                seen = std::move(it->second);
                if (seen.cversion == st.cversion) {
                    continue;  // no child came or went since it was listed
                }
            }
            seen.cversion = st.cversion;
            changed.push_back(dir);
        }
        known = co_await list_results(std::move(now), changed);
        std::size_t expired = 0;
        for (const auto& [dir, seen] : known) {
            if (!std::binary_search(in_window.begin(), in_window.end(), dir)) {
                continue;  // not looked at now: its results are as the sweep that did saw
            }
            for (const auto& [path, ctime] : seen.results) {
                if (ctime >= cutoff) {
                    continue;
                }
                ++expired;
                send(protocol::collect_ops(path), sent::collect{false});
            }
        }
        for (const auto& [dir, st] : empty_clients) {
            send(protocol::collect_dir_ops(dir, st.version), sent::collect{true});
        }
        if (expired > 0 || !empty_clients.empty()) {
            spdlog::info(
                "master: deleting {} result(s) nobody consumed and {} empty client "
                "dir(s), older than {} s",
                expired, empty_clients.size(), opts_.result_retention.count() / 1000
            );
        }
    }
}

/// Lists the directories `changed` (at once) into `dirs`, reading the ctime of each result
/// not known before (at once); a result already known keeps the ctime read then. A
/// directory not listed, or whose results were not all read, is left out (looked at
/// afresh by the next sweep).
asio::awaitable<std::map<std::string, master_session::result_dir_seen>>
master_session::list_results(
    std::map<std::string, result_dir_seen> dirs, const std::vector<std::string>& changed
) {
    zkco::read_batch batch(zk_);
    std::vector<zkco::read_batch::slot<zkco::children>> lists;
    lists.reserve(changed.size());
    for (const auto& dir : changed) {
        lists.push_back(batch.get_children(dir));
    }
    if (auto all = co_await batch.wait(); !all) {
        for (const auto& dir : changed) {
            dirs.erase(dir);  // cancelled: the slots may still be written to
        }
        co_return dirs;
    }
    std::vector<std::string> fresh;
    std::vector<std::string> fresh_dir;
    for (std::size_t i = 0; i < changed.size(); ++i) {
        auto& seen = dirs[changed[i]];
        if (!*lists[i]) {
            dirs.erase(changed[i]);
            continue;
        }
        auto before = std::move(seen.results);
        seen.results.clear();
        for (const auto& name : (*lists[i])->names) {
            auto path = zkco::join_path(changed[i], name);
            if (auto it = before.find(path); it != before.end()) {
                seen.results.insert(*it);
            } else {
                fresh.push_back(std::move(path));
                fresh_dir.push_back(changed[i]);
            }
        }
    }
    auto stats = co_await zkco::exists_all(zk_, fresh);
    for (std::size_t i = 0; i < fresh.size(); ++i) {
        auto it = dirs.find(fresh_dir[i]);
        if (it == dirs.end()) {
            continue;
        }
        if (!stats[i]) {
            dirs.erase(it);  // not read: the whole directory is listed again next time
        } else if (*stats[i]) {
            it->second.results[fresh[i]] = (*stats[i])->ctime;
        }
    }
    co_return dirs;
}

void master_session::answered(
    sent::collect& s, zkco::error_code ec, const protocol::txn_answer& /*r*/
) {
    if (!ec) {
        ++(s.dir ? stats_->collected_dirs : stats_->collected);
    }
}

}  // namespace zkd::roles::detail
