// SPDX-License-Identifier: MIT
// master_fsm (master_fsm.hpp): assignments a live worker leaves unstarted (stall_watch.hpp;
// docs/protocol.md §7 "Stalled workers"): read when two listings show them unmarked, taken
// back past the bound (T6 for one task, at the version read), the worker suspect.
#include "roles/master/detail/master_fsm.hpp"

#include <spdlog/spdlog.h>

namespace zkd::roles {

void master_fsm::handle(const master_saw::stall_dirs_listed& e, clock::time_point /*now*/) {
    if (stall_reads_out_ > 0) {
        return;  // the last round's reads are not all in
    }
    stall_markers_.clear();
    for (std::size_t i = 0; i < e.workers.size() && i < e.names.size(); ++i) {
        const auto& worker = e.workers[i];
        if (!e.names[i] || !worker_alive(worker)) {
            continue;  // not listed: the next round looks again
        }
        std::set<std::string> tids;
        auto& marked = stall_markers_[worker];
        for (const auto& name : *e.names[i]) {
            if (protocol::is_cancel_marker(name)) {
                marked.emplace(protocol::marker_task(name));
            } else {
                tids.insert(name);
            }
        }
        auto ask = stalls_.listed(worker, tids);
        if (ask.empty()) {
            continue;
        }
        master_do::read_assignments read{worker, {}, {}};
        for (auto& tid : ask) {
            read.paths.push_back(protocol::layout::assignment(worker, tid));
            read.tids.push_back(std::move(tid));
        }
        ++stall_reads_out_;
        out_.emplace_back(std::move(read));
    }
    if (stall_reads_out_ == 0) {
        publish_suspects();
    }
}

void master_fsm::handle(const master_saw::assignments_read& e, clock::time_point /*now*/) {
    std::vector<stall_watch::assignment> reads;
    std::map<std::string, const master_saw::assignment_node*> read_nodes;
    for (const auto& n : e.nodes) {
        stall_watch::assignment a;
        a.tid = n.tid;
        if (n.st == master_saw::assignment_node::status::error) {
            continue;  // not read: asked again next round
        }
        if (n.st == master_saw::assignment_node::status::gone) {
            a.gone = true;
        } else {
            const auto spec = protocol::decode_task_node(n.data);
            a.running = spec && spec->run.running_ms != 0;
            // Since it was assigned; for data that is no task, since the node was made.
            const auto since =
                spec && spec->assigned.assigned_ms > 0 ? spec->assigned.assigned_ms : n.ctime;
            a.age_ms = e.now_ms - since;
            read_nodes[a.tid] = &n;
        }
        reads.push_back(std::move(a));
    }
    const auto verdict = stalls_.read(e.worker, reads);
    if (verdict.now_suspect) {
        spdlog::warn(
            "master: worker {} left {} assignment(s) unstarted for {} ms or more: taken "
            "back; it is suspect (a probe at most) until it runs a task",
            e.worker, verdict.take_back.size(), opts_.unstarted_bound.count()
        );
    } else if (verdict.trusted_again) {
        spdlog::info("master: worker {} runs tasks again; no longer suspect", e.worker);
    }
    const auto& marked = stall_markers_[e.worker];
    for (const auto& tid : verdict.take_back) {
        const auto* node = read_nodes.at(tid);
        auto plan = protocol::departed_ops(
            l_, e.worker, tid, node->data, marked.contains(tid), e.now_ms, node->version
        );
        if (plan.kind == protocol::departed_kind::requeue) {
            carry_entry_cancels(e.worker, tid, marked, plan.ops, e.now_ms);
        }
        out_.emplace_back(master_do::take_back{e.worker, tid, plan.kind, std::move(plan.ops)});
    }
    if (stall_reads_out_ > 0 && --stall_reads_out_ == 0) {
        publish_suspects();
    }
}

void master_fsm::done(
    const master_do::take_back& a, const master_txn_report& r, clock::time_point /*now*/
) {
    if (protocol::read_departed(r.answer) != protocol::departed_outcome::committed) {
        return;  // started meanwhile, or finished: the next round looks again
    }
    ++stats_.taken_back;
    if (a.kind == protocol::departed_kind::requeue) {
        ++stats_.requeued;
    } else if (a.kind == protocol::departed_kind::lost) {
        ++stats_.lost;
    }
    spdlog::info("master: task {} taken back from worker {}", a.tid, a.worker);
}

}  // namespace zkd::roles
