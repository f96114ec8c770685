// SPDX-License-Identifier: MIT
#include "roles/client/submit_fsm.hpp"

#include <algorithm>
#include <iterator>
#include <optional>
#include <utility>

namespace zkd::roles {

// --- packing ---------------------------------------------------------------------------------

namespace {

// What a bundle's node holds beyond its tasks' args (type, priority, ...), generously.
constexpr std::size_t bundle_overhead = 1024;

// Whether `t` may share the node of `first`: every member of the task but its args (and
// what the packer fills in) alike. A member added to task_spec that a node's tasks must
// share is compared here.
bool same_node(const protocol::task_spec& t, const protocol::task_spec& first) {
    return t.type == first.type && t.priority == first.priority && t.timeout == first.timeout &&
           t.max_attempts == first.max_attempts && t.timing == first.timing;
}

// Stamps `t` as this submit's and checks it alone.
std::optional<client_errc> admit(
    protocol::task_spec& t, std::string_view client, std::int64_t now_ms
) {
    if (!t.bundle.empty()) {
        return client_errc::invalid_args;
    }
    t.submitted_ms = now_ms;
    t.client = std::string(client);
    if (auto ok = protocol::validate(t); !ok) {
        return broken_rule(ok.error());
    }
    return std::nullopt;
}

}  // namespace

boost::system::result<std::vector<packed_node>, client_errc> pack_tasks(
    std::vector<protocol::task_spec> tasks,
    std::size_t most,
    std::string_view client,
    std::int64_t now_ms,
    bool entry_results
) {
    most = std::clamp<std::size_t>(most, 1, protocol::max_bundle_tasks);
    std::vector<packed_node> out;
    for (std::size_t i = 0; i < tasks.size();) {
        auto& spec = tasks[i];
        if (auto broken = admit(spec, client, now_ms)) {
            return *broken;
        }
        auto encoded = protocol::encode(spec);
        if (!protocol::task_size_ok(encoded)) {
            return client_errc::task_too_large;
        }
        const packed_node plain{{}, spec.type, spec.priority, now_ms, 0};
        // Then the tasks after it that may share its node, while they fit.
        std::size_t end = i + 1;
        std::size_t bytes = encoded.size() + bundle_overhead;
        std::vector<boost::json::value> more;
        while (end < tasks.size() && end - i < most && same_node(tasks[end], spec)) {
            if (auto broken = admit(tasks[end], client, now_ms)) {
                return *broken;
            }
            const auto size = protocol::to_text(tasks[end].args).size() + 1;
            if (bytes + size > protocol::max_task_bytes) {
                break;  // it starts the next node
            }
            bytes += size;
            more.push_back(std::move(tasks[end].args));
            ++end;
        }
        i = end;
        if (more.empty()) {
            out.push_back(plain);
            out.back().data = std::move(encoded);
            continue;
        }
        spec.bundle.reserve(more.size() + 1);
        spec.bundle.push_back(std::move(spec.args));
        spec.args = nullptr;
        std::move(more.begin(), more.end(), std::back_inserter(spec.bundle));
        if (!protocol::validate(spec)) {
            // Args nested too deep for a bundle (its tasks' args sit a level deeper than a
            // task's): each task goes alone.
            auto members = std::move(spec.bundle);
            spec.bundle.clear();
            for (auto& member : members) {
                spec.args = std::move(member);
                out.push_back(plain);
                out.back().data = protocol::encode(spec);
            }
            continue;
        }
        spec.entry_results = entry_results;
        out.push_back(plain);
        out.back().bundle = spec.bundle.size();
        out.back().data = protocol::encode(spec);
        if (!protocol::task_size_ok(out.back().data)) {
            return client_errc::task_too_large;
        }
    }
    return out;
}

// --- automatic bundles ----------------------------------------------------------------------

bool auto_bundle_eligible(const protocol::task_spec& t) {
    if (!t.bundle.empty() || t.timing.contains("due_ms")) {
        return false;
    }
    // A worker older than per-task retries (§4.3 "Bundles") retries a failed bundle whole: a
    // task that asks for retries goes alone, so that a retry never runs its neighbours again.
    const auto* r = t.timing.if_contains("retries");
    return r == nullptr || (r->is_int64() && r->as_int64() == 0);
}

std::vector<std::vector<std::size_t>> plan_auto_bundles(
    const std::vector<protocol::task_spec>& tasks, std::size_t most, std::size_t spread
) {
    most = std::clamp<std::size_t>(most, 1, protocol::max_bundle_tasks);
    spread = std::max<std::size_t>(spread, 1);
    // The compatible sets, in the order of their first task; ineligible tasks alone.
    std::vector<std::vector<std::size_t>> sets;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
        auto it = sets.end();
        if (auto_bundle_eligible(tasks[i])) {
            it = std::find_if(sets.begin(), sets.end(), [&](const auto& set) {
                const auto& first = tasks[set.front()];
                return auto_bundle_eligible(first) && same_node(tasks[i], first);
            });
        }
        if (it == sets.end()) {
            sets.push_back({i});
        } else {
            it->push_back(i);
        }
    }
    std::vector<std::vector<std::size_t>> out;
    for (auto& set : sets) {
        const auto n = set.size();
        const auto chunk = std::clamp<std::size_t>((n + spread - 1) / spread, 1, most);
        for (std::size_t at = 0; at < n; at += chunk) {
            const auto end = std::min(n, at + chunk);
            out.emplace_back(
                set.begin() + static_cast<std::ptrdiff_t>(at),
                set.begin() + static_cast<std::ptrdiff_t>(end)
            );
        }
    }
    return out;
}

