// SPDX-License-Identifier: MIT
#pragma once

// Between protocol's transaction descriptions (protocol/master_txn.hpp) and zkco's multi:
// ops out, per-op codes back.

#include "protocol/change_log.hpp"
#include "protocol/master_txn.hpp"
#include "zkco/types.hpp"

#include <vector>

namespace zkd::roles {

/// What a change log's reader needs of a directory's stat (protocol/change_log.hpp).
inline protocol::dir_stat to_dir_stat(const zkco::stat& s) noexcept {
    return protocol::dir_stat{s.czxid, s.version, s.cversion};
}

inline zkco::multi_op to_zkco(protocol::txn_op op) {
    using kind = protocol::txn_op::kind;
    switch (op.what) {
    case kind::create:
        return zkco::op::create{
            std::move(op.path),
            std::move(op.data),
            op.ephemeral ? zkco::create_mode::ephemeral : zkco::create_mode::persistent,
            {}};
    case kind::remove:
        return zkco::op::remove{std::move(op.path), op.version};
    case kind::set:
        return zkco::op::set{std::move(op.path), std::move(op.data), op.version};
    case kind::check:
        break;
    }
    return zkco::op::check{std::move(op.path), op.version};
}

inline std::vector<zkco::multi_op> to_zkco(std::vector<protocol::txn_op> ops) {
    std::vector<zkco::multi_op> out;
    out.reserve(ops.size());
    for (auto& op : ops) {
        out.push_back(to_zkco(std::move(op)));
    }
    return out;
}

inline protocol::op_code to_op_code(zkco::error_code ec) {
    if (!ec) {
        return protocol::op_code::ok;
    }
    if (ec == zkco::errc::no_node) {
        return protocol::op_code::no_node;
    }
    if (ec == zkco::errc::node_exists) {
        return protocol::op_code::node_exists;
    }
    if (ec == zkco::errc::not_empty) {
        return protocol::op_code::not_empty;
    }
    if (ec == zkco::errc::bad_version) {
        return protocol::op_code::bad_version;
    }
    if (ec == zkco::errc::runtime_inconsistency) {
        return protocol::op_code::not_run;
    }
    return protocol::op_code::other;
}

/// A group's answer from the batcher (its own results, without the prefix).
inline protocol::txn_answer to_answer(zkco::error_code ec, const std::vector<zkco::op_result>& r) {
    protocol::txn_answer a;
    a.failed = static_cast<bool>(ec);
    a.per_op.reserve(r.size());
    for (const auto& one : r) {
        a.per_op.push_back(to_op_code(one.ec));
    }
    return a;
}

}  // namespace zkd::roles
