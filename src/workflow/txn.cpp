// SPDX-License-Identifier: MIT
#include "workflow/txn.hpp"

#include "protocol/ids.hpp"
#include "protocol/task.hpp"

#include <boost/json/string.hpp>

#include <map>
#include <utility>

namespace zkd::workflow {

using protocol::txn_op;

std::string workflows_dir() {
    return "/workflows";
}

std::string workflow_node(std::string_view id) {
    return workflows_dir() + "/" + std::string(id);
}

std::string spec_chunk_node(std::string_view id, std::size_t i) {
    return workflow_node(id) + "/" + chunk_name(i);
}

std::string state_node(std::string_view id) {
    return workflow_node(id) + "/state";
}

std::string cancel_node(std::string_view id) {
    return workflow_node(id) + "/cancel";
}

std::string results_node(workflow_ref w) {
    return protocol::layout::client_results(client_hex(w.client));
}

std::vector<std::vector<txn_op>> submit_txns(
    workflow_ref w, workflow_header h, std::string_view canonical
) {
    const auto id = workflow_id(w);
    const auto chunks = split_chunks(canonical);
    h.chunks = chunks.size();
    h.spec_bytes = canonical.size();
    const bool one = chunks.size() <= chunks_per_submit_txn;
    std::vector<std::vector<txn_op>> out(1);
    out[0].push_back(txn_op::create(results_node(w), ""));
    out[0].push_back(txn_op::create(workflow_node(id), one ? encode_header(h) : std::string{}));
    for (std::size_t i = 0; i < chunks.size(); ++i) {
        if (out.back().size() >= chunks_per_submit_txn + (out.size() == 1 ? 2 : 0)) {
            out.emplace_back();
        }
        out.back().push_back(txn_op::create(spec_chunk_node(id, i), std::string(chunks[i])));
    }
    if (!one) {
        out.back().push_back(txn_op::set(workflow_node(id), encode_header(h), 0));
    }
    return out;
}

std::vector<txn_op> launch_ops(
    const protocol::layout& l, std::string_view id, std::int64_t epoch, const wf_do::write& w
) {
    std::vector<txn_op> ops;
    ops.reserve(w.creates.size() + 20);
    ops.push_back(txn_op::check(protocol::layout::epoch(), static_cast<std::int32_t>(epoch)));
    if (w.version) {
        ops.push_back(txn_op::set(state_node(id), w.state, *w.version));
    } else {
        ops.push_back(txn_op::create(state_node(id), w.state));
    }
    // Each shard's change log names every task created there, in order, with its data while
    // the transaction's budget for it lasts (docs/protocol.md §6 "Change logs").
    std::map<std::uint32_t, protocol::change_log> logs;
    std::size_t inline_bytes = 0;
    for (const auto& c : w.creates) {
        const auto shard = protocol::shard_of(c.tid, l.pending_shards);
        ops.push_back(txn_op::create(protocol::layout::pending_shard(shard) + "/" + c.tid, c.data));
        protocol::log_entry e{c.tid, std::nullopt};
        const auto escaped =
            protocol::to_text(boost::json::value(boost::json::string(c.data))).size();
        if (inline_bytes + escaped <= protocol::max_log_inline_bytes) {
            inline_bytes += escaped;
            e.data = c.data;
        }
        logs[shard].created.push_back(std::move(e));
    }
    for (auto& [shard, log] : logs) {
        ops.push_back(txn_op::set(protocol::layout::pending_shard(shard), protocol::encode(log)));
    }
    return ops;
}

txn_op cancel_request_op(std::string_view id) {
    return txn_op::create(cancel_node(id), "");
}

txn_op cancel_task_op(std::string_view tid, std::int64_t now_ms) {
    return txn_op::create(
        protocol::layout::cancel_request(tid), protocol::encode(protocol::cancel_info{now_ms})
    );
}

}  // namespace zkd::workflow
