// SPDX-License-Identifier: MIT
#pragma once

// Between protocol's transaction descriptions (protocol/master_txn.hpp) and zkco's multi:
// ops out, per-op codes back, and the change logs a transaction's creates go in.

#include "protocol/change_log.hpp"
#include "protocol/delay.hpp"
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

/// What a transaction's estimated size (zkco::estimated_size of its ops, change logs
/// included) stays under: ZooKeeper drops a client whose request is longer than the server's
/// jute.maxbuffer (1 MiB by default). A multi_batcher's groups take up to its max_bytes
/// (900,000 by default); the logs' data takes what is left, up to max_log_inline_bytes.
inline constexpr std::size_t max_txn_bytes = 1'000'000;

/// Bytes `s` takes as a JSON string: its quotes, and an escape for each '"', '\\' and control
/// character (\uXXXX for those without a short form).
inline std::size_t json_string_bytes(std::string_view s) noexcept {
    std::size_t n = 2 + s.size();
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' ||
            c == '\t') {
            n += 1;
        } else if (c < 0x20) {
            n += 5;
        }
    }
    return n;
}

/// The change logs of one transaction: every create noted goes in its directory's log;
/// append_to() ends the transaction with one set(dir, log, any version) per directory, the
/// children's data in them in the order they were noted while the transaction's room for
/// it lasts (max_log_inline_bytes at most), later children by name only.
class change_log_writer {
public:
    /// Notes `op` if it creates a child of a logged directory; true if it did.
    bool note(const zkco::multi_op& op) {
        const auto dir = logged_dir(op);
        if (dir.empty()) {
            return false;
        }
        const auto& c = std::get<zkco::op::create>(op);
        auto it = dirs_.find(dir);
        if (it == dirs_.end()) {
            it = dirs_.emplace(std::string(dir), dirs_.size()).first;
            bytes_ += set_overhead + dir.size();
        }
        // Data that could never fit the budget is not copied.
        const auto cost = json_string_bytes(c.data);
        const bool fits = cost <= protocol::max_log_inline_bytes;
        notes_.push_back(
            {it->second, c.path.substr(dir.size() + 1), fits ? c.data : std::string(),
             fits ? cost : no_room,
             // A delayed shard's log gives each entry its due time (docs/protocol.md §6
             // "Delayed tasks and retries"), so the master needs no read to learn it.
             protocol::layout::is_delayed_shard(dir) ? protocol::read_due_ms(c.data) : std::nullopt}
        );
        bytes_ += entry_overhead + notes_.back().name.size();
        return true;
    }
    /// The directories noted: the sets append_to() adds.
    [[nodiscard]] std::size_t size() const noexcept { return dirs_.size(); }
    /// The estimated size of the sets append_to() adds, without the children's data.
    [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
    /// Adds the sets; `data_room`: bytes the children's data may take in them together.
    void append_to(std::vector<zkco::multi_op>& ops, std::size_t data_room) const {
        std::vector<protocol::change_log> logs(dirs_.size());
        std::size_t left = std::min(data_room, protocol::max_log_inline_bytes);
        for (const auto& n : notes_) {
            protocol::log_entry e{n.name, std::nullopt, n.due_ms};
            if (n.cost <= left) {
                left -= n.cost;
                e.data = n.data;
            }
            logs[n.dir].created.push_back(std::move(e));
        }
        for (const auto& [dir, i] : dirs_) {
            ops.emplace_back(zkco::op::set{dir, protocol::encode(logs[i]), -1});
        }
    }

private:
    // A set op, and a log entry without data ({"name":"...","data":}), as estimated_size and
    // the JSON count them, rounded up.
    static constexpr std::size_t set_overhead = 64;
    static constexpr std::size_t entry_overhead = 32;

    static constexpr std::size_t no_room = static_cast<std::size_t>(-1);

    struct noted {
        std::size_t dir;  // index into the logs, by dirs_
        std::string name;
        std::string data;  // empty when it cannot fit (cost no_room)
        std::size_t cost;  // json_string_bytes(data)
        std::optional<std::int64_t> due_ms;
    };
    std::map<std::string, std::size_t, std::less<>> dirs_;
    std::vector<noted> notes_;
    std::size_t bytes_ = 0;
};

/// Ends `ops`, a transaction sent without a multi_batcher (which does this itself once
/// enable_change_logs() is called), with the change logs of its creates.
inline void append_change_logs(std::vector<zkco::multi_op>& ops) {
    change_log_writer logs;
    std::size_t bytes = 0;
    for (const auto& op : ops) {
        logs.note(op);
        bytes += zkco::estimated_size(op);
    }
    const auto used = bytes + logs.bytes();
    logs.append_to(ops, used < max_txn_bytes ? max_txn_bytes - used : 0);
}

}  // namespace zkd::roles
