// SPDX-License-Identifier: MIT
#include "roles/workflow/client.hpp"

#include "protocol/ids.hpp"
#include "protocol/layout.hpp"
#include "protocol/task.hpp"
#include "roles/txn/zk_ops.hpp"
#include "workflow/ids.hpp"
#include "workflow/spec.hpp"
#include "workflow/txn.hpp"
#include "workflow/workflow_fsm.hpp"
#include "zkco/read_batch.hpp"
#include "zkco/retry.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>

#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <utility>

namespace zkd::roles {

namespace asio = boost::asio;
namespace wf = zkd::workflow;
namespace json = boost::json;

namespace {

workflow_error zk_error(std::string_view what, zkco::error_code ec) {
    return workflow_error{workflow_error::kind::zookeeper, std::string(what) + ": " + ec.message()};
}

workflow_error not_found(std::string_view id) {
    return workflow_error{
        workflow_error::kind::not_found,
        "no workflow " + std::string(id) + " (never submitted, or reaped after it ended)"};
}

/// The types live workers serve; nullopt when there is no worker (or they cannot be read).
asio::awaitable<std::optional<std::set<std::string>>> served_types(zkco::client& zk) {
    auto kids = co_await zk.get_children(protocol::layout::workers_dir());
    if (!kids) {
        co_return std::nullopt;
    }
    std::vector<std::string> paths;
    paths.reserve(kids->names.size());
    for (const auto& name : kids->names) {
        paths.push_back(protocol::layout::worker(name));
    }
    std::set<std::string> served;
    bool any = false;
    for (const auto& node : co_await zkco::get_all(zk, std::move(paths))) {
        if (!node) {
            continue;
        }
        if (auto w = protocol::decode_worker(node->data)) {
            any = true;
            served.insert(w->types.begin(), w->types.end());
        }
    }
    if (!any) {
        co_return std::nullopt;
    }
    co_return served;
}

/// Runs one W1 transaction; true when it applied (checked by `probe` after a lost answer).
struct txn_outcome {
    bool applied = false;
    bool taken = false;  ///< the first op (the results directory) or the workflow node exists
    std::optional<workflow_error> error;
};

asio::awaitable<txn_outcome> run_submit_txn(
    zkco::client& zk, const std::vector<protocol::txn_op>& ops, bool first
) {
    for (;;) {
        auto r = co_await zk.multi(to_zkco(ops));
        if (r) {
            co_return txn_outcome{true, false, std::nullopt};
        }
        if (!r.results.empty()) {
            const auto at = r.failed_op().value_or(0);
            if (first && at <= 1 && r.results[at].ec == zkco::errc::node_exists) {
                co_return txn_outcome{false, true, std::nullopt};
            }
            co_return txn_outcome{false, false, zk_error("cannot store the workflow", r.ec)};
        }
        // The answer was lost: did it apply? Its last create (a chunk, or the workflow node)
        // exists exactly when it did; a header set shows in the workflow node's version.
        const bool connected = co_await zkco::wait_connected(zk);
        if (!connected) {
            co_return txn_outcome{false, false, zk_error("cannot store the workflow", r.ec)};
        }
        const auto& last = ops.back();
        if (last.what == protocol::txn_op::kind::set) {
            auto s = co_await zk.exists(last.path);
            if (s && *s && (*s)->version > 0) {
                co_return txn_outcome{true, false, std::nullopt};
            }
        } else {
            auto s = co_await zk.exists(last.path);
            if (s && *s) {
                co_return txn_outcome{true, false, std::nullopt};
            }
        }
    }
}

std::uint32_t random_client() {
    static thread_local std::mt19937 gen{std::random_device{}()};
    return static_cast<std::uint32_t>(gen());
}

/// The spec stored for `id`, parsed, with its header.
struct stored_spec {
    wf::workflow_header header;
    std::shared_ptr<const wf::workflow_spec> spec;
};

asio::awaitable<workflow_result<stored_spec>> read_spec(zkco::client& zk, std::string_view id) {
    auto h = co_await zkco::retry_unknown(zk, [&] { return zk.get(wf::workflow_node(id)); });
    if (!h) {
        if (h.error() == zkco::errc::no_node) {
            co_return not_found(id);
        }
        co_return zk_error("cannot read workflow " + std::string(id), h.error());
    }
    if (h->data.empty()) {
        co_return workflow_error{
            workflow_error::kind::not_found,
            "workflow " + std::string(id) + " is still being submitted"};
    }
    auto header = wf::decode_header(h->data);
    if (!header) {
        co_return workflow_error{
            workflow_error::kind::garbage,
            "workflow " + std::string(id) + ": its header is garbage: " + header.error().message};
    }
    std::string text;
    for (std::size_t i = 0; i < header->chunks; ++i) {
        auto c =
            co_await zkco::retry_unknown(zk, [&] { return zk.get(wf::spec_chunk_node(id, i)); });
        if (!c) {
            co_return zk_error("cannot read workflow " + std::string(id) + "'s spec", c.error());
        }
        text += c->data;
    }
    auto spec = wf::parse_spec(text);
    if (!spec) {
        co_return workflow_error{
            workflow_error::kind::garbage,
            "workflow " + std::string(id) + ": its spec is garbage: " + spec.error().message};
    }
    co_return stored_spec{*header, std::make_shared<const wf::workflow_spec>(std::move(*spec))};
}

}  // namespace

void throw_exception_from_error(const workflow_error& e, const boost::source_location&) {
    throw std::runtime_error(e.message);
}

asio::awaitable<workflow_result<std::string>> submit_workflow(
    zkco::client& zk, std::string_view text, workflow_submit_options opts
) {
    auto spec = wf::parse_spec(text);
    if (!spec) {
        co_return workflow_error{workflow_error::kind::invalid_spec, spec.error().message};
    }
    if (!opts.allow_unserved) {
        if (auto served = co_await served_types(zk)) {
            for (const auto& step : spec->steps) {
                if (!served->contains(step.type)) {
                    std::string list;
                    for (const auto& t : *served) {
                        list += (list.empty() ? "" : ", ") + t;
                    }
                    co_return workflow_error{
                        workflow_error::kind::unserved_type,
                        "step \"" + step.name + "\": no worker serves task type '" + step.type +
                            "' (the workers serve: " + (list.empty() ? "nothing" : list) +
                            "); nothing was submitted. Pass --allow-unserved if a worker that "
                            "serves it is about to join"};
                }
            }
        }
    }
    const auto canonical = wf::encode_spec(*spec);
    if (canonical.size() > wf::max_spec_bytes) {
        co_return workflow_error{
            workflow_error::kind::invalid_spec, "the spec is " + std::to_string(canonical.size()) +
                                                    " bytes once stored, over the limit of " +
                                                    std::to_string(wf::max_spec_bytes) + " bytes"};
    }
    auto dir = co_await zkco::retry_unknown(zk, [&] { return zk.create(wf::workflows_dir(), ""); });
    if (!dir && dir.error() != zkco::errc::node_exists) {
        co_return zk_error("cannot make /workflows", dir.error());
    }
    wf::workflow_header header;
    header.name = spec->name;
    header.steps = spec->steps.size();
    header.submitted_by = opts.submitted_by;
    for (int tries = 0; tries < 8; ++tries) {
        const wf::workflow_ref ref{protocol::now_ms(), random_client()};
        header.created_ms = ref.created_ms;
        const auto txns = wf::submit_txns(ref, header, canonical);
        auto first = co_await run_submit_txn(zk, txns[0], true);
        if (first.taken) {
            continue;  // that client part is someone's already: draw another
        }
        if (first.error) {
            co_return *first.error;
        }
        for (std::size_t i = 1; i < txns.size(); ++i) {
            auto next = co_await run_submit_txn(zk, txns[i], false);
            if (next.error) {
                co_return *next.error;
            }
        }
        co_return wf::workflow_id(ref);
    }
    co_return workflow_error{workflow_error::kind::zookeeper, "no free workflow id in 8 tries"};
}

asio::awaitable<workflow_result<workflow_snapshot>> read_workflow(
    zkco::client& zk, std::string_view id
) {
    const auto ref = wf::parse_workflow_id(id);
    if (!ref) {
        co_return workflow_error{
            workflow_error::kind::not_found,
            "'" + std::string(id) + "' is no workflow id (wf-<13 digits>-<8 hex digits>)"};
    }
    auto stored = co_await read_spec(zk, id);
    if (!stored) {
        co_return stored.error();
    }
    const auto& spec = *stored->spec;
    wf::wf_saw::loaded load;
    auto st = co_await zkco::retry_unknown(zk, [&] { return zk.get(wf::state_node(id)); });
    if (st) {
        auto decoded = wf::decode_state(st->data, spec.steps.size());
        if (!decoded) {
            co_return workflow_error{
                workflow_error::kind::garbage,
                "workflow " + std::string(id) +
                    ": its state is garbage: " + decoded.error().message};
        }
        load.state = std::move(*decoded);
        load.version = st->stat.version;
    } else if (st.error() != zkco::errc::no_node) {
        co_return zk_error("cannot read workflow " + std::string(id), st.error());
    }
    auto c = co_await zkco::retry_unknown(zk, [&] { return zk.exists(wf::cancel_node(id)); });
    load.cancel_requested = c && c->has_value();
    const auto dir = wf::results_node(*ref);
    auto kids = co_await zkco::retry_unknown(zk, [&] { return zk.get_children(dir); });
    if (kids) {
        for (const auto& name : kids->names) {
            std::string path = dir;
            path.append("/").append(name);
            auto r = co_await zkco::retry_unknown(zk, [&] { return zk.get(path); });
            if (r) {
                load.results.emplace_back(name, protocol::decode_result(r->data));
            }
        }
    }
    workflow_snapshot out;
    out.id = std::string(id);
    out.name = stored->header.name;
    out.created_ms = stored->header.created_ms;
    out.adopted = load.state.has_value();
    out.cancel_requested = load.cancel_requested;
    // The fsm, fed what was read, answers as the master would see it (it acts on nothing).
    wf::workflow_fsm fsm(*ref, stored->spec);
    const auto cancel_requested = load.cancel_requested;
    load.cancel_requested = false;  // a reader does not decide the cancel
    fsm.on(load, protocol::now_ms());
    out.cancel_requested = cancel_requested;
    out.status = fsm.state().status;
    out.finished_ms = fsm.state().finished_ms;
    const auto view = fsm.view();
    for (std::size_t i = 0; i < spec.steps.size(); ++i) {
        workflow_step_snapshot s;
        s.name = spec.steps[i].name;
        s.type = spec.steps[i].type;
        s.status = view[i].status;
        s.tasks = view[i].tasks;
        s.done = view[i].done;
        s.error = view[i].error;
        s.value = view[i].value;
        for (std::uint64_t k = 0; k < std::min<std::uint64_t>(view[i].tasks, 16); ++k) {
            s.task_ids.push_back(fsm.task_id(i, k));
        }
        out.steps.push_back(std::move(s));
    }
    out.result = fsm.result();
    co_return out;
}

asio::awaitable<workflow_result<workflow_snapshot>> wait_workflow(
    zkco::client& zk, std::string_view id, std::chrono::milliseconds timeout
) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        auto st = co_await zk.watch_get(wf::state_node(id));
        std::optional<zkco::watch> w;
        if (st) {
            // The status alone decides: read it without the spec.
            boost::system::error_code ec;
            const auto doc = protocol::parse_json(st->value.data, ec);
            const auto* status =
                !ec && doc.is_object() ? doc.get_object().if_contains("status") : nullptr;
            const bool running =
                status == nullptr || !status->is_string() || status->get_string() == "running";
            if (!running) {
                co_return co_await read_workflow(zk, id);
            }
            w = std::move(st->watch);
        } else if (st.error() == zkco::errc::no_node) {
            auto e = co_await zk.watch_exists(wf::state_node(id));
            if (!e) {
                co_return zk_error("cannot follow workflow " + std::string(id), e.error());
            }
            if (e->value) {
                continue;
            }
            auto header = co_await zk.exists(wf::workflow_node(id));
            if (header && !*header) {
                co_return not_found(id);
            }
            w = std::move(e->watch);
        } else {
            const bool retry = co_await zkco::reconnected_after(zk, st.error());
            if (!retry) {
                co_return zk_error("cannot follow workflow " + std::string(id), st.error());
            }
            continue;
        }
        if (timeout.count() == 0) {
            auto fired = co_await w->changed();
            if (!fired) {
                co_return zk_error("cannot follow workflow " + std::string(id), fired.error());
            }
            continue;
        }
        using namespace asio::experimental::awaitable_operators;
        asio::steady_timer t(co_await asio::this_coro::executor, deadline);
        auto which = co_await (w->changed() || t.async_wait(asio::as_tuple(asio::use_awaitable)));
        if (which.index() == 1) {
            co_return workflow_error{
                workflow_error::kind::timeout,
                "workflow " + std::string(id) + " has not ended within the timeout"};
        }
    }
}