// --- submit_fsm -----------------------------------------------------------------------------

submit_fsm::submit_fsm(
    protocol::layout l, std::vector<std::string> tids, std::vector<std::string> data, bool receipts
)
    : l_(l),
      tids_(std::move(tids)),
      data_(std::move(data)),
      receipts_(receipts),
      left_(tids_.size()) {}

void submit_fsm::direct(
    std::size_t i, std::string worker, std::int32_t worker_version, std::string data
) {
    if (direct_.empty()) {
        direct_.resize(tids_.size());
    }
    direct_.at(i) = {std::move(worker), worker_version, std::move(data)};
}

const std::string& submit_fsm::direct_worker(std::size_t i) const {
    static const std::string none;
    return direct_.empty() ? none : direct_.at(i).worker;
}

std::vector<protocol::txn_op> submit_fsm::ops(std::size_t i) const {
    if (const auto& d = direct_worker(i); !d.empty()) {
        return protocol::direct_submit_ops(d, direct_[i].version, tids_.at(i), direct_[i].data);
    }
    if (delayed_) {
        return {protocol::txn_op::create(l_.delayed_task(tids_.at(i)), data_.at(i))};
    }
    return {protocol::submit_op(l_, tids_.at(i), data_.at(i))};
}

submit_fsm::next submit_fsm::answered(
    std::size_t i, const protocol::txn_answer& a, bool lost, bool session_alive
) {
    auto says = protocol::read_submit(a);
    if (!direct_worker(i).empty()) {
        const auto direct = protocol::read_direct_submit(a);
        if (!direct) {
            direct_[i] = {};  // redirected: to pending, as any other node
            return next::resend;
        }
        says = *direct;
    }
    switch (says) {
    case protocol::submit_outcome::submitted:
    case protocol::submit_outcome::exists:
        break;
    case protocol::submit_outcome::unknown:
        if (!receipts_ && lost && session_alive) {
            return next::resend;
        }
        [[fallthrough]];
    case protocol::submit_outcome::failed:
        if (!failed_) {
            failed_ = i;
        }
        if (node_failed_.empty()) {
            node_failed_.resize(tids_.size(), false);
        }
        node_failed_.at(i) = true;
        break;
    }
    if (left_ > 0) {
        --left_;
    }
    return left_ == 0 ? next::over : next::wait;
}

