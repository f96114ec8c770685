// SPDX-License-Identifier: MIT
#include "workflow/txn.hpp"

#include "protocol/ids.hpp"
#include "protocol/task.hpp"

#include <boost/json/string.hpp>

#include <algorithm>
#include <utility>

namespace zkd::workflow {

using protocol::txn_op;

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

std::optional<std::string> direct_type(std::string_view tid, std::string_view data) {
    auto n = protocol::decode_task_node(tid, data);
    if (!n || !n->task.bundle.empty() || n->task.timing.contains("due_ms")) {
        return std::nullopt;
    }
    return std::move(n->task.type);
}

std::vector<txn_op> launch_ops(
    const protocol::layout& l,
    std::string_view id,
    std::int64_t epoch,
    const wf_do::write& w,
    const std::vector<std::optional<direct_target>>& placed
) {
    std::vector<txn_op> ops;
    ops.reserve(w.creates.size() + 20);
    ops.push_back(txn_op::check(protocol::layout::epoch(), static_cast<std::int32_t>(epoch)));
    if (w.version) {
        ops.push_back(txn_op::set(state_node(id), w.state, *w.version));
    } else {
        ops.push_back(txn_op::create(state_node(id), w.state));
    }
    // Each directory's change log names every task created there, in order, with its data
    // while the transaction's budget for it lasts (docs/protocol.md §6 "Change logs").
    std::vector<std::pair<std::string, protocol::change_log>> logs;  // pending shards
    std::vector<std::pair<std::string, protocol::change_log>> dirs;  // workers' directories
    const auto log_of = [](auto& in, const std::string& dir) -> protocol::change_log& {
        for (auto& [d, log] : in) {
            if (d == dir) {
                return log;
            }
        }
        return in.emplace_back(dir, protocol::change_log{}).second;
    };
    std::size_t inline_bytes = 0;
    for (std::size_t i = 0; i < w.creates.size(); ++i) {
        const auto& c = w.creates[i];
        const auto* to = i < placed.size() && placed[i] ? &*placed[i] : nullptr;
        const auto& data = to != nullptr ? to->data : c.data;
        protocol::change_log* log = nullptr;
        if (to != nullptr) {
            const auto dir = protocol::layout::assign_dir(to->worker);
            const bool first = std::none_of(dirs.begin(), dirs.end(), [&](const auto& d) {
                return d.first == dir;
            });
            if (first) {
                ops.push_back(
                    txn_op::check(protocol::layout::worker(to->worker), to->worker_version)
                );
            }
            ops.push_back(txn_op::create(protocol::layout::assignment(to->worker, c.tid), data));
            log = &log_of(dirs, dir);
        } else {
            const auto shard = protocol::shard_of(c.tid, l.pending_shards);
            const auto dir = protocol::layout::pending_shard(shard);
            ops.push_back(txn_op::create(dir + "/" + c.tid, data));
            log = &log_of(logs, dir);
        }
        protocol::log_entry e{c.tid, std::nullopt};
        const auto escaped =
            protocol::to_text(boost::json::value(boost::json::string(data))).size();
        if (inline_bytes + escaped <= protocol::max_log_inline_bytes) {
            inline_bytes += escaped;
            e.data = data;
        }
        log->created.push_back(std::move(e));
    }
    for (auto* group : {&logs, &dirs}) {
        for (auto& [dir, log] : *group) {
            ops.push_back(txn_op::set(dir, protocol::encode(log)));
        }
    }
    return ops;
}

static_assert(workflow_fsm::options{}.max_write_bytes == max_launch_bytes);

namespace {

// As zkco::estimated_size counts an op: a header with its length prefixes, and a create's
// ACL.
constexpr std::size_t op_overhead = 32;
constexpr std::size_t acl_overhead = 32;
// What stamp() adds to a task's data at most besides the worker's id:
// ,"assigned_ms":<up to 20 characters>,"worker":"<id>" rounded up.
constexpr std::size_t stamp_overhead = 64;
// A change log's JSON around its entries ({"v":1,"created":[...]}), rounded up, and one
// entry's around its name and the key of its data ({"name":"<tid>","data":},), rounded up; a
// name is a task id, which needs no escape (the data's own bytes, escaped, count in
// protocol::max_log_inline_bytes).
constexpr std::size_t log_overhead = 32;
constexpr std::size_t entry_overhead = 24;
// The longest shard name: shards are numbered below 2^32.
constexpr std::size_t max_shard_name = 10;
// The longest member id (protocol::is_valid_member_id): its host, a pid of up to 19 digits,
// 8 hex digits and two dashes.
constexpr std::size_t max_member_id = protocol::max_member_host_length + 1 + 19 + 1 + 8;

std::size_t op_bytes(const txn_op& op) {
    std::size_t n = op_overhead + op.path.size();
    if (op.what == txn_op::kind::create) {
        n += op.data.size() + acl_overhead;
    } else if (op.what == txn_op::kind::set) {
        n += op.data.size();
    }
    return n;
}

}  // namespace

std::size_t launch_bytes(const std::vector<txn_op>& ops) {
    std::size_t n = 0;
    for (const auto& op : ops) {
        n += op_bytes(op);
    }
    return n;
}

std::size_t launch_create_bytes(std::string_view tid, std::size_t data_bytes) {
    const auto pending_dir = protocol::layout::pending_dir().size() + 1 + max_shard_name;
    const auto assign_dir = protocol::layout::assign_dir().size() + 1 + max_member_id;
    const auto dir = std::max(pending_dir, assign_dir);
    const auto create = op_overhead + acl_overhead + dir + 1 + tid.size() + data_bytes +
                        stamp_overhead + max_member_id;
    const auto shard_log = op_overhead + pending_dir + log_overhead;
    return create + shard_log + entry_overhead + tid.size();
}

std::size_t launch_fixed_bytes(std::string_view id, std::size_t state_bytes) {
    const auto epoch = op_overhead + protocol::layout::epoch().size();
    const auto state = op_overhead + acl_overhead + state_node(id).size() + state_bytes;
    const auto worker_check =
        op_overhead + protocol::layout::workers_dir().size() + 1 + max_member_id;
    const auto worker_log =
        op_overhead + protocol::layout::assign_dir().size() + 1 + max_member_id + log_overhead;
    return epoch + state + max_placement_workers * (worker_check + worker_log) +
           protocol::max_log_inline_bytes;
}

std::size_t launch_bound(
    std::string_view id, std::string_view state, const std::vector<task_create>& creates
) {
    auto n = launch_fixed_bytes(id, state.size());
    for (const auto& c : creates) {
        n += launch_create_bytes(c.tid, c.data.size());
    }
    return n;
}

launch_failure read_launch_failure(
    const std::vector<txn_op>& ops, std::optional<std::size_t> failed_op, protocol::op_code code
) {
    if (!failed_op || *failed_op >= ops.size()) {
        return launch_failure::other;
    }
    if (*failed_op == 0) {
        return launch_failure::deposed;
    }
    const auto& op = ops[*failed_op];
    const auto workers = protocol::layout::workers_dir() + "/";
    const auto assign = protocol::layout::assign_dir() + "/";
    if (op.what == txn_op::kind::check && op.path.starts_with(workers) &&
        (code == protocol::op_code::no_node || code == protocol::op_code::bad_version)) {
        return launch_failure::worker_gone;
    }
    if (op.what == txn_op::kind::create && op.path.starts_with(assign) &&
        code == protocol::op_code::no_node) {
        return launch_failure::worker_gone;
    }
    return launch_failure::other;
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
