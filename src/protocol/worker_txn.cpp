// SPDX-License-Identifier: MIT
#include "protocol/worker_txn.hpp"

#include "protocol/delay.hpp"

#include <utility>

namespace zkd::protocol {

// --- T3 --------------------------------------------------------------------------------------

codec_result<txn_op> running_mark_op(
    std::string_view worker,
    std::string_view tid,
    std::string_view assigned,
    const progress& run,
    std::int32_t version
) {
    auto data = stamp(assigned, run);
    if (!data) {
        return data.error();
    }
    return txn_op::set(layout::assignment(worker, tid), std::move(*data), version);
}

mark_outcome read_mark(bool failed) noexcept {
    return failed ? mark_outcome::gave_up : mark_outcome::written;
}

// --- T4 --------------------------------------------------------------------------------------

namespace {

// The positions of T4's ops: the fence first, then the marker's delete (fenced form, when
// present), the result's create last (when present).
constexpr std::size_t publish_fence = 0;
constexpr std::size_t publish_marker = 1;

std::size_t publish_size(const publish_form& f) noexcept {
    return 1 + (f.fenced_by_assignment && f.with_marker ? 1 : 0) + (f.with_result ? 1 : 0);
}

}  // namespace

std::vector<txn_op> publish_ops(
    const layout& l,
    std::string_view worker,
    std::string_view tid,
    const std::string& result_data,
    const publish_form& form,
    std::string_view target
) {
    std::vector<txn_op> ops;
    if (form.fenced_by_assignment) {
        ops.push_back(txn_op::remove(layout::assignment(worker, tid)));
        if (form.with_marker) {
            ops.push_back(txn_op::remove(layout::cancel_marker(worker, tid)));
        }
    } else {
        ops.push_back(txn_op::check(layout::worker(worker)));
    }
    if (form.with_result) {
        ops.push_back(
            txn_op::create(target.empty() ? l.result(tid) : std::string(target), result_data)
        );
    }
    return ops;
}

publish_outcome read_publish(const txn_answer& a, const publish_form& form) noexcept {
    if (!a.failed) {
        return publish_outcome::committed;
    }
    const std::size_t n = publish_size(form);
    if (a.per_op.size() != n) {
        return publish_outcome::unknown;
    }
    const auto fence = a.per_op[publish_fence];
    if (fence == op_code::no_node) {
        return form.fenced_by_assignment ? publish_outcome::assignment_gone
                                         : publish_outcome::worker_gone;
    }
    if (form.fenced_by_assignment && fence == op_code::not_empty) {
        return publish_outcome::foreign_below;
    }
    if (form.with_result && a.per_op[n - 1] == op_code::node_exists) {
        return publish_outcome::result_exists;
    }
    if (form.fenced_by_assignment && form.with_marker &&
        a.per_op[publish_marker] == op_code::no_node) {
        return publish_outcome::marker_gone;
    }
    return publish_outcome::failed;
}

// --- T4e -------------------------------------------------------------------------------------

std::string early_result_data(
    const task_result& entry,
    std::string_view id,
    int attempt,
    std::string_view worker,
    std::int64_t started_ms,
    std::int64_t finished_ms,
    std::string_view assignment_json
) {
    task_result r;
    r.task = std::string(id);
    r.state = entry.state;
    r.value = entry.value;
    r.error = entry.error;
    r.attempt = attempt;
    r.worker = std::string(worker);
    r.started_ms = started_ms;
    r.finished_ms = finished_ms;
    return with_earlier_tries(encode(r), assignment_json);
}

std::vector<txn_op> early_results_ops(
    const layout& l,
    std::string_view worker,
    std::string_view bundle,
    std::string data,
    std::int32_t version,
    const std::vector<early_result>& results
) {
    std::vector<txn_op> ops;
    ops.reserve(1 + results.size());
    ops.push_back(txn_op::set(layout::assignment(worker, bundle), std::move(data), version));
    const auto dir = l.result_dir(bundle);
    for (const auto& r : results) {
        ops.push_back(txn_op::create(dir + "/" + r.tid, r.data));
    }
    return ops;
}

early_outcome read_early(const txn_answer& a, std::size_t results) noexcept {
    if (!a.failed) {
        return early_outcome::committed;
    }
    if (a.per_op.size() != 1 + results) {
        return early_outcome::unknown;
    }
    switch (a.per_op[0]) {
    case op_code::no_node:
        return early_outcome::assignment_gone;
    case op_code::bad_version:
        return early_outcome::assignment_changed;
    default:
        break;
    }
    for (std::size_t i = 1; i < a.per_op.size(); ++i) {
        if (a.per_op[i] == op_code::node_exists) {
            return early_outcome::result_exists;
        }
    }
    return early_outcome::failed;
}

// --- T9 --------------------------------------------------------------------------------------

txn_op drain_op(member_info me) {
    me.draining = true;
    auto path = layout::worker(me.id);
    return txn_op::set(std::move(path), encode(me));
}

std::vector<txn_op> return_entry_cancel_ops(
    std::string_view worker, std::string_view entry, std::int64_t now_ms
) {
    return requeue_entry_cancels_ops(worker, {std::string(entry)}, {}, now_ms);
}

}  // namespace zkd::protocol
