// SPDX-License-Identifier: MIT
#include "roles/client/inspect.hpp"

#include "protocol/client_txn.hpp"
#include "protocol/delay.hpp"
#include "protocol/ids.hpp"
#include "roles/client/error.hpp"
#include "roles/cluster/namespace.hpp"
#include "zkco/read_batch.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

namespace asio = boost::asio;
namespace json = boost::json;

namespace zkd::roles {

namespace {

using zkco::read_batch;

/// no_node means "gone meanwhile", never a failure of the view; anything else is.
template <class T>
bool failed(const zkco::result<T>& r) {
    return !r && r.error() != zkco::errc::no_node;
}

std::int64_t age_since(std::int64_t now, std::int64_t then) {
    return then > 0 ? std::max<std::int64_t>(0, now - then) : 0;
}

master_snapshot master_from(const std::string& data) {
    master_snapshot m;
    auto decoded = protocol::decode_master(data);
    if (!decoded) {
        m.garbage = decoded.error().message;
        return m;
    }
    m.id = std::move(decoded->id);
    m.epoch = decoded->epoch.value_or(0);
    m.host = std::move(decoded->host);
    m.pid = decoded->pid;
    m.since_ms = decoded->since_ms;
    m.throughput = decoded->throughput;
    m.max_pending = decoded->max_pending;
    m.direct = decoded->direct;
    m.suspects = std::move(decoded->suspects);
    return m;
}

worker_snapshot worker_from(const std::string& id, const zkco::node& node) {
    worker_snapshot w;
    w.id = id;
    if (node.stat.ephemeral_owner == 0) {
        w.ignored = "not ephemeral: no session owns it, so it is no live worker";
    }
    auto decoded = protocol::decode_worker(node.data);
    if (decoded) {
        w.host = std::move(decoded->host);
        w.pid = decoded->pid;
        w.capacity = decoded->capacity.value_or(0);
        w.threads = decoded->threads;
        w.types = std::move(decoded->types);
        w.started_ms = decoded->started_ms;
        w.draining = decoded->draining;
        w.unhealthy = std::move(decoded->unhealthy);
    } else {
        w.garbage = decoded.error().message;
    }
    return w;
}

task_entry entry_from(
    std::string id,
    protocol::task_state state,
    std::string worker,
    const std::string& data,
    std::int64_t now
) {
    task_entry e;
    e.id = std::move(id);
    e.state = state;
    e.worker = std::move(worker);
    auto node = protocol::decode_task_node(data);
    if (!node) {
        e.garbage = node.error().message;
        return e;
    }
    if (state == protocol::task_state::assigned && node->run.running_ms != 0) {
        e.state = protocol::task_state::running;
    }
    const auto& spec = node->task;
    e.type = spec.type;
    e.tasks = std::max<std::size_t>(1, spec.bundle.size());
    e.priority = spec.priority;
    e.attempt = node->assigned.attempt;
    // A task written without submitted_ms (by another client) is as old as its id says.
    e.submitted_ms =
        spec.submitted_ms != 0 ? spec.submitted_ms : protocol::task_id_ms(e.id).value_or(0);
    e.age_ms = age_since(now, e.submitted_ms);
    e.assigned_ms = node->assigned.assigned_ms;
    e.running_ms = node->run.running_ms;
    e.progress = node->run.fraction;
    e.progress_message = std::move(node->run.message);
    return e;
}

/// The sum of the nodes' child counts (missing nodes count 0).
zkco::result<std::uint64_t> child_count(
    const std::vector<read_batch::slot<std::optional<zkco::stat>>>& nodes
) {
    std::uint64_t n = 0;
    for (const auto& s : nodes) {
        if (failed(*s)) {
            return s->error();
        }
        if (*s && **s) {
            n += static_cast<std::uint64_t>(std::max(0, (**s)->num_children));
        }
    }
    return n;
}

}  // namespace

asio::awaitable<zkco::result<std::vector<worker_snapshot>>> read_workers(zkco::client& zk) {
    auto listed = co_await zk.get_children(protocol::layout::workers_dir());
    if (!listed) {
        co_return listed.error();
    }
    auto ids = std::move(listed->names);
    std::sort(ids.begin(), ids.end());
    read_batch batch(zk);
    std::vector<read_batch::slot<zkco::node>> infos;
    infos.reserve(ids.size());
    for (const auto& id : ids) {
        infos.push_back(batch.get(protocol::layout::worker(id)));
    }
    if (const auto done = co_await batch.wait(); !done) {
        co_return done.error();
    }
    std::vector<worker_snapshot> workers;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (failed(*infos[i])) {
            co_return infos[i]->error();
        }
        if (*infos[i]) {  // else it left meanwhile
            workers.push_back(worker_from(ids[i], **infos[i]));
        }
    }
    co_return workers;
}

