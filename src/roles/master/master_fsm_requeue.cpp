// SPDX-License-Identifier: MIT
// master_fsm (master_fsm.hpp): T6, a departed worker's tasks back to pending, or lost past
// their attempt limit, or cancelled (docs/protocol.md §6 T6): its directory listed, its
// assignments read and handed back one transaction each, again until it is empty, which is
// then deleted; failures wait longer each time before the next listing.
#include "protocol/ids.hpp"
#include "roles/master/detail/master_fsm.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace zkd::roles {

namespace {

constexpr std::chrono::milliseconds longest_backoff{5'000};

}  // namespace

void master_fsm::requeue(const std::string& worker) {
    if (departures_.try_emplace(worker).second) {
        out_.emplace_back(master_do::list_departed{worker});
    }
}

void master_fsm::forget_departed(const std::string& worker) {
    departures_.erase(worker);
    stalls_.forget(worker);
    stats_.suspects = stalls_.suspects().size();
    if (const auto it = workers_.find(worker); it != workers_.end()) {
        assigns_in_flight_ -= static_cast<std::size_t>(it->second.in_flight);
        workers_.erase(it);
        worker_listing_due_ = true;
    }
}

void master_fsm::handle(const master_saw::departed_listed& e, clock::time_point /*now*/) {
    const auto it = departures_.find(e.worker);
    if (it == departures_.end()) {
        return;
    }
    if (!e.names) {
        forget_departed(e.worker);  // its directory is gone: nothing left to take back
        return;
    }
    auto& d = it->second;
    d.markers.clear();
    master_do::read_departed read{e.worker, {}, {}};
    for (const auto& name : *e.names) {
        if (protocol::is_cancel_marker(name)) {
            d.markers.emplace(protocol::marker_task(name));
        } else {
            read.paths.push_back(protocol::layout::assignment(e.worker, name));
            read.tids.push_back(name);
        }
    }
    if (!d.counted) {
        // Counted from its directory: it holds what clients placed there directly too.
        spdlog::info("master: worker {} left {} task(s) to take back", e.worker, read.tids.size());
        d.counted = true;
    }
    if (!read.tids.empty()) {
        out_.emplace_back(std::move(read));
        return;
    }
    // Empty but for markers: those go, then the directory (which fails while anything is
    // left there, a marker, or an assignment racing in: listed again then). A marker of one
    // task of a bundle goes back to being a request (master_fsm_entry.cpp).
    const auto now_ms = protocol::now_ms();
    for (const auto& tid : d.markers) {
        out_.emplace_back(master_do::remove_marker{litter_marker_ops(e.worker, tid, now_ms)});
    }
    ++d.out;
    out_.emplace_back(master_do::remove_departed{
        e.worker, protocol::remove_departed_dir_ops(e.worker)});
}

void master_fsm::handle(const master_saw::departed_read& e, clock::time_point /*now*/) {
    const auto it = departures_.find(e.worker);
    if (it == departures_.end()) {
        return;
    }
    auto& d = it->second;
    const auto now_ms = protocol::now_ms();
    for (const auto& n : e.nodes) {
        if (!n.data) {
            continue;  // gone meanwhile: the next listing does not show it
        }
        auto plan =
            protocol::departed_ops(l_, e.worker, n.tid, *n.data, d.markers.contains(n.tid), now_ms);
        if (plan.kind == protocol::departed_kind::requeue) {
            carry_entry_cancels(e.worker, n.tid, d.markers, plan.ops, now_ms);
        }
        ++d.out;
        out_.emplace_back(master_do::requeue_task{
            e.worker, n.tid, protocol::layout::assignment(e.worker, n.tid), plan.kind, plan.attempt,
            std::move(plan.ops)});
    }
    if (d.out == 0) {
        out_.emplace_back(master_do::list_departed{e.worker});  // nothing read: look again
    }
}

void master_fsm::done(
    const master_do::requeue_task& a, const master_txn_report& r, clock::time_point now
) {
    const auto outcome = protocol::read_departed(r.answer);
    if (outcome == protocol::departed_outcome::foreign_below) {
        clear_foreign(a.path);  // someone wrote below the assignment
    }
    if (outcome == protocol::departed_outcome::committed) {
        if (a.kind == protocol::departed_kind::lost) {
            ++stats_.lost;
            spdlog::warn(
                "master: task {} quarantined as lost after {} attempt(s)", a.tid, a.attempt
            );
        } else if (a.kind == protocol::departed_kind::requeue) {
            ++stats_.requeued;
            spdlog::info("master: task {} requeued (attempt {})", a.tid, a.attempt + 1);
        } else if (a.kind == protocol::departed_kind::cancel) {
            ++stats_.cancelled;
        } else {
            ++stats_.rejected;
        }
    }
    const auto it = departures_.find(a.worker);
    if (it == departures_.end()) {
        return;
    }
    auto& d = it->second;
    if (outcome != protocol::departed_outcome::committed) {
        ++d.failed;
    }
    if (--d.out > 0) {
        return;
    }
    if (d.failed == 0) {
        out_.emplace_back(master_do::list_departed{a.worker});
        return;
    }
    // Not in a tight loop: what failed is looked at again after a pause.
    d.failed = 0;
    d.relist_at = now + d.backoff;
    d.backoff = std::min(d.backoff * 2, longest_backoff);
}

void master_fsm::done(
    const master_do::remove_departed& a, const master_txn_report& r, clock::time_point now
) {
    const auto it = departures_.find(a.worker);
    if (it == departures_.end()) {
        return;
    }
    auto& d = it->second;
    --d.out;
    const bool gone =
        !r.answer.failed ||
        std::find(r.answer.per_op.begin(), r.answer.per_op.end(), protocol::op_code::no_node) !=
            r.answer.per_op.end();
    if (gone || stats_.deposed) {
        forget_departed(a.worker);
        return;
    }
    // Not empty yet (a marker, or an assignment racing in): listed again, after a pause
    // should it keep failing.
    d.relist_at = now + d.backoff;
    d.backoff = std::min(d.backoff * 2, longest_backoff);
}

std::optional<master_fsm::clock::time_point> master_fsm::relist_departed(clock::time_point now) {
    std::optional<clock::time_point> next;
    for (auto& [worker, d] : departures_) {
        if (!d.relist_at) {
            continue;
        }
        if (*d.relist_at <= now) {
            d.relist_at.reset();
            out_.emplace_back(master_do::list_departed{worker});
        } else if (!next || *d.relist_at < *next) {
            next = d.relist_at;
        }
    }
    return next;
}

}  // namespace zkd::roles
