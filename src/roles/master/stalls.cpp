// SPDX-License-Identifier: MIT
// Stalled workers' reads (stall_watch.hpp; docs/protocol.md §7 "Stalled workers"): every half
// unstarted_bound the live workers' directories are listed, and the assignments master_fsm asks
// about read; it decides what to take back (master_fsm_stalls.cpp).
#include "protocol/ids.hpp"
#include "roles/master/detail/master_session.hpp"
#include "zkco/read_batch.hpp"

namespace zkd::roles::detail {

asio::awaitable<void> master_session::watch_stalls() {
    const auto period = fsm_.stall_period();
    if (period.count() == 0) {
        co_return;
    }
    asio::steady_timer timer(zk_.get_executor());
    for (;;) {
        timer.expires_after(period);
        auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        if (ec || stopping()) {
            co_return;
        }
        master_saw::stall_dirs_listed round{fsm_.live_workers(), {}};
        zkco::read_batch batch(zk_);
        std::vector<zkco::read_batch::slot<zkco::children>> lists;
        lists.reserve(round.workers.size());
        for (const auto& id : round.workers) {
            lists.push_back(batch.get_children(protocol::layout::assign_dir(id)));
        }
        if (auto all = co_await batch.wait(); !all) {
            continue;  // the next round looks again
        }
        round.names.resize(round.workers.size());
        for (std::size_t i = 0; i < lists.size(); ++i) {
            if (*lists[i]) {
                round.names[i] = std::move((*lists[i])->names);
            }
        }
        feed(round);  // then a suspect gets nothing, or its probe
    }
}

void master_session::carry_out(master_do::read_assignments& a) {
    group_.spawn(
        [this, worker = std::move(a.worker), tids = std::move(a.tids),
         paths = std::move(a.paths)]() mutable -> asio::awaitable<void> {
            auto nodes = co_await zkco::get_all(zk_, std::move(paths));
            master_saw::assignments_read read{std::move(worker), {}, 0};
            read.nodes.reserve(tids.size());
            for (std::size_t i = 0; i < tids.size(); ++i) {
                using status = master_saw::assignment_node::status;
                auto& n = read.nodes.emplace_back();
                n.tid = std::move(tids[i]);
                if (!nodes[i]) {
                    n.st = nodes[i].error() == zkco::errc::no_node ? status::gone : status::error;
                    continue;
                }
                n.data = std::move(nodes[i]->data);
                n.ctime = nodes[i]->stat.ctime;
                n.version = nodes[i]->stat.version;
            }
            read.now_ms = protocol::now_ms();
            feed(read);
        },
        "stalls"
    );
}

void master_session::carry_out(master_do::take_back& a) {
    send_txn(a);
}

}  // namespace zkd::roles::detail