std::optional<std::string> unserved(
    const std::vector<worker_snapshot>& workers, std::string_view type
) {
    std::set<std::string, std::less<>> served;
    bool any = false;
    for (const auto& w : workers) {
        if (w.garbage.empty()) {
            any = true;
            served.insert(w.types.begin(), w.types.end());
        }
    }
    if (!any || served.contains(type)) {
        return std::nullopt;
    }
    std::string list;
    for (const auto& t : served) {
        list += (list.empty() ? "" : ", ") + t;
    }
    return "no worker serves task type '" + std::string(type) + "' (the " +
           std::to_string(workers.size()) + " workers serve: " + (list.empty() ? "nothing" : list) +
           ")";
}

asio::awaitable<zkco::result<cluster_snapshot>> read_cluster(zkco::client& zk, protocol::layout l) {
    cluster_snapshot view;

    // Round 1: the fixed nodes and the directories' stats.
    read_batch first(zk);
    auto epoch = first.exists(protocol::layout::epoch());
    auto master = first.get(protocol::layout::master());
    auto workers = first.get_children(protocol::layout::workers_dir());
    auto cancels = first.exists(protocol::layout::cancel_dir());
    std::vector<read_batch::slot<std::optional<zkco::stat>>> pending;
    for (auto& p : l.pending_shard_paths()) {
        pending.push_back(first.exists(std::move(p)));
    }
    std::vector<read_batch::slot<std::optional<zkco::stat>>> delayed;
    for (std::uint32_t i = 0; i < l.pending_shards; ++i) {
        delayed.push_back(first.exists(protocol::layout::delayed_shard(i)));
    }
    auto results_dir = first.exists(protocol::layout::results_dir());
    const auto first_done = co_await first.wait();
    if (!first_done) {
        co_return first_done.error();
    }
    if (failed(*epoch)) {
        co_return epoch->error();
    }
    if (*epoch && **epoch) {
        view.epoch = (**epoch)->version;
    }
    if (failed(*master)) {
        co_return master->error();
    }
    if (*master) {
        view.master = master_from((*master)->data);
    }
    if (failed(*cancels)) {
        co_return cancels->error();
    }
    if (*cancels && **cancels) {
        view.cancel_requests = static_cast<std::uint64_t>(std::max(0, (**cancels)->num_children));
    }
    auto pending_count = child_count(pending);
    if (!pending_count) {
        co_return pending_count.error();
    }
    view.pending = *pending_count;
    auto delayed_count = child_count(delayed);
    if (!delayed_count) {
        co_return delayed_count.error();
    }
    view.delayed = *delayed_count;
    if (failed(*results_dir)) {
        co_return results_dir->error();
    }
    // The result directories to count: every one while few enough clients' directories
    // stand beside the shards (listing /results costs a round trip more), else the shards
    // alone, without listing a /results that may hold more names than one answer carries.
    std::vector<std::string> result_paths;
    if (*results_dir && **results_dir) {
        const auto children = static_cast<std::size_t>(std::max(0, (**results_dir)->num_children));
        if (children <= most_result_dirs_counted + l.result_shards) {
            auto listed = co_await list_result_dirs(zk);
            if (!listed && listed.error() != zkco::errc::no_node) {
                co_return listed.error();
            }
            result_paths = listed ? std::move(*listed) : std::vector<std::string>{};
        } else {
            result_paths = l.result_shard_paths();
            view.uncounted_result_dirs =
                children - std::min<std::size_t>(children, l.result_shards);
        }
    }
    if (failed(*workers)) {
        co_return workers->error();
    }
    std::vector<std::string> ids = *workers ? (*workers)->names : std::vector<std::string>{};
    std::sort(ids.begin(), ids.end());

    // Round 2: each worker's node and assignment directory, and each result directory's stat
    // (the shards and the clients' directories).
    read_batch second(zk);
    std::vector<read_batch::slot<zkco::node>> infos;
    std::vector<read_batch::slot<zkco::children>> dirs;
    for (const auto& id : ids) {
        infos.push_back(second.get(protocol::layout::worker(id)));
        dirs.push_back(second.get_children(protocol::layout::assign_dir(id)));
    }
    std::vector<read_batch::slot<std::optional<zkco::stat>>> results;
    results.reserve(result_paths.size());
    for (auto& p : result_paths) {
        results.push_back(second.exists(std::move(p)));
    }
    const auto second_done = co_await second.wait();
    if (!second_done) {
        co_return second_done.error();
    }
    auto result_count = child_count(results);
    if (!result_count) {
        co_return result_count.error();
    }
    view.results = *result_count;

    // Round 3: each assignment's data, for its running mark.
    read_batch third(zk);
    std::vector<std::vector<read_batch::slot<zkco::node>>> assignments(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (failed(*infos[i])) {
            co_return infos[i]->error();
        }
        if (failed(*dirs[i])) {
            co_return dirs[i]->error();
        }
        if (!*infos[i]) {
            continue;  // left meanwhile
        }
        auto w = worker_from(ids[i], **infos[i]);
        if (view.master) {
            const auto& named = view.master->suspects;
            w.suspect = std::binary_search(named.begin(), named.end(), w.id);
        }
        if (*dirs[i]) {
            for (const auto& name : (*dirs[i])->names) {
                if (!protocol::is_cancel_marker(name)) {
                    assignments[i].push_back(third.get(protocol::layout::assignment(ids[i], name)));
                }
            }
        }
        view.workers.push_back(std::move(w));
    }
    const auto third_done = co_await third.wait();
    if (!third_done) {
        co_return third_done.error();
    }
    std::size_t next = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (!*infos[i]) {
            continue;
        }
        auto& w = view.workers[next++];
        for (const auto& a : assignments[i]) {
            if (failed(*a)) {
                co_return a->error();
            }
            if (!*a) {
                continue;  // finished meanwhile
            }
            ++w.assigned;
            auto node = protocol::decode_task_node((*a)->data);
            if (node && node->run.running_ms != 0) {
                ++w.running;
            }
        }
    }
    co_return view;
}

