// SPDX-License-Identifier: MIT
#include "protocol/client_txn.hpp"

#include <algorithm>
#include <optional>
#include <utility>

namespace zkd::protocol {

namespace {

/// The code of a one-op transaction's op (nullopt: no per-op results).
std::optional<op_code> only_code(const txn_answer& a) noexcept {
    if (a.per_op.size() != 1) {
        return std::nullopt;
    }
    return a.per_op.front();
}

}  // namespace

// --- T1 --------------------------------------------------------------------------------------

txn_op submit_op(const layout& l, std::string_view tid, std::string data) {
    return txn_op::create(l.pending_task(tid), std::move(data));
}

submit_outcome read_submit(const txn_answer& a) noexcept {
    if (!a.failed) {
        return submit_outcome::submitted;
    }
    const auto c = only_code(a);
    if (!c) {
        return submit_outcome::unknown;
    }
    return *c == op_code::node_exists ? submit_outcome::exists : submit_outcome::failed;
}

std::vector<txn_op> direct_submit_ops(
    std::string_view worker, std::int32_t worker_version, std::string_view tid, std::string data
) {
    return {
        txn_op::check(layout::worker(worker), worker_version),
        txn_op::create(layout::assignment(worker, tid), std::move(data)),
    };
}

std::optional<submit_outcome> read_direct_submit(const txn_answer& a) noexcept {
    if (!a.failed) {
        return submit_outcome::submitted;
    }
    if (a.per_op.size() != 2) {
        return submit_outcome::unknown;
    }
    const auto check = a.per_op[0];
    const auto create = a.per_op[1];
    if (check == op_code::no_node || check == op_code::bad_version) {
        return std::nullopt;  // the worker left, or changed (draining)
    }
    if (create == op_code::no_node) {
        return std::nullopt;  // its directory is gone: nothing can go there
    }
    return create == op_code::node_exists ? submit_outcome::exists : submit_outcome::failed;
}

std::string receipt_name(std::uint64_t session, std::string_view client_hex) {
    constexpr std::string_view digits = "0123456789abcdef";
    std::string name(16, '0');
    for (std::size_t i = 16; i-- > 0; session >>= 4U) {
        name[i] = digits[session & 0xFU];
    }
    name += '-';
    name += client_hex;
    return name;
}

txn_op receipt_op(std::string path, std::uint64_t sequence, bool slot_created) {
    if (slot_created) {
        return txn_op::set(std::move(path), std::to_string(sequence));
    }
    return txn_op::create(std::move(path), std::to_string(sequence), true);
}

receipt_outcome read_receipt(op_code c) noexcept {
    switch (c) {
    case op_code::ok:
    case op_code::not_run:
        return receipt_outcome::written;
    case op_code::node_exists:
        return receipt_outcome::slot_exists;
    case op_code::no_node:
        return receipt_outcome::slot_missing;
    default:
        return receipt_outcome::broken;
    }
}

bool receipt_shows(std::string_view data, std::uint64_t sequence) {
    return data == std::to_string(sequence);
}

// --- T5 --------------------------------------------------------------------------------------

txn_op consume_op(std::string path) {
    return txn_op::remove(std::move(path));
}

consume_outcome read_consume(const txn_answer& a) noexcept {
    if (!a.failed) {
        return consume_outcome::consumed;
    }
    const auto c = only_code(a);
    if (!c) {
        return consume_outcome::unknown;
    }
    switch (*c) {
    case op_code::no_node:
        return consume_outcome::consumed;
    case op_code::not_empty:
        return consume_outcome::foreign_below;
    default:
        return consume_outcome::failed;
    }
}

bundle_consume_plan bundle_consume_ops(
    std::string path,
    const task_result& read,
    std::int32_t version,
    std::size_t size,
    const std::vector<std::size_t>& indices
) {
    bundle_consume_plan plan;
    plan.marked = read.consumed;
    for (const auto i : indices) {
        if (std::binary_search(read.consumed.begin(), read.consumed.end(), i)) {
            plan.taken.push_back(i);
        } else {
            plan.marked.push_back(i);
        }
    }
    std::sort(plan.marked.begin(), plan.marked.end());
    plan.marked.erase(std::unique(plan.marked.begin(), plan.marked.end()), plan.marked.end());
    plan.all = plan.marked.size() >= size;
    if (plan.all) {
        plan.ops.push_back(txn_op::remove(std::move(path), version));
    } else {
        auto marked = read;
        marked.consumed = plan.marked;
        plan.ops.push_back(txn_op::set(std::move(path), encode(marked), version));
    }
    return plan;
}

bundle_consume_outcome read_bundle_consume(const txn_answer& a) noexcept {
    if (!a.failed) {
        return bundle_consume_outcome::committed;
    }
    const auto c = only_code(a);
    if (!c) {
        return bundle_consume_outcome::unknown;
    }
    if (*c == op_code::bad_version || *c == op_code::no_node) {
        return bundle_consume_outcome::conflict;
    }
    return bundle_consume_outcome::failed;
}

}  // namespace zkd::protocol
