// SPDX-License-Identifier: MIT
#include "protocol/master_txn.hpp"

#include "protocol/delay.hpp"
#include "protocol/ids.hpp"

#include <utility>

namespace zkd::protocol {

namespace {

std::string pending_path(std::uint32_t shard, std::string_view tid) {
    std::string p = layout::pending_shard(shard);
    p += '/';
    p += tid;
    return p;
}

/// The code of op `i`, ok when the answer has no such op.
op_code code_at(const txn_answer& a, std::size_t i) noexcept {
    return i < a.per_op.size() ? a.per_op[i] : op_code::ok;
}

/// Reads a transaction whose first op deletes a node the master owns (a pending node, an
/// assignment of a departed worker).
pending_outcome read_delete_first(const txn_answer& a) noexcept {
    if (!a.failed) {
        return pending_outcome::committed;
    }
    switch (code_at(a, 0)) {
    case op_code::no_node:
        return pending_outcome::task_gone;
    case op_code::not_empty:
        return pending_outcome::foreign_below;
    default:
        return pending_outcome::failed;
    }
}

}  // namespace

txn_op txn_op::create(std::string path, std::string data, bool ephemeral) {
    return txn_op{kind::create, std::move(path), std::move(data), -1, ephemeral};
}
txn_op txn_op::remove(std::string path, std::int32_t version) {
    return txn_op{kind::remove, std::move(path), {}, version, false};
}
txn_op txn_op::set(std::string path, std::string data, std::int32_t version) {
    return txn_op{kind::set, std::move(path), std::move(data), version, false};
}
txn_op txn_op::check(std::string path, std::int32_t version) {
    return txn_op{kind::check, std::move(path), {}, version, false};
}

std::string master_result(
    std::string_view tid,
    std::string_view code,
    std::string message,
    int attempt,
    task_state state,
    std::int64_t finished_ms,
    std::string_view task_json
) {
    task_result r;
    r.task = std::string(tid);
    r.state = state;
    r.error = task_error{std::string(code), std::move(message)};
    r.attempt = attempt;
    r.finished_ms = finished_ms;
    if (task_json.empty()) {
        return encode(r);
    }
    // A retried task's result says so (§4.3 "The final result"), whoever writes it.
    if (auto f = read_delay_fields(task_json); f && (f->try_number != 1 || !f->errors.empty())) {
        r.try_number = f->try_number;
        r.errors = std::move(f->errors);
    }
    // A bundle's tasks that earlier tries finished keep their outcomes (§5.1).
    if (const auto n = bundle_size(tid); n > 0) {
        const auto whole = r;
        r.bundle = close_bundle(task_json, n, state, *whole.error);
        if (!r.bundle.empty()) {
            // Tasks published early keep being read from their own nodes (§6 T4e).
            r.published = read_published(task_json, read_finished(task_json, n));
        }
        summarize_bundle(r);
        auto text = encode(r);
        if (r.bundle.empty() || result_size_ok(text)) {
            return text;
        }
        r = whole;  // cannot be larger than the node its entries came from; should it be: whole
    }
    return encode(r);
}

// --- T2 -----------------------------------------------------------------------------------

namespace {
// The positions of T2's ops, for its reader.
constexpr std::size_t assign_check_worker = 0;
constexpr std::size_t assign_delete_pending = 1;
constexpr std::size_t assign_create = 2;
}  // namespace

codec_result<std::vector<txn_op>> assign_ops(
    std::uint32_t shard,
    std::string_view tid,
    std::string_view worker,
    std::string_view data,
    int attempt,
    std::int64_t epoch,
    std::int64_t now_ms
) {
    auto assigned = stamp(data, assignment{attempt, epoch, now_ms, std::string(worker)});
    if (!assigned) {
        return assigned.error();
    }
    std::vector<txn_op> ops(3);
    ops[assign_check_worker] = txn_op::check(layout::worker(worker));
    ops[assign_delete_pending] = txn_op::remove(pending_path(shard, tid));
    ops[assign_create] = txn_op::create(layout::assignment(worker, tid), std::move(*assigned));
    return ops;
}

assign_outcome read_assign(const txn_answer& a) noexcept {
    if (!a.failed) {
        return assign_outcome::committed;
    }
    if (a.per_op.size() != 3) {
        return assign_outcome::unknown;
    }
    const auto del = a.per_op[assign_delete_pending];
    const auto create = a.per_op[assign_create];
    if (del == op_code::no_node || create == op_code::node_exists) {
        return assign_outcome::task_gone;
    }
    if (create == op_code::no_node) {
        return assign_outcome::worker_dir_gone;
    }
    if (a.per_op[assign_check_worker] != op_code::ok) {
        return assign_outcome::worker_left;
    }
    if (del == op_code::not_empty) {
        return assign_outcome::foreign_below;
    }
    return assign_outcome::failed;
}

// --- failing a pending task ------------------------------------------------------------------

std::vector<txn_op> reject_ops(
    const layout& l,
    std::uint32_t shard,
    std::string_view tid,
    std::string_view code,
    std::string why,
    int attempt,
    std::int64_t now_ms,
    std::string_view data
) {
    return {
        txn_op::remove(pending_path(shard, tid)),
        txn_op::create(
            l.result(tid),
            master_result(tid, code, std::move(why), attempt, task_state::failed, now_ms, data)
        )};
}

pending_outcome read_reject(const txn_answer& a) noexcept {
    return read_delete_first(a);
}

// --- T7 ------------------------------------------------------------------------------------------

std::vector<txn_op> cancel_pending_ops(
    const layout& l,
    std::uint32_t shard,
    std::string_view tid,
    int attempt,
    std::int64_t now_ms,
    std::string_view data
) {
    return {
        txn_op::remove(pending_path(shard, tid)),
        txn_op::create(
            l.result(tid),
            master_result(
                tid, codes::cancelled, "cancelled", attempt, task_state::cancelled, now_ms, data
            )
        ),
        txn_op::remove(layout::cancel_request(tid))};
}

std::vector<txn_op> cancel_assigned_ops(std::string_view worker, std::string_view tid) {
    return {
        txn_op::check(layout::assignment(worker, tid)),
        txn_op::create(layout::cancel_marker(worker, tid), ""),
        txn_op::remove(layout::cancel_request(tid))};
}

std::vector<txn_op> cancel_entry_ops(
    std::string_view worker, std::string_view bundle, std::string_view entry
) {
    return {
        txn_op::check(layout::assignment(worker, bundle)),
        txn_op::create(layout::cancel_marker(worker, entry), ""),
        txn_op::remove(layout::cancel_request(entry))};
}

std::vector<txn_op> cancel_delayed_ops(
    const layout& l, std::string_view tid, int attempt, std::int64_t now_ms, std::string_view data
) {
    return {
        txn_op::remove(l.delayed_task(tid)),
        txn_op::create(
            l.result(tid),
            master_result(
                tid, codes::cancelled, "cancelled", attempt, task_state::cancelled, now_ms, data
            )
        ),
        txn_op::remove(layout::cancel_request(tid))};
}

std::vector<txn_op> release_ops(const layout& l, std::string_view tid, std::string data) {
    return {
        txn_op::remove(l.delayed_task(tid)), txn_op::create(l.pending_task(tid), std::move(data))};
}

std::vector<txn_op> drop_delayed_ops(const layout& l, std::string_view tid) {
    return {txn_op::remove(l.delayed_task(tid))};
}

release_outcome read_release(const txn_answer& a) noexcept {
    if (!a.failed) {
        return release_outcome::committed;
    }
    switch (code_at(a, 0)) {
    case op_code::no_node:
        return release_outcome::task_gone;
    case op_code::not_empty:
        return release_outcome::foreign_below;
    default:
        break;
    }
    return code_at(a, 1) == op_code::node_exists ? release_outcome::pending_exists
                                                 : release_outcome::failed;
}

std::vector<txn_op> drop_cancel_ops(std::string_view tid) {
    return {txn_op::remove(layout::cancel_request(tid))};
}

pending_outcome read_cancel(const txn_answer& a) noexcept {
    return read_delete_first(a);
}

// --- T6 ------------------------------------------------------------------------------------------

departed_plan departed_ops(
    const layout& l,
    std::string_view worker,
    std::string_view tid,
    std::string_view data,
    bool marked,
    std::int64_t now_ms,
    std::int32_t version
) {
    departed_plan plan;
    plan.ops.push_back(txn_op::remove(layout::assignment(worker, tid), version));
    if (marked) {
        plan.ops.push_back(txn_op::remove(layout::cancel_marker(worker, tid)));
    }
    auto spec = decode_task_node(data);
    if (!spec) {
        plan.kind = departed_kind::malformed;
        plan.ops.push_back(txn_op::create(
            l.result(tid), master_result(
                               tid, codes::malformed_task, spec.error().message, 1,
                               task_state::failed, now_ms, data
                           )
        ));
        return plan;
    }
    plan.attempt = spec->assigned.attempt;
    if (marked) {
        plan.kind = departed_kind::cancel;
        plan.ops.push_back(txn_op::create(
            l.result(tid), master_result(
                               tid, codes::cancelled, "cancelled", plan.attempt,
                               task_state::cancelled, now_ms, data
                           )
        ));
    } else if (plan.attempt >= spec->task.max_attempts) {
        plan.kind = departed_kind::lost;
        plan.ops.push_back(txn_op::create(
            l.result(tid),
            master_result(
                tid, codes::attempts_exhausted,
                "its worker was lost on each of " + std::to_string(plan.attempt) + " attempt(s)",
                plan.attempt, task_state::lost, now_ms, data
            )
        ));
    } else {
        plan.kind = departed_kind::requeue;
        // The task as read, with the next attempt and nothing of the assignment or its run.
        const assignment next{plan.attempt + 1, 0, 0, {}};
        auto unrun = stamp(data, progress{});
        auto again = unrun ? stamp(*unrun, next) : unrun;
        plan.ops.push_back(txn_op::create(
            l.pending_task(tid),
            again ? std::move(*again) : encode(task_node{std::move(spec->task), next, {}})
        ));
    }
    return plan;
}

std::vector<txn_op> requeue_entry_cancels_ops(
    std::string_view worker,
    const std::vector<std::string>& entries,
    const std::vector<bool>& asked,
    std::int64_t now_ms
) {
    std::vector<txn_op> ops;
    for (std::size_t i = 0; i < entries.size(); ++i) {
        ops.push_back(txn_op::remove(layout::cancel_marker(worker, entries[i])));
        if (i >= asked.size() || !asked[i]) {
            ops.push_back(
                txn_op::create(layout::cancel_request(entries[i]), encode(cancel_info{now_ms}))
            );
        }
    }
    return ops;
}

departed_outcome read_departed(const txn_answer& a) noexcept {
    switch (read_delete_first(a)) {
    case pending_outcome::committed:
        return departed_outcome::committed;
    case pending_outcome::foreign_below:
        return departed_outcome::foreign_below;
    default:
        return departed_outcome::failed;
    }
}

std::vector<txn_op> remove_departed_dir_ops(std::string_view worker) {
    return {txn_op::remove(layout::assign_dir(worker))};
}

std::vector<txn_op> remove_marker_ops(std::string_view worker, std::string_view tid) {
    return {txn_op::remove(layout::cancel_marker(worker, tid))};
}

// --- T8 and /master ------------------------------------------------------------------------------

std::vector<txn_op> collect_ops(std::string path) {
    return {txn_op::remove(std::move(path))};
}

std::vector<txn_op> collect_dir_ops(std::string path, std::int32_t version) {
    return {txn_op::remove(std::move(path), version)};
}

std::vector<txn_op> master_node_ops(const member_info& node, bool replaced, std::int32_t version) {
    std::vector<txn_op> ops;
    if (replaced) {
        ops.push_back(txn_op::remove(layout::master(), version));
    }
    ops.push_back(txn_op::create(layout::master(), encode(node), true));
    return ops;
}

std::vector<txn_op> master_report_ops(const member_info& node) {
    return {txn_op::set(layout::master(), encode(node))};
}

bool master_node_says(const member_info& node, std::string_view data) {
    const auto m = decode_master(data);
    return m && m->id == node.id && m->epoch == node.epoch && m->max_pending == node.max_pending &&
           m->direct == node.direct && m->suspects == node.suspects && m->features == node.features;
}

}  // namespace zkd::protocol
