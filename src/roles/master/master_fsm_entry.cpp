// SPDX-License-Identifier: MIT
// master_fsm (master_fsm.hpp): T7 for one task of a bundle, a request `/cancel/<bundle>.<k>`
// (docs/protocol.md §6 T7 "One task of a bundle"): forwarded to the worker that holds the
// bundle as the task's own marker, `<bundle>.<k>.cancel`; left standing while the bundle
// waits (pending or delayed), so that it is forwarded once the bundle is assigned; and
// turned back into a request when T6 requeues the bundle, or when a departed worker's marker
// outlived its bundle there.
#include "protocol/ids.hpp"
#include "protocol/master_txn.hpp"
#include "roles/master/detail/master_fsm.hpp"

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace zkd::roles {

bool master_fsm::cancel_entry(const std::string& tid) {
    const auto ref = protocol::parse_task_ref(tid);
    if (!ref || !ref->index) {
        return false;  // a task node's own request
    }
    const std::string bundle(ref->node);
    const std::string* holder = nullptr;
    for (const auto& [id, w] : workers_) {
        if (w.alive && w.assigned.contains(bundle)) {
            holder = &id;
        }
    }
    if (holder == nullptr) {
        if (pending_.contains(bundle) || delayed_.contains(bundle)) {
            // Not run yet: the request stands until the bundle is assigned (T2), then goes to
            // its worker as below. The bundle is known here, so the request is not unknown.
            unknown_cancels_.erase(tid);
            return true;
        }
        return false;  // finished, or not read yet: as any unknown request
    }
    master_do::cancel a;
    a.tid = tid;
    a.worker = *holder;
    a.ops = protocol::cancel_entry_ops(*holder, bundle, tid);
    unknown_cancels_.erase(tid);
    cancels_in_flight_.insert(tid);
    out_.emplace_back(std::move(a));
    return true;
}

void master_fsm::carry_entry_cancels(
    const std::string& worker,
    const std::string& bundle,
    const std::set<std::string>& markers,
    std::vector<protocol::txn_op>& ops,
    std::int64_t now_ms
) const {
    if (protocol::bundle_size(bundle) == 0) {
        return;
    }
    std::vector<std::string> entries;
    std::vector<bool> asked;
    for (const auto& m : markers) {
        if (const auto ref = protocol::parse_task_ref(m);
            ref && ref->index && ref->node == bundle) {
            entries.push_back(m);
            asked.push_back(cancels_.contains(m));
        }
    }
    auto more = protocol::requeue_entry_cancels_ops(worker, entries, asked, now_ms);
    ops.insert(ops.end(), more.begin(), more.end());
}

std::vector<protocol::txn_op> master_fsm::litter_marker_ops(
    const std::string& worker, const std::string& tid, std::int64_t now_ms
) const {
    // A task's own marker whose bundle left that directory (requeued by a T6 or a worker's
    // retry that was out when the marker came, or ended): the request again, in the same
    // multi as the delete, so that the cancel is not lost; a bundle that ended finds the
    // request dropped as unknown (T7). Any other marker is just deleted.
    if (const auto ref = protocol::parse_task_ref(tid); ref && ref->index) {
        return protocol::requeue_entry_cancels_ops(worker, {tid}, {cancels_.contains(tid)}, now_ms);
    }
    return protocol::remove_marker_ops(worker, tid);
}

}  // namespace zkd::roles