asio::awaitable<workflow_result<void>> cancel_workflow(zkco::client& zk, std::string_view id) {
    auto h = co_await zkco::retry_unknown(zk, [&] { return zk.exists(wf::workflow_node(id)); });
    if (!h) {
        co_return zk_error("cannot cancel workflow " + std::string(id), h.error());
    }
    if (!*h) {
        co_return not_found(id);
    }
    const auto op = wf::cancel_request_op(id);
    auto c = co_await zkco::retry_unknown(zk, [&] { return zk.create(op.path, op.data); });
    if (!c && c.error() != zkco::errc::node_exists) {
        co_return zk_error("cannot cancel workflow " + std::string(id), c.error());
    }
    co_return workflow_result<void>{};
}

asio::awaitable<workflow_result<std::vector<workflow_summary>>> list_workflows(zkco::client& zk) {
    std::vector<workflow_summary> out;
    auto kids =
        co_await zkco::retry_unknown(zk, [&] { return zk.get_children(wf::workflows_dir()); });
    if (!kids) {
        if (kids.error() == zkco::errc::no_node) {
            co_return out;
        }
        co_return zk_error("cannot list workflows", kids.error());
    }
    std::vector<std::string> ids;
    for (auto& id : kids->names) {
        if (wf::parse_workflow_id(id)) {
            ids.push_back(std::move(id));
        }
    }
    std::sort(ids.begin(), ids.end());
    // Every workflow's node and state node read at once (one round trip, not two each).
    std::vector<std::string> paths;
    paths.reserve(2 * ids.size());
    for (const auto& id : ids) {
        paths.push_back(wf::workflow_node(id));
        paths.push_back(wf::state_node(id));
    }
    const auto nodes = co_await zkco::get_all(zk, std::move(paths));
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const auto& id = ids[i];
        workflow_summary s;
        s.id = id;
        const auto& h = nodes[2 * i];
        if (!h) {
            continue;
        }
        if (h->data.empty()) {
            s.status = "submitting";
            out.push_back(std::move(s));
            continue;
        }
        auto header = wf::decode_header(h->data);
        if (!header) {
            s.status = "garbage";
            out.push_back(std::move(s));
            continue;
        }
        s.name = header->name;
        s.steps = header->steps;
        s.created_ms = header->created_ms;
        s.status = "running";
        if (const auto& st = nodes[2 * i + 1]) {
            auto decoded = wf::decode_state(st->data, header->steps);
            s.status = decoded ? std::string(wf::to_string(decoded->status)) : "garbage";
        }
        out.push_back(std::move(s));
    }
    co_return out;
}

