// SPDX-License-Identifier: MIT
#include "schedule/txn.hpp"

#include "protocol/change_log.hpp"
#include "protocol/ids.hpp"
#include "protocol/task.hpp"

#include <boost/json/object.hpp>
#include <boost/json/string.hpp>

#include <map>
#include <utility>

namespace zkd::schedule {

using protocol::txn_op;

std::string schedules_dir() {
    return "/schedules";
}

std::string schedule_node(std::string_view name) {
    return schedules_dir() + "/" + std::string(name);
}

std::string change_note(std::string_view name) {
    boost::json::object o;
    o["v"] = 1;
    o["changed"] = name;
    return protocol::to_text(o);
}

std::optional<std::string> read_change_note(std::string_view data) {
    boost::system::error_code ec;
    auto doc = protocol::parse_json(data, ec);
    if (ec || !doc.is_object()) {
        return std::nullopt;
    }
    const auto* v = doc.get_object().if_contains("v");
    const auto* name = doc.get_object().if_contains("changed");
    if (v == nullptr || !v->is_int64() || v->get_int64() != 1 || name == nullptr ||
        !name->is_string() || !is_valid_name(name->get_string())) {
        return std::nullopt;
    }
    return std::string(name->get_string());
}

std::vector<txn_op> add_ops(const schedule& s) {
    return {
        txn_op::create(protocol::layout::client_results(s.client), ""),
        txn_op::create(schedule_node(s.name), encode(s)),
        txn_op::set(schedules_dir(), change_note(s.name)),
    };
}

std::vector<txn_op> change_ops(const schedule& s, std::int32_t version) {
    return {
        txn_op::set(schedule_node(s.name), encode(s), version),
        txn_op::set(schedules_dir(), change_note(s.name)),
    };
}

std::vector<txn_op> remove_ops(std::string_view name) {
    return {
        txn_op::remove(schedule_node(name)),
        txn_op::set(schedules_dir(), change_note(name)),
    };
}

fire_txn fire_ops(
    const protocol::layout& l, std::int64_t epoch, const std::vector<firing_write>& writes
) {
    fire_txn t;
    t.ops.push_back(txn_op::check(protocol::layout::epoch(), static_cast<std::int32_t>(epoch)));
    t.owner.push_back(-1);
    std::map<std::uint32_t, protocol::change_log> logs;
    std::size_t inline_bytes = 0;
    for (std::size_t i = 0; i < writes.size(); ++i) {
        const auto& w = writes[i];
        t.ops.push_back(txn_op::set(schedule_node(w.name), w.document, w.version));
        t.owner.push_back(static_cast<int>(i));
        for (const auto& [tid, data] : w.creates) {
            const auto shard = protocol::shard_of(tid, l.pending_shards);
            t.ops.push_back(txn_op::create(protocol::layout::pending_shard(shard) + "/" + tid, data)
            );
            t.owner.push_back(static_cast<int>(i));
            // Each shard's change log names every task created there, in order, with its data
            // while the transaction's budget for it lasts (§6 "Change logs").
            protocol::log_entry e{tid, std::nullopt};
            const auto escaped =
                protocol::to_text(boost::json::value(boost::json::string(data))).size();
            if (inline_bytes + escaped <= protocol::max_log_inline_bytes) {
                inline_bytes += escaped;
                e.data = data;
            }
            logs[shard].created.push_back(std::move(e));
        }
    }
    for (auto& [shard, log] : logs) {
        t.ops.push_back(txn_op::set(protocol::layout::pending_shard(shard), protocol::encode(log)));
        t.owner.push_back(-1);
    }
    return t;
}

}  // namespace zkd::schedule
