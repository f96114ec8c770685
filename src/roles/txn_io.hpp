// SPDX-License-Identifier: MIT
#pragma once

// Between protocol's transaction descriptions (protocol/master_txn.hpp) and zkco's multi:
// ops out, per-op codes back, and the change logs a transaction's creates go in.

#include "protocol/change_log.hpp"
#include "protocol/layout.hpp"
#include "protocol/master_txn.hpp"
#include "protocol/task.hpp"
#include "zkco/types.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <string_view>
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

/// True when a group the batcher sent with a prefix of `check(/epoch, E)` (the master's) failed
/// because that check did, that is because another master took over: the error is
/// bad_version and none of the group's own ops (`own`, the prefix not among them) failed
/// with it. A group's own ops check versions only where they say so (T8's delete of a client
/// directory at the version its listing saw, the replacement of /master): such a failure is
/// that group's alone and deposes nobody.
inline bool epoch_check_failed(zkco::error_code ec, const std::vector<zkco::op_result>& own) {
    return ec == zkco::errc::bad_version &&
           std::none_of(own.begin(), own.end(), [](const zkco::op_result& one) {
               return one.ec == zkco::errc::bad_version;
           });
}

/// The directory whose change log (docs/protocol.md §6 "Change logs") names the child `op`
/// creates; empty when `op` creates no child of /pending/<s> or /assign/<member>.
inline std::string_view logged_dir(const zkco::multi_op& op) noexcept {
    const auto* c = std::get_if<zkco::op::create>(&op);
    if (c == nullptr) {
        return {};
    }
    const auto slash = c->path.rfind('/');
    if (slash == std::string::npos) {
        return {};
    }
    const auto dir = std::string_view(c->path).substr(0, slash);
    return protocol::is_logged_dir(dir) ? dir : std::string_view();
}

/// The change logs of one transaction: every create noted goes in its directory's log, with
/// its data while the transaction's 64 KiB for data in logs last; append_to() ends the
/// transaction with one set(dir, log, any version) per directory.
class change_log_writer {
public:
    /// Notes `op` if it creates a child of a logged directory; true if it did.
    bool note(const zkco::multi_op& op) {
        const auto dir = logged_dir(op);
        if (dir.empty()) {
            return false;
        }
        const auto& c = std::get<zkco::op::create>(op);
        protocol::log_entry e{c.path.substr(dir.size() + 1), std::nullopt};
        if (c.data.size() <= inline_left_) {
            inline_left_ -= c.data.size();
            e.data = c.data;
        }
        auto it = logs_.find(dir);
        if (it == logs_.end()) {
            it = logs_.emplace(std::string(dir), protocol::change_log{}).first;
        }
        it->second.created.push_back(std::move(e));
        return true;
    }
    /// The directories noted: the sets append_to() adds.
    [[nodiscard]] std::size_t size() const noexcept { return logs_.size(); }
    void append_to(std::vector<zkco::multi_op>& ops) const {
        for (const auto& [dir, log] : logs_) {
            ops.emplace_back(zkco::op::set{dir, protocol::encode(log), -1});
        }
    }

private:
    std::map<std::string, protocol::change_log, std::less<>> logs_;
    std::size_t inline_left_ = protocol::max_log_inline_bytes;
};

/// Ends `ops`, a transaction sent without a multi_batcher (which does this itself once
/// enable_change_logs() is called), with the change logs of its creates.
inline void append_change_logs(std::vector<zkco::multi_op>& ops) {
    change_log_writer logs;
    for (const auto& op : ops) {
        logs.note(op);
    }
    logs.append_to(ops);
}

}  // namespace zkd::roles