json::object to_json(const workflow_snapshot& s) {
    json::object o;
    o["id"] = s.id;
    if (!s.name.empty()) {
        o["name"] = s.name;
    }
    o["status"] = wf::to_string(s.status);
    o["adopted"] = s.adopted;
    if (s.cancel_requested) {
        o["cancel_requested"] = true;
    }
    o["created_ms"] = s.created_ms;
    if (s.finished_ms != 0) {
        o["finished_ms"] = s.finished_ms;
    }
    json::object steps;
    for (const auto& st : s.steps) {
        json::object x;
        x["type"] = st.type;
        x["status"] = wf::to_string(st.status);
        x["tasks"] = st.tasks;
        x["done"] = st.done;
        if (st.error) {
            x["error"] = json::object{{"code", st.error->code}, {"message", st.error->message}};
        }
        if (st.status == wf::step_status::succeeded) {
            x["value"] = st.value;
        }
        json::array ids;
        for (const auto& t : st.task_ids) {
            ids.emplace_back(t);
        }
        x["task_ids"] = std::move(ids);
        steps[st.name] = std::move(x);
    }
    o["steps"] = std::move(steps);
    if (s.status != wf::workflow_status::running) {
        o["result"] = s.result;
    }
    return o;
}

json::object to_json(const workflow_summary& s) {
    json::object o;
    o["id"] = s.id;
    if (!s.name.empty()) {
        o["name"] = s.name;
    }
    o["status"] = s.status;
    o["steps"] = s.steps;
    o["created_ms"] = s.created_ms;
    return o;
}

}  // namespace zkd::roles