asio::awaitable<zkco::result<task_list>> list_tasks(
    zkco::client& zk, protocol::layout l, std::size_t limit, bool with_delayed
) {
    task_list out;
    out.limit = limit;

    // Round 1: every pending shard and the assignment directories.
    read_batch first(zk);
    std::vector<read_batch::slot<zkco::children>> shards;
    for (auto& p : l.pending_shard_paths()) {
        shards.push_back(first.get_children(std::move(p)));
    }
    std::vector<read_batch::slot<zkco::children>> delayed_shards;
    if (with_delayed) {
        for (std::uint32_t i = 0; i < l.pending_shards; ++i) {
            delayed_shards.push_back(first.get_children(protocol::layout::delayed_shard(i)));
        }
    }
    auto dirs = first.get_children(protocol::layout::assign_dir());
    const auto first_done = co_await first.wait();
    if (!first_done) {
        co_return first_done.error();
    }
    // Delayed: (the time its id holds, id, path); a name that is no task id sorts first.
    std::vector<std::tuple<std::int64_t, std::string, std::string>> delayed;
    for (std::uint32_t i = 0; i < delayed_shards.size(); ++i) {
        if (failed(*delayed_shards[i])) {
            co_return delayed_shards[i]->error();
        }
        if (*delayed_shards[i]) {
            for (auto& name : (*delayed_shards[i])->names) {
                auto path = zkco::join_path(protocol::layout::delayed_shard(i), name);
                const auto t = protocol::task_id_ms(name).value_or(0);
                delayed.emplace_back(t, std::move(name), std::move(path));
            }
        }
    }
    std::vector<std::pair<std::string, std::string>> pending;  // id, path
    for (std::uint32_t i = 0; i < shards.size(); ++i) {
        if (failed(*shards[i])) {
            co_return shards[i]->error();
        }
        if (*shards[i]) {
            for (auto& name : (*shards[i])->names) {
                auto path = zkco::join_path(protocol::layout::pending_shard(i), name);
                pending.emplace_back(std::move(name), std::move(path));
            }
        }
    }
    if (failed(*dirs)) {
        co_return dirs->error();
    }
    std::vector<std::string> owners = *dirs ? (*dirs)->names : std::vector<std::string>{};
    std::sort(owners.begin(), owners.end());

    // Round 2: each assignment directory.
    read_batch second(zk);
    std::vector<read_batch::slot<zkco::children>> listed;
    listed.reserve(owners.size());
    for (const auto& w : owners) {
        listed.push_back(second.get_children(protocol::layout::assign_dir(w)));
    }
    const auto second_done = co_await second.wait();
    if (!second_done) {
        co_return second_done.error();
    }
    std::vector<std::pair<std::string, std::string>> assigned;  // worker, id
    for (std::size_t i = 0; i < owners.size(); ++i) {
        if (failed(*listed[i])) {
            co_return listed[i]->error();
        }
        if (*listed[i]) {
            for (auto& name : (*listed[i])->names) {
                if (!protocol::is_cancel_marker(name)) {
                    assigned.emplace_back(owners[i], std::move(name));
                }
            }
        }
    }

    // Round 3: the data of the first `limit` of each.
    std::sort(pending.begin(), pending.end());
    std::sort(assigned.begin(), assigned.end());
    out.pending_total = pending.size();
    out.assigned_total = assigned.size();
    std::sort(delayed.begin(), delayed.end());
    out.delayed_total = delayed.size();
    out.truncated = pending.size() > limit || assigned.size() > limit || delayed.size() > limit;
    pending.resize(std::min(pending.size(), limit));
    assigned.resize(std::min(assigned.size(), limit));
    delayed.resize(std::min(delayed.size(), limit));
    read_batch third(zk);
    std::vector<read_batch::slot<zkco::node>> pending_data;
    pending_data.reserve(pending.size());
    for (const auto& [id, path] : pending) {
        pending_data.push_back(third.get(path));
    }
    std::vector<read_batch::slot<zkco::node>> assigned_data;
    assigned_data.reserve(assigned.size());
    for (const auto& [w, id] : assigned) {
        assigned_data.push_back(third.get(protocol::layout::assignment(w, id)));
    }
    std::vector<read_batch::slot<zkco::node>> delayed_data;
    delayed_data.reserve(delayed.size());
    for (const auto& d : delayed) {
        delayed_data.push_back(third.get(std::get<2>(d)));
    }
    const auto third_done = co_await third.wait();
    if (!third_done) {
        co_return third_done.error();
    }
    const auto now = protocol::now_ms();
    for (std::size_t i = 0; i < delayed.size(); ++i) {
        const auto& node = *delayed_data[i];
        if (failed(node)) {
            co_return node.error();
        }
        if (!node) {
            continue;  // released or cancelled meanwhile
        }
        const auto& [t, id, path] = delayed[i];
        if (!protocol::is_valid_task_id(id)) {
            task_entry e;
            e.id = id;
            e.state = protocol::task_state::delayed;
            e.garbage = "not a task id";
            out.delayed.push_back(std::move(e));
            continue;
        }
        auto e = entry_from(id, protocol::task_state::delayed, {}, node->data, now);
        e.due_ms = t;
        if (const auto f = protocol::read_delay_fields(node->data)) {
            e.due_ms = f->due_ms.value_or(t);
            e.try_number = f->try_number;
        }
        out.delayed.push_back(std::move(e));
    }
    // Soonest due first (a retry's node may be due later than its id says).
    std::stable_sort(out.delayed.begin(), out.delayed.end(), [](const auto& a, const auto& b) {
        return a.due_ms < b.due_ms;
    });
    for (std::size_t i = 0; i < pending.size(); ++i) {
        const auto& node = *pending_data[i];
        if (failed(node)) {
            co_return node.error();
        }
        if (!node) {
            continue;  // assigned or cancelled meanwhile
        }
        if (!protocol::is_valid_task_id(pending[i].first)) {
            task_entry e;
            e.id = pending[i].first;
            e.garbage = "not a task id";
            out.pending.push_back(std::move(e));
            continue;
        }
        out.pending.push_back(
            entry_from(pending[i].first, protocol::task_state::pending, {}, node->data, now)
        );
    }
    for (std::size_t i = 0; i < assigned.size(); ++i) {
        const auto& node = *assigned_data[i];
        if (failed(node)) {
            co_return node.error();
        }
        if (!node) {
            continue;  // finished meanwhile
        }
        out.assigned.push_back(entry_from(
            assigned[i].second, protocol::task_state::assigned, assigned[i].first, node->data, now
        ));
    }
    co_return out;
}

