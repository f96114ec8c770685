// SPDX-License-Identifier: MIT
#include "protocol/client_txn.hpp"

#include "protocol/ids.hpp"

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

bool bundle_wholly_consumed(
    const std::vector<std::size_t>& consumed,
    const std::vector<std::size_t>& published,
    std::size_t size
) {
    for (std::size_t k = 0; k < size; ++k) {
        if (!std::binary_search(published.begin(), published.end(), k) &&
            !std::binary_search(consumed.begin(), consumed.end(), k)) {
            return false;
        }
    }
    return true;
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
        if (is_published(read, i)) {
            plan.published.push_back(i);
        } else if (std::binary_search(read.consumed.begin(), read.consumed.end(), i)) {
            plan.taken.push_back(i);
        } else {
            plan.marked.push_back(i);
        }
    }
    std::sort(plan.marked.begin(), plan.marked.end());
    plan.marked.erase(std::unique(plan.marked.begin(), plan.marked.end()), plan.marked.end());
    plan.all = bundle_wholly_consumed(plan.marked, read.published, size);
    if (!plan.all && plan.marked == read.consumed) {
        return plan;  // nothing of ours to mark (all taken or published): no write
    }
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

// --- T4e, read -------------------------------------------------------------------------------

std::string entry_result_path(const layout& l, std::string_view bundle, std::size_t index) {
    std::string p = l.result_dir(bundle);
    p.append("/").append(bundled_task_id(bundle, index));
    return p;
}

bool is_published(const task_result& whole, std::size_t index) noexcept {
    return std::binary_search(whole.published.begin(), whole.published.end(), index);
}

std::vector<std::size_t> deliverable_entries(const task_result& whole, std::size_t size) {
    std::vector<std::size_t> out;
    for (std::size_t k = 0; k < size; ++k) {
        if (!is_published(whole, k) &&
            !std::binary_search(whole.consumed.begin(), whole.consumed.end(), k)) {
            out.push_back(k);
        }
    }
    return out;
}

entry_source locate_entry(bool own, const task_result* whole, std::size_t index) noexcept {
    if (own) {
        return entry_source::own;
    }
    if (whole == nullptr) {
        return entry_source::none;
    }
    if (is_published(*whole, index) ||
        std::binary_search(whole->consumed.begin(), whole->consumed.end(), index)) {
        return entry_source::consumed;
    }
    return entry_source::bundle;
}

codec_result<std::optional<task_result>> entry_result(
    const std::optional<task_result>& own,
    const std::optional<task_result>& whole,
    std::size_t index,
    std::string id
) {
    switch (locate_entry(own.has_value(), whole ? &*whole : nullptr, index)) {
    case entry_source::own: {
        auto r = *own;
        r.task = std::move(id);
        return std::optional<task_result>(std::move(r));
    }
    case entry_source::bundle: {
        auto r = bundled_result(*whole, index, std::move(id));
        if (!r) {
            return r.error();
        }
        return std::optional<task_result>(std::move(*r));
    }
    case entry_source::consumed:
    case entry_source::none:
        break;
    }
    return std::optional<task_result>();
}

}  // namespace zkd::protocol