bool submit_fsm::failed(std::size_t i) const {
    return !node_failed_.empty() && node_failed_.at(i);
}

submit_fsm::outcome submit_fsm::result() const noexcept {
    if (left_ > 0) {
        // Cancelled with answers out: what became of those nodes is unknown, so the call
        // must not say they were submitted.
        return cancelled_ ? outcome::cancelled : outcome::pending;
    }
    // Every node answered before the cancel was seen: the answers say how it went.
    return failed_ ? outcome::failed : outcome::submitted;
}

// --- bundle_consume --------------------------------------------------------------------------

bundle_consume::bundle_consume(std::string path, std::size_t size, std::vector<std::size_t> indices)
    : path_(std::move(path)), size_(size), indices_(std::move(indices)) {}

bundle_consume::step bundle_consume::done(step::end e) {
    step s;
    s.what = step::kind::done;
    s.how = e;
    return s;
}

bundle_consume::step bundle_consume::read(std::string_view data, std::int32_t version) {
    unknown_ = false;
    auto decoded = protocol::decode_result(data);
    if (!decoded) {
        return done(step::end::garbage);
    }
    read_ = std::move(*decoded);
    version_ = version;
    plan_ = protocol::bundle_consume_ops(path_, read_, version, size_, indices_);
    if (plan_.ops.empty()) {
        return done(step::end::delivered);  // nothing to write: taken or published already
    }
    step s;
    s.what = step::kind::write;
    s.ops = plan_.ops;
    return s;
}

bundle_consume::step bundle_consume::answered(const protocol::txn_answer& a, bool lost) {
    step s;
    switch (protocol::read_bundle_consume(a)) {
    case protocol::bundle_consume_outcome::committed:
        deleted_ = plan_.all;
        return done(step::end::delivered);
    case protocol::bundle_consume_outcome::conflict:
        // Another client consumed some meanwhile: read again and retry.
        s.what = step::kind::reread;
        return s;
    case protocol::bundle_consume_outcome::unknown:
        if (lost) {
            unknown_ = true;
            s.what = step::kind::reconnect;
            return s;
        }
        break;
    case protocol::bundle_consume_outcome::failed:
        break;
    }
    return done(step::end::failed);  // no_auth, the client going away, ...
}

bundle_consume::step bundle_consume::reconnected(bool ok) {
    if (!ok) {
        return done(step::end::delivered);
    }
    step s;
    s.what = step::kind::reread;
    return s;
}

bundle_consume::step bundle_consume::reread(std::string_view data, std::int32_t version) {
    if (unknown_ && !plan_.all && version == version_ + 1) {
        // Our set applied if the node moved on by exactly one version and holds what we
        // wrote.
        auto now = protocol::decode_result(data);
        if (now && now->consumed == plan_.marked) {
            return done(step::end::delivered);
        }
    }
    return read(data, version);
}

bundle_consume::step bundle_consume::reread_gone() {
    if (!unknown_) {
        plan_.taken = indices_;  // consumed by others, all of it
    }
    return done(step::end::delivered);
}

// --- shared_bundle_read ----------------------------------------------------------------------

shared_bundle_read::on_wake shared_bundle_read::woke(std::size_t index) {
    switch (phase_) {
    case phase::abandoned:
        return on_wake::read_again;
    case phase::waiting:
        // Our own cancellation woke us: leave (one occurrence: another wait of ours may wait
        // for the same task).
        if (auto pos = std::find(indices_.begin(), indices_.end(), index); pos != indices_.end()) {
            indices_.erase(pos);
        }
        return on_wake::cancelled;
    case phase::consuming:
        return on_wake::wait_more;
    case phase::done:
        break;
    }
    return on_wake::deliver;
}

void shared_bundle_read::gone() {
    phase_ = phase::done;
    gone_ = true;
}