namespace {

// A result node as read: nullopt when there is none; an error when it is garbage (why).
protocol::codec_result<std::optional<protocol::task_result>> found_result(
    const zkco::result<zkco::node>& node
) {
    if (!node) {
        return std::optional<protocol::task_result>();
    }
    auto decoded = protocol::decode_result(node->data);
    if (!decoded) {
        return decoded.error();
    }
    return std::optional<protocol::task_result>(std::move(*decoded));
}

}  // namespace

asio::awaitable<zkco::result<std::optional<protocol::task_result>>> peek_result(
    zkco::client& zk, protocol::layout l, std::string tid
) {
    const auto ref = protocol::parse_task_ref(tid);
    if (!ref) {
        co_return std::optional<protocol::task_result>();
    }
    // One task of a bundle: its own node (§6 T4e) first, then the bundle's result.
    read_batch batch(zk);
    read_batch::slot<zkco::node> own;
    if (ref->index) {
        own = batch.get(protocol::entry_result_path(l, ref->node, *ref->index));
    }
    auto node = batch.get(l.result(ref->node));
    if (auto done = co_await batch.wait(); !done) {
        co_return done.error();
    }
    for (const auto& slot : {own, node}) {
        if (slot && failed(*slot)) {
            co_return slot->error();
        }
    }
    auto whole = found_result(*node);
    if (!whole) {
        co_return zkco::error_code(client_errc::garbage_result);
    }
    if (!ref->index) {
        co_return std::move(*whole);
    }
    auto mine = found_result(*own);
    if (!mine) {
        co_return zkco::error_code(client_errc::garbage_result);
    }
    auto one = protocol::entry_result(*mine, *whole, *ref->index, tid);
    if (!one) {
        co_return zkco::error_code(client_errc::garbage_result);
    }
    co_return std::move(*one);
}

