// SPDX-License-Identifier: MIT
// master_fsm (master_fsm.hpp): T8, results nobody consumed deleted after the retention, and
// empty client directories (docs/protocol.md §6 T8). A sweep reads the stat of up to
// gc_dirs_per_sweep directories below /results (the next sweep goes on after the last),
// lists again only those whose children changed since they were last listed (cversion),
// reads the ctime of each result not seen before, and deletes the results older than the
// retention. A client's directory (never a result shard) whose stat shows no children, and a
// ctime and mtime both older than the retention, is deleted too, at the version that stat
// showed: a result created in it since fails the delete (not_empty), and so does a change to
// its data (bad_version); the next sweep looks again, as after any failure.
#include "roles/master/detail/master_fsm.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace zkd::roles {

void master_fsm::handle(const master_saw::result_dirs_listed& e, clock::time_point /*now*/) {
    if (sweep_) {
        return;  // one sweep at a time
    }
    auto all = e.dirs;
    std::sort(all.begin(), all.end());
    auto window = sweep_window(all, swept_to_, opts_.gc_dirs_per_sweep);
    swept_to_ = std::move(window.next_after);
    sweep_ = result_sweep_state{};
    auto& s = *sweep_;
    s.cutoff = e.now_ms - opts_.result_retention.count();
    s.dirs = std::move(window.dirs);
    // What is known of the directories this sweep does not look at stays known.
    for (const auto& dir : all) {
        if (auto it = results_known_.find(dir);
            it != results_known_.end() && !std::binary_search(s.dirs.begin(), s.dirs.end(), dir)) {
            s.seen.insert(results_known_.extract(it));
        }
    }
    if (s.dirs.empty()) {
        end_sweep();
        return;
    }
    out_.emplace_back(master_do::stat_result_dirs{s.dirs});
}

void master_fsm::handle(const master_saw::result_dirs_stat& e, clock::time_point /*now*/) {
    if (!sweep_) {
        return;
    }
    auto& s = *sweep_;
    master_do::list_results changed;
    for (std::size_t i = 0; i < e.dirs.size() && i < e.stats.size(); ++i) {
        if (!e.stats[i]) {
            continue;  // gone, or not read: listed afresh when seen again
        }
        const auto& st = *e.stats[i];
        const auto& dir = e.dirs[i];
        const auto name = std::string_view(dir).substr(dir.rfind('/') + 1);
        if (protocol::layout::is_client_results(name) && st.num_children == 0 &&
            st.ctime < s.cutoff && st.mtime < s.cutoff) {
            s.empty_clients.emplace_back(dir, st.version);
            continue;
        }
        auto& seen = s.seen[dir];
        if (auto it = results_known_.find(dir); it != results_known_.end()) {
            seen = std::move(it->second);
            if (seen.cversion == st.cversion) {
                continue;  // no child came or went since it was listed
            }
        }
        seen.cversion = st.cversion;
        changed.dirs.push_back(dir);
    }
    if (changed.dirs.empty()) {
        end_sweep();
        return;
    }
    out_.emplace_back(std::move(changed));
}

void master_fsm::handle(const master_saw::results_listed& e, clock::time_point /*now*/) {
    if (!sweep_) {
        return;
    }
    auto& s = *sweep_;
    for (std::size_t i = 0; i < e.dirs.size(); ++i) {
        const auto& dir = e.dirs[i];
        if (i >= e.names.size() || !e.names[i]) {
            s.seen.erase(dir);  // not listed: looked at afresh by the next sweep
            continue;
        }
        auto& seen = s.seen[dir];
        auto before = std::move(seen.results);
        seen.results.clear();
        for (const auto& name : *e.names[i]) {
            std::string path = dir;
            path += '/';
            path += name;
            if (auto it = before.find(path); it != before.end()) {
                seen.results.insert(*it);  // known: the ctime read then
            } else {
                s.fresh.push_back(std::move(path));
                s.fresh_dir.push_back(dir);
            }
        }
    }
    if (s.fresh.empty()) {
        end_sweep();
        return;
    }
    out_.emplace_back(master_do::stat_results{s.fresh});
}

void master_fsm::handle(const master_saw::results_stat& e, clock::time_point /*now*/) {
    if (!sweep_) {
        return;
    }
    auto& s = *sweep_;
    for (std::size_t i = 0; i < s.fresh.size(); ++i) {
        const auto it = s.seen.find(s.fresh_dir[i]);
        if (it == s.seen.end()) {
            continue;
        }
        if (i >= e.reads.size() || e.reads[i].st == master_saw::result_read::status::error) {
            s.seen.erase(it);  // not read: the whole directory is listed again next time
        } else if (e.reads[i].st == master_saw::result_read::status::ok) {
            it->second.results[s.fresh[i]] = e.reads[i].ctime;
        }
    }
    end_sweep();
}

void master_fsm::end_sweep() {
    auto s = std::move(*sweep_);
    sweep_.reset();
    results_known_ = std::move(s.seen);
    std::size_t expired = 0;
    for (const auto& [dir, seen] : results_known_) {
        if (!std::binary_search(s.dirs.begin(), s.dirs.end(), dir)) {
            continue;  // not looked at now: its results are as the sweep that did saw
        }
        for (const auto& [path, ctime] : seen.results) {
            if (ctime >= s.cutoff) {
                continue;
            }
            ++expired;
            out_.emplace_back(master_do::collect{path, false, protocol::collect_ops(path)});
        }
    }
    for (const auto& [dir, version] : s.empty_clients) {
        out_.emplace_back(master_do::collect{dir, true, protocol::collect_dir_ops(dir, version)});
    }
    if (expired > 0 || !s.empty_clients.empty()) {
        spdlog::info(
            "master: deleting {} result(s) nobody consumed and {} empty client dir(s), older "
            "than {} s",
            expired, s.empty_clients.size(), opts_.result_retention.count() / 1000
        );
    }
}

void master_fsm::done(
    const master_do::collect& a, const master_txn_report& r, clock::time_point /*now*/
) {
    if (!r.answer.failed) {
        ++(a.dir ? stats_.collected_dirs : stats_.collected);
    }
}

result_sweep sweep_window(
    const std::vector<std::string>& sorted, const std::string& after, std::size_t most
) {
    auto from = std::upper_bound(sorted.begin(), sorted.end(), after);
    if (from == sorted.end()) {
        from = sorted.begin();
    }
    const auto n = std::min<std::size_t>(most, static_cast<std::size_t>(sorted.end() - from));
    result_sweep out;
    out.dirs.assign(from, from + static_cast<std::ptrdiff_t>(n));
    if (from + static_cast<std::ptrdiff_t>(n) != sorted.end()) {
        out.next_after = out.dirs.back();
    }
    return out;
}

}  // namespace zkd::roles
