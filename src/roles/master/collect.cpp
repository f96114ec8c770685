// SPDX-License-Identifier: MIT
// T8's reads (docs/protocol.md §6 T8): every gc_interval a sweep starts with a listing of
// /results (less the workflows' result directories); master_fsm decides what else to read and what
// to delete (master_fsm_collect.cpp).
#include "protocol/ids.hpp"
#include "roles/cluster/namespace.hpp"
#include "roles/master/detail/master_session.hpp"
#include "workflow/ids.hpp"
#include "zkco/read_batch.hpp"

namespace zkd::roles::detail {

namespace {

master_saw::node_stat stat_of(const zkco::stat& s) {
    return master_saw::node_stat{s.num_children, s.cversion, s.version, s.ctime, s.mtime};
}

}  // namespace

asio::awaitable<void> master_session::collect_garbage() {
    asio::steady_timer timer(zk_.get_executor());
    for (;;) {
        timer.expires_after(opts_.gc_interval);
        auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        if (ec || stopping()) {
            co_return;
        }
        auto dirs = co_await list_result_dirs(zk_);
        if (!dirs) {
            continue;  // the next sweep looks again
        }
        // A workflow's results are the workflow engine's to delete (W4, once the workflow
        // ended), however long it runs (docs/protocol.md §11.4 "Results").
        auto workflows = co_await zk_.get_children(workflow::workflows_dir());
        if (!workflows && workflows.error() != zkco::errc::no_node) {
            continue;  // the next sweep looks again
        }
        auto swept = workflows
                         ? workflow::without_workflow_results(std::move(*dirs), workflows->names)
                         : std::move(*dirs);
        take_answers();
        to_fsm(master_saw::result_dirs_listed{std::move(swept), protocol::now_ms()});
    }
}

void master_session::carry_out(master_do::stat_result_dirs& a) {
    group_.spawn(
        [this, dirs = std::move(a.dirs)]() mutable -> asio::awaitable<void> {
            auto stats = co_await zkco::exists_all(zk_, dirs);
            master_saw::result_dirs_stat read{std::move(dirs), {}};
            read.stats.reserve(stats.size());
            for (const auto& s : stats) {
                read.stats.push_back(s && *s ? std::optional(stat_of(**s)) : std::nullopt);
            }
            take_answers();
            to_fsm(read);
        },
        "gc"
    );
}

void master_session::carry_out(master_do::list_results& a) {
    group_.spawn(
        [this, dirs = std::move(a.dirs)]() mutable -> asio::awaitable<void> {
            zkco::read_batch batch(zk_);
            std::vector<zkco::read_batch::slot<zkco::children>> lists;
            lists.reserve(dirs.size());
            for (const auto& dir : dirs) {
                lists.push_back(batch.get_children(dir));
            }
            master_saw::results_listed listed{std::move(dirs), {}};
            listed.names.resize(listed.dirs.size());
            // Cancelled (the slots may still be written to): none counts as listed.
            if (auto all = co_await batch.wait(); all) {
                for (std::size_t i = 0; i < lists.size(); ++i) {
                    if (*lists[i]) {
                        listed.names[i] = std::move((*lists[i])->names);
                    }
                }
            }
            take_answers();
            to_fsm(listed);
        },
        "gc"
    );
}

void master_session::carry_out(master_do::stat_results& a) {
    group_.spawn(
        [this, paths = std::move(a.paths)]() mutable -> asio::awaitable<void> {
            auto stats = co_await zkco::exists_all(zk_, paths);
            master_saw::results_stat read{std::move(paths), {}};
            read.reads.reserve(stats.size());
            for (const auto& s : stats) {
                using status = master_saw::result_read::status;
                if (!s) {
                    read.reads.push_back({status::error, 0});
                } else if (!*s) {
                    read.reads.push_back({status::gone, 0});
                } else {
                    read.reads.push_back({status::ok, (**s).ctime});
                }
            }
            take_answers();
            to_fsm(read);
        },
        "gc"
    );
}

void master_session::carry_out(master_do::collect& a) {
    send_txn(a);
}

}  // namespace zkd::roles::detail