namespace {
/// One look for `tid`, not a bundle's task: pending, assigned or running, finished, unknown.
asio::awaitable<zkco::result<task_info>> read_task_once(
    zkco::client& zk, protocol::layout l, std::string tid
);
}  // namespace

asio::awaitable<zkco::result<task_info>> read_task(
    zkco::client& zk, protocol::layout l, std::string tid
) {
    task_info info;
    info.id = tid;
    const auto ref = protocol::parse_task_ref(tid);
    if (!ref) {
        co_return info;
    }
    if (ref->index) {
        // One task of a bundle: where the bundle is, then its own result node (§6 T4e: its
        // worker may publish it while the bundle runs), and its entry of the bundle's result.
        auto whole = co_await read_task(zk, l, std::string(ref->node));
        if (!whole) {
            co_return whole.error();
        }
        info = std::move(*whole);
        info.id = tid;
        if (!info.garbage.empty() && !info.result) {
            co_return info;  // the bundle's node is garbage
        }
        auto own_node = co_await zk.get(protocol::entry_result_path(l, ref->node, *ref->index));
        if (!own_node && own_node.error() != zkco::errc::no_node) {
            co_return own_node.error();
        }
        auto own = found_result(own_node);
        if (!own) {
            info = task_info{};
            info.id = tid;
            info.garbage = own.error().message;
            co_return info;
        }
        const auto bundle_finished = info.result.has_value();
        auto one = protocol::entry_result(*own, info.result, *ref->index, tid);
        if (!one) {
            info.state = protocol::task_state::unknown;
            info.garbage = one.error().message;
            info.result.reset();
        } else if (*one) {
            info.state = (*one)->state;
            info.worker = (*one)->worker;
            info.progress = -1;
            info.progress_message.clear();
            info.result = std::move(**one);
        } else if (bundle_finished) {
            info.state = protocol::task_state::unknown;  // consumed
            info.result.reset();
        } else if (info.garbage.empty() && info.state != protocol::task_state::unknown) {
            // The bundle still runs: a task it published early (its node says so) whose own
            // node is gone was consumed.
            std::string path = l.pending_task(ref->node);
            if (info.state == protocol::task_state::delayed) {
                path = l.delayed_task(ref->node);
            } else if (info.state != protocol::task_state::pending) {
                path = protocol::layout::assignment(info.worker, ref->node);
            }
            auto node = co_await zk.get(path);
            if (!node && node.error() != zkco::errc::no_node) {
                co_return node.error();
            }
            if (node) {
                const auto n = protocol::bundle_size(ref->node);
                const auto published =
                    protocol::read_published(node->data, protocol::read_finished(node->data, n));
                if (std::binary_search(published.begin(), published.end(), *ref->index)) {
                    info = task_info{};
                    info.id = tid;  // unknown: consumed
                }
            }
        }
        co_return info;
    }
    // A task moves back too (a requeue takes an assignment back to pending): one found
    // nowhere may have moved between the reads, so it is looked for once more before it is
    // said to be unknown.
    auto once = co_await read_task_once(zk, l, tid);
    if (once && once->state == protocol::task_state::unknown && once->garbage.empty()) {
        once = co_await read_task_once(zk, l, std::move(tid));
    }
    co_return once;
}