void shared_bundle_read::consumed(protocol::task_result whole, std::vector<std::size_t> taken) {
    phase_ = phase::done;
    whole_ = std::move(whole);
    taken_ = std::move(taken);
}

bool shared_bundle_read::abandon() {
    if (phase_ == phase::waiting || phase_ == phase::consuming) {
        phase_ = phase::abandoned;
        return true;
    }
    return false;
}

shared_bundle_read::outcome shared_bundle_read::outcome_for(std::size_t index, std::string tid)
    const {
    outcome out;
    if (gone_ || std::find(taken_.begin(), taken_.end(), index) != taken_.end()) {
        out.what = outcome::kind::gone;
        return out;
    }
    if (!whole_) {
        out.what = outcome::kind::failed;
        return out;
    }
    if (protocol::is_published(*whole_, index)) {
        out.what = outcome::kind::published;
        return out;
    }
    auto r = protocol::bundled_result(*whole_, index, std::move(tid));
    if (!r) {
        out.what = outcome::kind::garbage;
        return out;
    }
    out.what = outcome::kind::result;
    out.result = std::move(*r);
    return out;
}

bool results_inbox::wait(const std::string& name, bool name_only) {
    if (follower_.following() && present_.contains(name)) {
        return true;
    }
    auto& w = waited_[name];
    ++w.all;
    w.data += name_only ? 0 : 1;
    ++waits_;
    return false;
}

void results_inbox::unwait(const std::string& name, bool name_only) {
    const auto it = waited_.find(name);
    if (it == waited_.end()) {
        return;
    }
    --waits_;
    if (!name_only && it->second.data > 0) {
        --it->second.data;
    }
    if (--it->second.all == 0) {
        waited_.erase(it);
    }
}

void results_inbox::deliver(
    const std::string& name, const std::optional<std::string>& data, delivery& out
) {
    const auto it = waited_.find(name);
    if (it == waited_.end()) {
        return;
    }
    waits_ -= static_cast<std::size_t>(it->second.all);
    const bool wanted = it->second.data > 0;
    waited_.erase(it);
    if (!wanted) {
        out.named.push_back(name);  // its data is nobody's to copy or read here
    } else if (data) {
        out.with_data.emplace_back(name, *data);
    } else {
        out.to_read.push_back(name);
    }
}

std::optional<results_inbox::delivery> results_inbox::log_read(
    protocol::dir_stat s, std::string_view data
) {
    auto log = protocol::decode_change_log(data);
    std::optional<std::size_t> created;
    if (log) {
        created = log->created.size();
    }
    last_log_.clear();
    switch (follower_.read(s, created)) {
    case protocol::log_follower::step::skip:
        return delivery{};
    case protocol::log_follower::step::apply: {
        delivery out;
        for (const auto& e : log->created) {
            present_.insert(e.name);
            deliver(e.name, e.data, out);
        }
        return out;
    }
    case protocol::log_follower::step::list:
        break;
    }
    if (log) {
        for (auto& e : log->created) {
            if (e.data) {
                last_log_.emplace(std::move(e.name), std::move(*e.data));
            }
        }
    }
    return std::nullopt;
}

results_inbox::delivery results_inbox::listed(
    const std::vector<std::string>& names, protocol::dir_stat s
) {
    follower_.listed(s);
    ++listings_;
    present_ = std::set<std::string>(names.begin(), names.end());
    delivery out;
    for (const auto& name : names) {
        if (!waited_.contains(name)) {
            continue;
        }
        std::optional<std::string> data;
        if (const auto it = last_log_.find(name); it != last_log_.end()) {
            data = std::move(it->second);
        }
        deliver(name, data, out);
    }
    last_log_.clear();
    return out;
}

void results_inbox::removed(const std::string& name) {
    present_.erase(name);
    follower_.removed();
}

void results_inbox::gone() {
    follower_.forget();
    present_.clear();
    last_log_.clear();
}

}  // namespace zkd::roles
