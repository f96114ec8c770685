// SPDX-License-Identifier: MIT
// /master (docs/protocol.md §2), which operators and clients read: what it says and when it is
// written are master_fsm's (master_fsm_master_node.cpp); here are the timer of its figures
// and the watch that keeps it in place.
#include "roles/master/detail/master_session.hpp"
#include "roles/txn/zk_ops.hpp"

namespace zkd::roles::detail {

/// Every report interval: the fsm writes the throughput figure when it changed.
asio::awaitable<void> master_session::report() {
    asio::steady_timer timer(zk_.get_executor());
    for (;;) {
        timer.expires_after(opts_.report_interval);
        auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        if (ec || stopping()) {
            co_return;
        }
        take_answers();
        to_fsm(master_saw::report_due{});
    }
}

/// Keeps /master in place: should someone delete or replace it, or set its data, the fsm
/// has it written again (fenced like every master write).
asio::awaitable<void> master_session::keep_master_node() {
    const auto session = zk_.session();
    while (!stopping()) {
        auto w = co_await zk_.watch_exists(protocol::layout::master());
        if (!w) {
            const bool go_on = co_await recover(w.error(), protocol::layout::master());
            if (!go_on) {
                co_return;
            }
            continue;
        }
        master_saw::master_node_read read;
        read.exists = w->value.has_value();
        read.owned = w->value && session && (*w->value).ephemeral_owner == session->id;
        read.version = w->value ? (*w->value).version : zkco::any_version;
        if (read.owned) {
            // Still our node, but someone may have set its data.
            auto now = co_await zk_.get(protocol::layout::master());
            if (now) {
                read.data = std::move(now->data);
                read.version = now->stat.version;  // the set may have come after the exists
            }
        }
        take_answers();
        to_fsm(read);
        auto ev = co_await w->watch.changed();
        if (!ev) {
            const bool go_on = co_await recover(ev.error(), protocol::layout::master());
            if (!go_on) {
                co_return;
            }
        }
    }
}

void master_session::answered(
    sent::master_node& /*s*/, zkco::error_code /*ec*/, const protocol::txn_answer& /*r*/
) {
    to_fsm(master_saw::master_node_written{});
}

}  // namespace zkd::roles::detail