namespace {

asio::awaitable<zkco::result<task_info>> read_task_once(
    zkco::client& zk, protocol::layout l, std::string tid
) {
    task_info info;
    info.id = tid;
    // The server answers one session's requests in order: reading the places in the order
    // tasks move through them (pending, assignments, result) means a task moving on between
    // the reads is caught in its later state.
    read_batch first(zk);
    auto delayed = first.get(l.delayed_task(tid));
    auto pending = first.exists(l.pending_task(tid));
    auto dirs = first.get_children(protocol::layout::assign_dir());
    const auto first_done = co_await first.wait();
    if (!first_done) {
        co_return first_done.error();
    }
    if (failed(*pending)) {
        co_return pending->error();
    }
    if (failed(*delayed)) {
        co_return delayed->error();
    }
    if (failed(*dirs)) {
        co_return dirs->error();
    }
    read_batch second(zk);
    std::vector<std::pair<std::string, read_batch::slot<zkco::node>>> assignments;
    if (*dirs) {
        for (const auto& w : (*dirs)->names) {
            assignments.emplace_back(w, second.get(protocol::layout::assignment(w, tid)));
        }
    }
    auto result = second.get(l.result(tid));
    const auto second_done = co_await second.wait();
    if (!second_done) {
        co_return second_done.error();
    }
    if (failed(*result)) {
        co_return result->error();
    }
    if (*result) {
        auto decoded = protocol::decode_result((*result)->data);
        if (!decoded) {
            info.garbage = decoded.error().message;
            co_return info;
        }
        info.state = decoded->state;
        info.worker = decoded->worker;
        info.result = std::move(*decoded);
        co_return info;
    }
    for (const auto& [w, node] : assignments) {
        if (failed(*node)) {
            co_return node->error();
        }
        if (!*node) {
            continue;
        }
        info.worker = w;
        auto read = protocol::decode_task_node((*node)->data);
        if (!read) {
            info.state = protocol::task_state::assigned;
            info.garbage = read.error().message;
        } else {
            info.state = read->run.running_ms != 0 ? protocol::task_state::running
                                                   : protocol::task_state::assigned;
            info.progress = read->run.fraction;
            info.progress_message = std::move(read->run.message);
        }
        co_return info;
    }
    if (*pending && **pending) {
        info.state = protocol::task_state::pending;
    } else if (*delayed) {
        info.state = protocol::task_state::delayed;
        info.delay = protocol::read_delay_fields((*delayed)->data);
        if (!info.delay) {
            info.garbage = "the delayed node holds no JSON object";
        }
    }
    co_return info;
}

}  // namespace

// --- JSON ----------------------------------------------------------------------------------

json::value to_json(const master_snapshot& m) {
    if (!m.garbage.empty()) {
        return json::object{{"garbage", m.garbage}};
    }
    json::object o;
    o["id"] = m.id;
    o["epoch"] = m.epoch;
    o["host"] = m.host;
    o["pid"] = m.pid;
    o["since_ms"] = m.since_ms;
    o["throughput"] = m.throughput ? json::value(*m.throughput) : json::value(nullptr);
    o["max_pending"] = m.max_pending ? json::value(*m.max_pending) : json::value(nullptr);
    o["direct"] = m.direct;
    json::array suspects;
    for (const auto& id : m.suspects) {
        suspects.emplace_back(id);
    }
    o["suspects"] = std::move(suspects);
    return o;
}

