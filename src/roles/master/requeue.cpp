// SPDX-License-Identifier: MIT
// T6: a departed worker's tasks back to pending, or lost past their attempt limit
// (docs/protocol.md §6 T6), and its directory deleted once empty.
#include "protocol/ids.hpp"
#include "roles/master/master_session.hpp"
#include "roles/txn_io.hpp"
#include "zkco/read_batch.hpp"

#include <spdlog/spdlog.h>

namespace zkd::roles::detail {

asio::awaitable<void> master_session::requeue_departed(std::string id) {
    const std::string dir = protocol::layout::assign_dir(id);
    auto backoff = std::chrono::milliseconds(100);
    bool counted = false;  // said how many tasks it left (its first listing)
    while (!stopping()) {
        auto kids = co_await zk_.get_children(dir);
        if (!kids) {
            if (kids.error() == zkco::errc::no_node) {
                break;
            }
            const bool go_on = co_await recover(kids.error(), dir);
            if (!go_on) {
                break;
            }
            continue;
        }
        std::set<std::string> markers;
        std::vector<std::string> tids;
        for (const auto& name : kids->names) {
            if (protocol::is_cancel_marker(name)) {
                markers.emplace(protocol::marker_task(name));
            } else {
                tids.push_back(name);
            }
        }
        if (!counted) {
            // Counted from its directory: it holds what clients placed there directly too.
            spdlog::info("master: worker {} left {} task(s) to take back", id, tids.size());
            counted = true;
        }
        if (tids.empty()) {
            for (const auto& tid : markers) {
                send(protocol::remove_marker_ops(id, tid), sent::nothing{});
            }
            auto [ec, r] = co_await batcher_.async_submit(
                to_zkco(protocol::remove_departed_dir_ops(id)), asio::as_tuple(asio::use_awaitable)
            );
            if (!ec || ec == zkco::errc::no_node || stopping()) {
                break;
            }
            // Not empty yet (a marker, or an assignment racing in): look again, after a
            // pause should it keep failing.
            asio::steady_timer pause(zk_.get_executor(), backoff);
            co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
            backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
            continue;
        }
        std::vector<std::string> paths;
        paths.reserve(tids.size());
        for (const auto& tid : tids) {
            paths.push_back(zkco::join_path(dir, tid));
        }
        auto nodes = co_await zkco::get_all(zk_, paths);
        auto pending = std::make_shared<countdown>(zk_.get_executor());
        for (std::size_t i = 0; i < tids.size(); ++i) {
            if (!nodes[i]) {
                continue;
            }
            const auto& tid = tids[i];
            auto plan = protocol::departed_ops(
                l_, id, tid, nodes[i]->data, markers.contains(tid), protocol::now_ms()
            );
            ++pending->left;
            send(
                std::move(plan.ops),
                sent::requeue{id, tid, paths[i], plan.kind, plan.attempt, pending}
            );
        }
        co_await pending->wait();
        if (pending->failed > 0) {
            // Not in a tight loop: what failed is looked at again after a pause.
            asio::steady_timer pause(zk_.get_executor(), backoff);
            co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
            backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
        }
    }
    take_answers();
    view_.departed_done(id);
    wake();
}

/// One task's T6 ended: counted, and what it left in the way cleared.
void master_session::answered(
    sent::requeue& s, zkco::error_code /*ec*/, const protocol::txn_answer& r
) {
    const auto outcome = protocol::read_departed(r);
    if (outcome == protocol::departed_outcome::foreign_below) {
        clear_foreign(s.path);  // someone wrote below the assignment
    }
    if (outcome != protocol::departed_outcome::committed) {
        ++s.wait->failed;
    } else if (s.kind == protocol::departed_kind::lost) {
        ++stats_->lost;
        spdlog::warn("master: task {} quarantined as lost after {} attempt(s)", s.tid, s.attempt);
    } else if (s.kind == protocol::departed_kind::requeue) {
        ++stats_->requeued;
        spdlog::info("master: task {} requeued (attempt {})", s.tid, s.attempt + 1);
    } else if (s.kind == protocol::departed_kind::cancel) {
        ++stats_->cancelled;
    } else {
        ++stats_->rejected;
    }
    s.wait->done();
}

}  // namespace zkd::roles::detail
