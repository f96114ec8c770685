// SPDX-License-Identifier: MIT
// /master (docs/protocol.md §2): kept in place, its throughput figure and suspects current.
#include "roles/master/master_session.hpp"
#include "roles/txn_io.hpp"

#include <spdlog/spdlog.h>

namespace zkd::roles::detail {

asio::awaitable<void> master_session::report() {
    const auto start = std::chrono::steady_clock::now();
    asio::steady_timer timer(zk_.get_executor());
    double written = 0;
    for (;;) {
        timer.expires_after(opts_.report_interval);
        auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        if (ec || stopping()) {
            co_return;
        }
        const auto now = std::chrono::steady_clock::now();
        const auto window = std::chrono::seconds(60);
        while (!finishes_.empty() && now - finishes_.front().first > window) {
            finishes_.pop_front();
        }
        std::uint64_t done = 0;
        for (const auto& f : finishes_) {
            done += f.second;
        }
        const double secs = std::chrono::duration<double>(
                                std::min<std::chrono::steady_clock::duration>(now - start, window)
        )
                                .count();
        const double rate = std::round(static_cast<double>(done) / std::max(secs, 1.0) * 100) / 100;
        if (rate == written) {
            continue;
        }
        written = rate;
        master_node_.throughput = rate;
        send(protocol::master_report_ops(master_node_), sent::nothing{});
    }
}

/// Names the suspects in /master when they changed (clients placing directly skip them).
void master_session::publish_suspects() {
    auto suspects = view_.stalls().suspects();
    stats_->suspects = suspects.size();
    if (suspects.size() > protocol::max_suspects_named) {
        suspects.resize(protocol::max_suspects_named);
    }
    if (suspects == master_node_.suspects) {
        return;
    }
    master_node_.suspects = std::move(suspects);
    send(protocol::master_report_ops(master_node_), sent::nothing{});
}

/// Keeps /master (§2), which operators and clients read, in place: should someone delete
/// or replace it, it is written again (fenced like every master write).
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
        bool ours = w->value && session && (*w->value).ephemeral_owner == session->id;
        bool garbled = false;
        auto version = w->value ? (*w->value).version : zkco::any_version;
        if (ours) {
            // Still our node, but someone may have set its data: what clients read the
            // bound on pending tasks from must say it.
            auto now = co_await zk_.get(protocol::layout::master());
            garbled = now && !protocol::master_node_says(master_node_, now->data);
            ours = !garbled;
            if (now) {
                version = now->stat.version;  // the set may have come after the exists
            }
        }
        // One rewrite at a time: the change that started it may also fire the next watch
        // before the rewrite is applied.
        if (!ours && !rewriting_master_node_) {
            spdlog::warn(
                "master {}: /master was {}; writing it again", me_.id,
                garbled    ? "overwritten (it no longer said this master's id, epoch and bound)"
                : w->value ? "replaced by someone else"
                           : "deleted"
            );
            rewriting_master_node_ = true;
            send(
                protocol::master_node_ops(master_node_, w->value.has_value(), version),
                sent::master_node{}
            );
        }
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
    // Whatever the outcome, the watch shows what /master holds now.
    rewriting_master_node_ = false;
}

}  // namespace zkd::roles::detail