json::value to_json(const worker_snapshot& w) {
    json::object o;
    o["id"] = w.id;
    if (!w.garbage.empty()) {
        o["garbage"] = w.garbage;
    } else {
        o["host"] = w.host;
        o["pid"] = w.pid;
        o["capacity"] = w.capacity;
        if (w.threads) {
            o["threads"] = *w.threads;
        } else {
            o["threads"] = nullptr;
        }
        json::array types;
        for (const auto& t : w.types) {
            types.emplace_back(t);
        }
        o["types"] = std::move(types);
        o["started_ms"] = w.started_ms;
        o["draining"] = w.draining;
        json::array unhealthy;
        for (const auto& t : w.unhealthy) {
            unhealthy.emplace_back(t);
        }
        o["unhealthy"] = std::move(unhealthy);
    }
    o["assigned"] = w.assigned;
    o["running"] = w.running;
    o["suspect"] = w.suspect;
    if (!w.ignored.empty()) {
        o["ignored"] = w.ignored;
    }
    return o;
}

json::value to_json(const cluster_snapshot& c) {
    json::object o;
    o["epoch"] = c.epoch;
    o["master"] = c.master ? to_json(*c.master) : json::value(nullptr);
    json::array workers;
    for (const auto& w : c.workers) {
        workers.push_back(to_json(w));
    }
    o["workers"] = std::move(workers);
    o["pending"] = c.pending;
    o["delayed"] = c.delayed;
    o["results"] = c.results;
    o["uncounted_result_dirs"] = c.uncounted_result_dirs;
    o["cancel_requests"] = c.cancel_requests;
    return o;
}

json::value to_json(const task_entry& t) {
    json::object o;
    o["id"] = t.id;
    o["state"] = to_string(t.state);
    const bool queued =
        t.state == protocol::task_state::pending || t.state == protocol::task_state::delayed;
    if (!queued) {
        o["worker"] = t.worker;
    }
    if (!t.garbage.empty()) {
        o["garbage"] = t.garbage;
        return o;
    }
    o["type"] = t.type;
    if (t.tasks > 1) {
        o["tasks"] = t.tasks;
    }
    o["priority"] = t.priority;
    if (t.state == protocol::task_state::delayed) {
        o["due_ms"] = t.due_ms;
        o["try"] = t.try_number;
    } else {
        o["attempt"] = t.attempt;
    }
    o["age_ms"] = t.age_ms;
    o["submitted_ms"] = t.submitted_ms;
    if (!queued) {
        o["assigned_ms"] = t.assigned_ms;
    }
    if (t.running_ms != 0) {
        o["running_ms"] = t.running_ms;
    }
    if (t.progress >= 0) {
        o["progress"] = {{"fraction", t.progress}, {"message", t.progress_message}};
    }
    return o;
}

json::value to_json(const task_list& t) {
    json::object o;
    json::array pending;
    for (const auto& e : t.pending) {
        pending.push_back(to_json(e));
    }
    json::array assigned;
    for (const auto& e : t.assigned) {
        assigned.push_back(to_json(e));
    }
    json::array delayed;
    for (const auto& e : t.delayed) {
        delayed.push_back(to_json(e));
    }
    o["pending"] = std::move(pending);
    o["assigned"] = std::move(assigned);
    o["delayed"] = std::move(delayed);
    o["pending_total"] = t.pending_total;
    o["assigned_total"] = t.assigned_total;
    o["delayed_total"] = t.delayed_total;
    o["limit"] = t.limit;
    o["truncated"] = t.truncated;
    return o;
}

json::value to_json(const protocol::task_result& r) {
    boost::system::error_code ec;
    auto v = protocol::parse_json(encode(r), ec);  // the protocol's depth, not Boost.JSON's default
    return ec ? json::value(nullptr) : v;
}

json::value to_json(const task_info& t) {
    json::object o;
    o["id"] = t.id;
    o["state"] = to_string(t.state);
    if (!t.worker.empty()) {
        o["worker"] = t.worker;
    }
    if (t.result) {
        o["result"] = to_json(*t.result);
    }
    if (t.progress >= 0 && !t.result) {
        o["progress"] = {{"fraction", t.progress}, {"message", t.progress_message}};
    }
    if (!t.garbage.empty()) {
        o["garbage"] = t.garbage;
    }
    if (t.delay) {
        if (t.delay->due_ms) {
            o["due_ms"] = *t.delay->due_ms;
            o["due"] = protocol::format_time(*t.delay->due_ms);
        }
        if (t.delay->try_number > 1) {
            o["try"] = t.delay->try_number;
        }
        if (!t.delay->errors.empty()) {
            o["errors"] = t.delay->errors;
        }
    }
    return o;
}

}  // namespace zkd::roles
