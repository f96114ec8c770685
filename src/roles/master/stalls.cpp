// SPDX-License-Identifier: MIT
// Assignments a live worker leaves unstarted: taken back (T6 for one task), the worker
// suspect (stall_watch.hpp; docs/protocol.md §7 "Stalled workers").
#include "protocol/ids.hpp"
#include "roles/master/master_session.hpp"
#include "roles/txn_io.hpp"
#include "zkco/read_batch.hpp"

#include <spdlog/spdlog.h>

namespace zkd::roles::detail {

/// Every stall_watch period: lists each live worker's directory (at once), reads the
/// assignments stall_watch asks about, takes back those left unstarted past the bound
/// (T6 for one task, at the version read: a running mark written meanwhile keeps it), and
/// names the suspects in /master.
asio::awaitable<void> master_session::watch_stalls() {
    auto& stalls = fsm_.stalls();
    if (!stalls.enabled()) {
        co_return;
    }
    asio::steady_timer timer(zk_.get_executor());
    for (;;) {
        timer.expires_after(stalls.period());
        auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        if (ec || stopping()) {
            co_return;
        }
        const auto ids = fsm_.live_workers();
        zkco::read_batch batch(zk_);
        std::vector<zkco::read_batch::slot<zkco::children>> lists;
        lists.reserve(ids.size());
        for (const auto& id : ids) {
            lists.push_back(batch.get_children(protocol::layout::assign_dir(id)));
        }
        if (auto all = co_await batch.wait(); !all) {
            continue;  // the next round looks again
        }
        take_answers();
        for (std::size_t i = 0; i < ids.size() && !stopping(); ++i) {
            if (*lists[i]) {
                co_await check_stalled(ids[i], (*lists[i])->names);
            }
        }
        to_fsm(master_saw::stalls_checked{});
        wake();  // a suspect gets nothing, or its probe
    }
}

/// One live worker's directory as listed: reads what stall_watch asks about, and takes
/// back what it says.
asio::awaitable<void> master_session::check_stalled(
    std::string id, std::vector<std::string> names
) {
    auto& stalls = fsm_.stalls();
    std::set<std::string> tids;
    std::set<std::string> marked;
    for (auto& name : names) {
        if (protocol::is_cancel_marker(name)) {
            marked.emplace(protocol::marker_task(name));
        } else {
            tids.insert(std::move(name));
        }
    }
    const auto ask = stalls.listed(id, tids);
    if (ask.empty()) {
        co_return;
    }
    std::vector<std::string> paths;
    paths.reserve(ask.size());
    for (const auto& tid : ask) {
        paths.push_back(protocol::layout::assignment(id, tid));
    }
    auto nodes = co_await zkco::get_all(zk_, paths);
    take_answers();
    const auto now_ms = protocol::now_ms();
    std::vector<stall_watch::assignment> reads;
    std::map<std::string, const zkco::node*> read_nodes;
    for (std::size_t i = 0; i < ask.size(); ++i) {
        stall_watch::assignment a;
        a.tid = ask[i];
        if (!nodes[i]) {
            if (nodes[i].error() != zkco::errc::no_node) {
                continue;  // not read: asked again next round
            }
            a.gone = true;
        } else {
            const auto spec = protocol::decode_task(nodes[i]->data);
            a.running = spec && spec->running_ms != 0;
            // Since it was assigned; for data that is no task, since the node was made.
            const auto since =
                spec && spec->assigned_ms > 0 ? spec->assigned_ms : nodes[i]->stat.ctime;
            a.age_ms = now_ms - since;
            read_nodes[a.tid] = &*nodes[i];
        }
        reads.push_back(std::move(a));
    }
    const auto verdict = stalls.read(id, reads);
    if (verdict.now_suspect) {
        spdlog::warn(
            "master: worker {} left {} assignment(s) unstarted for {} ms or more: taken "
            "back; it is suspect (a probe at most) until it runs a task",
            id, verdict.take_back.size(), opts_.unstarted_bound.count()
        );
    } else if (verdict.trusted_again) {
        spdlog::info("master: worker {} runs tasks again; no longer suspect", id);
    }
    for (const auto& tid : verdict.take_back) {
        const auto* node = read_nodes.at(tid);
        auto plan = protocol::departed_ops(
            l_, id, tid, node->data, marked.contains(tid), now_ms, node->stat.version
        );
        send(std::move(plan.ops), sent::take_back{id, tid, plan.kind});
    }
}

void master_session::answered(
    sent::take_back& s, zkco::error_code /*ec*/, const protocol::txn_answer& r
) {
    if (protocol::read_departed(r) != protocol::departed_outcome::committed) {
        return;  // started meanwhile, or finished: the next round looks again
    }
    ++stats_->taken_back;
    if (s.kind == protocol::departed_kind::requeue) {
        ++stats_->requeued;
    } else if (s.kind == protocol::departed_kind::lost) {
        ++stats_->lost;
    }
    spdlog::info("master: task {} taken back from worker {}", s.tid, s.worker);
}

}  // namespace zkd::roles::detail
