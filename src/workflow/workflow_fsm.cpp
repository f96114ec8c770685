// SPDX-License-Identifier: MIT
#include "workflow/workflow_fsm.hpp"

#include "workflow/txn.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <functional>
#include <queue>

namespace zkd::workflow {

namespace json = boost::json;

namespace {

/// The error codes the engine writes itself (docs/protocol.md §11.4).
constexpr std::string_view bad_map_input = "bad_map_input";
constexpr std::string_view too_many_elements = "too_many_elements";
constexpr std::string_view bad_inputs = "bad_inputs";
constexpr std::string_view malformed_result = "malformed_result";

bool launched_char(char c) noexcept {
    return c == 'r' || c == 's' || c == 'f';
}

std::string_view kind_of(const json::value& v) noexcept {
    switch (v.kind()) {
    case json::kind::null:
        return "null";
    case json::kind::bool_:
        return "a boolean";
    case json::kind::int64:
    case json::kind::uint64:
    case json::kind::double_:
        return "a number";
    case json::kind::string:
        return "a string";
    case json::kind::array:
        return "an array";
    case json::kind::object:
        return "an object";
    }
    return "a value";
}

}  // namespace

std::optional<std::int64_t> reap_at_ms(const workflow_state& s, std::int64_t retention_ms) {
    if (s.status == workflow_status::running) {
        return std::nullopt;
    }
    return s.finished_ms + retention_ms;
}

bool needs_following(const workflow_state& s) {
    if (s.status == workflow_status::running) {
        return true;
    }
    return s.status == workflow_status::cancelled &&
           s.steps.find(static_cast<char>(step_status::running)) != std::string::npos;
}

workflow_fsm::workflow_fsm(
    workflow_ref ref, std::shared_ptr<const workflow_spec> spec, options opts
)
    : ref_(ref),
      id_(workflow_id(ref)),
      client_hex_(client_hex(ref.client)),
      spec_(std::move(spec)),
      opts_(opts) {
    // Kahn's order (the spec has no cycle: parse_spec refused it).
    const auto n = spec_->steps.size();
    std::vector<std::size_t> indegree(n);
    // The lowest index first among the ready ones: tasks are numbered (and launched) in the
    // order of the steps' names where the graph leaves a choice.
    std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
    for (std::size_t i = 0; i < n; ++i) {
        indegree[i] = spec_->steps[i].after.size();
        if (indegree[i] == 0) {
            ready.push(i);
        }
    }
    while (!ready.empty()) {
        const auto i = ready.top();
        ready.pop();
        topo_.push_back(i);
        for (const auto d : spec_->dependants[i]) {
            if (--indegree[d] == 0) {
                ready.push(d);
            }
        }
    }
    state_.steps.assign(n, static_cast<char>(step_status::waiting));
    state_.next = n;
}

std::string workflow_fsm::task_id(std::size_t step, std::uint64_t element) const {
    const auto& st = spec_->steps[step];
    if (st.map) {
        const auto* a = alloc_of(state_, step);
        return step_task_id(ref_, st.priority, (a != nullptr ? a->base : 0) + element);
    }
    return step_task_id(ref_, st.priority, step);
}

workflow_step workflow_fsm::on(const workflow_event& e, std::int64_t now_ms) {
    if (const auto* l = std::get_if<wf_saw::loaded>(&e)) {
        return on_loaded(*l, now_ms);
    }
    if (const auto* r = std::get_if<wf_saw::result>(&e)) {
        record(r->tid, r->result);
        return advance(now_ms);
    }
    if (std::holds_alternative<wf_saw::cancel>(e)) {
        cancel_requested_ = true;
        return advance(now_ms);
    }
    if (std::holds_alternative<wf_saw::tick>(e)) {
        return advance(now_ms);
    }
    const auto& w = std::get<wf_saw::written>(e);
    if (!in_flight_) {
        return {};
    }
    if (!w.committed) {
        // Not applied, or its outcome unknown: what the state says now decides.
        in_flight_.reset();
        loaded_ = false;
        return workflow_step{{wf_do::reload{}}, std::nullopt};
    }
    state_ = std::move(in_flight_->next);
    version_ = version_ < 0 ? 0 : version_ + 1;
    auto cancels = std::move(in_flight_->cancels);
    in_flight_.reset();
    auto out = advance(now_ms);
    if (!cancels.empty()) {
        out.actions.insert(out.actions.begin(), wf_do::cancel_tasks{std::move(cancels)});
    }
    return out;
}

workflow_step workflow_fsm::on_loaded(const wf_saw::loaded& e, std::int64_t now) {
    loaded_ = true;
    in_flight_.reset();
    finished_sent_ = false;
    // Results never change once written: what was seen before a reload still holds.
    if (e.state) {
        state_ = *e.state;
        version_ = e.version;
    } else {
        state_ = workflow_state{};
        state_.steps.assign(spec_->steps.size(), static_cast<char>(step_status::waiting));
        state_.next = spec_->steps.size();
        state_.started_ms = now;
        version_ = -1;
    }
    cancel_requested_ = cancel_requested_ || e.cancel_requested;
    for (const auto& [tid, r] : e.results) {
        record(tid, r);
    }
    auto out = advance(now);
    if (state_.status == workflow_status::cancelled) {
        // Tasks that ran when it was cancelled and have not ended: ask again (a master that
        // wrote the state may have died before it asked).
        std::vector<std::string> tids;
        for (std::size_t i = 0; i < spec_->steps.size(); ++i) {
            if (state_.steps[i] != static_cast<char>(step_status::running)) {
                continue;
            }
            if (const auto* a = alloc_of(state_, i)) {
                for (std::uint64_t k = a->base; k < a->base + a->launched; ++k) {
                    if (outcome_of(k) == nullptr) {
                        tids.push_back(step_task_id(ref_, spec_->steps[i].priority, k));
                    }
                }
            } else if (!spec_->steps[i].map && outcome_of(i) == nullptr) {
                tids.push_back(step_task_id(ref_, spec_->steps[i].priority, i));
            }
        }
        if (!tids.empty()) {
            out.actions.insert(out.actions.begin(), wf_do::cancel_tasks{std::move(tids)});
        }
    }
    return out;
}

void workflow_fsm::record(std::string_view tid, const read_result& r) {
    const auto k = task_number(ref_, tid);
    if (!k) {
        return;  // not a task of this workflow
    }
    outcome o;
    if (!r) {
        o.error = protocol::task_error{std::string(malformed_result), r.error().message};
    } else if (r->state == protocol::task_state::succeeded) {
        o.succeeded = true;
        o.value = r->value;
    } else {
        o.error = r->error.value_or(protocol::task_error{std::string(to_string(r->state)), ""});
    }
    outcomes_[*k] = std::move(o);
}

const workflow_fsm::outcome* workflow_fsm::outcome_of(std::uint64_t k) const {
    const auto it = outcomes_.find(k);
    return it == outcomes_.end() ? nullptr : &it->second;
}

const map_alloc* workflow_fsm::alloc_of(const workflow_state& s, std::size_t step) const {
    const auto it =
        std::lower_bound(s.maps.begin(), s.maps.end(), step, [](const map_alloc& a, std::size_t i) {
            return a.step < i;
        });
    return it != s.maps.end() && it->step == step ? &*it : nullptr;
}

json::value workflow_fsm::value_of(const workflow_state& s, std::size_t step) const {
    if (!spec_->steps[step].map) {
        const auto* o = outcome_of(step);
        return o != nullptr && o->succeeded ? o->value : json::value{};
    }
    const auto* a = alloc_of(s, step);
    if (a == nullptr) {
        return {};
    }
    json::array out;
    out.reserve(a->count);
    for (std::uint64_t k = a->base; k < a->base + a->count; ++k) {
        const auto* o = outcome_of(k);
        out.push_back(o != nullptr && o->succeeded ? o->value : json::value{});
    }
    return out;
}

protocol::codec_result<std::string> workflow_fsm::build_task(
    const workflow_state& s,
    std::size_t step,
    std::uint64_t element,
    const json::value* item,
    std::int64_t now
) const {
    const auto& st = spec_->steps[step];
    json::object inputs;
    for (const auto p : st.after) {
        if (st.map != p) {
            inputs[spec_->steps[p].name] = value_of(s, p);
        }
    }
    protocol::task_spec t;
    t.type = st.type;
    if (st.map && st.args.is_object()) {
        auto o = st.args.get_object();
        o["item"] = *item;
        o["index"] = element;
        if (!inputs.empty()) {
            o["inputs"] = std::move(inputs);
        }
        t.args = std::move(o);
    } else if (st.map) {
        t.args = *item;
    } else if (st.args.is_object() && !st.after.empty()) {
        auto o = st.args.get_object();
        o["inputs"] = std::move(inputs);
        t.args = std::move(o);
    } else {
        t.args = st.args;
    }
    t.priority = st.priority;
    t.timeout = st.timeout;
    t.max_attempts = st.max_attempts;
    t.submitted_ms = now;
    t.client = client_hex_;
    if (auto ok = protocol::validate(t); !ok) {
        return protocol::decode_error{"its task cannot be built: " + ok.error().message};
    }
    auto data = protocol::encode(t);
    if (!protocol::task_size_ok(data)) {
        return protocol::decode_error{
            "its task with its inputs is " + std::to_string(data.size()) + " bytes, over the " +
            std::to_string(protocol::max_task_bytes) + " a task may hold"};
    }
    return protocol::codec_result<std::string>(boost::system::in_place_value, std::move(data));
}

workflow_fsm::plan workflow_fsm::compute(std::int64_t now, bool launch, std::size_t max_creates)
    const {
    plan p{state_, {}, {}};
    auto& n = p.next;
    if (n.status != workflow_status::running) {
        return p;
    }
    const bool cancelling = cancel_requested_ && launch;
    max_creates = launch ? std::min(max_creates, opts_.max_creates_per_write) : 0;
    // What the write's multi takes at most (launch_bound): the state as it is now, plus what
    // it may grow by (its status and finished_ms; each map's `launched`, up to 20 digits),
    // then each map and error added and each create, as they come.
    std::size_t bytes = 0;
    if (launch) {
        bytes = launch_fixed_bytes(id_, encode_state(n).size() + 64 + 20 * n.maps.size());
    }
    auto room_for = [&](std::string_view tid, std::size_t size) {
        return p.creates.size() < max_creates &&
               (p.creates.empty() || bytes + launch_create_bytes(tid, size) <= opts_.max_write_bytes
               );
    };
    auto create = [&](std::string tid, std::string data) {
        bytes += launch_create_bytes(tid, data.size());
        p.creates.push_back({std::move(tid), std::move(data)});
    };
    auto fail = [&](std::size_t i, std::string_view code, std::string message) {
        const auto& name = spec_->steps[i].name;
        const json::object e{{name, json::object{{"code", code}, {"message", message}}}};
        bytes += json::serialize(e).size();
        n.errors[name] = protocol::task_error{std::string(code), std::move(message)};
        n.steps[i] = static_cast<char>(step_status::failed);
    };

    for (const auto i : topo_) {
        const auto& st = spec_->steps[i];
        char& c = n.steps[i];
        if (n.errors.contains(st.name)) {
            c = static_cast<char>(step_status::failed);
            continue;
        }
        const bool allocated = st.map ? alloc_of(n, i) != nullptr : launched_char(c);
        if (!allocated) {
            c = static_cast<char>(step_status::waiting);
            bool all = true;
            bool skip = false;
            for (const auto pr : st.after) {
                const auto pc = static_cast<step_status>(n.steps[pr]);
                if (!is_decided(pc)) {
                    all = false;
                    break;
                }
                skip = skip || pc == step_status::skipped || pc == step_status::cancelled ||
                       (pc == step_status::failed && !spec_->steps[pr].continue_on_failure);
            }
            if (!all) {
                continue;
            }
            if (skip) {
                c = static_cast<char>(step_status::skipped);
                continue;
            }
            if (cancelling || !launch) {
                continue;  // ready, not launched
            }
            if (st.map) {
                const auto src = value_of(n, *st.map);
                const auto& src_name = spec_->steps[*st.map].name;
                if (!src.is_array()) {
                    fail(
                        i, bad_map_input,
                        "step \"" + src_name + "\" returned " + std::string(kind_of(src)) +
                            ", not an array to map over"
                    );
                    continue;
                }
                if (src.get_array().size() > max_map_elements) {
                    fail(
                        i, too_many_elements,
                        "step \"" + src_name + "\" returned " +
                            std::to_string(src.get_array().size()) +
                            " elements, over the limit of " + std::to_string(max_map_elements)
                    );
                    continue;
                }
                const map_alloc a{i, n.next, src.get_array().size(), 0};
                n.next += a.count;
                // {"step":..,"base":..,"count":..,"launched":..}, each up to 20 digits.
                bytes += 128;
                n.maps.insert(
                    std::upper_bound(
                        n.maps.begin(), n.maps.end(), i,
                        [](std::size_t s, const map_alloc& m) { return s < m.step; }
                    ),
                    a
                );
            } else {
                auto task = build_task(n, i, 0, nullptr, now);
                if (!task) {
                    fail(i, bad_inputs, task.error().message);
                    continue;
                }
                auto tid = step_task_id(ref_, st.priority, i);
                if (!room_for(tid, task->size())) {
                    continue;  // the next write launches it
                }
                create(std::move(tid), std::move(*task));
                c = static_cast<char>(step_status::running);
                continue;
            }
        }
        if (!st.map) {
            const auto* o = outcome_of(i);
            c = static_cast<char>(
                o == nullptr ? step_status::running
                             : (o->succeeded ? step_status::succeeded : step_status::failed)
            );
            continue;
        }
        // A map step with its elements allocated: launch what is left, then see them end.
        auto it = std::find_if(n.maps.begin(), n.maps.end(), [&](const map_alloc& m) {
            return m.step == i;
        });
        auto& a = *it;
        c = static_cast<char>(step_status::running);
        if (a.launched < a.count && launch && !cancelling) {
            const auto src = value_of(n, *st.map);
            if (!src.is_array() || src.get_array().size() != a.count) {
                fail(
                    i, bad_map_input,
                    "the array of step \"" + spec_->steps[*st.map].name +
                        "\" is no longer the one its elements were given for"
                );
                continue;
            }
            const auto& items = src.get_array();
            bool failed = false;
            while (a.launched < a.count) {
                auto task = build_task(n, i, a.launched, &items[a.launched], now);
                if (!task) {
                    fail(
                        i, bad_inputs,
                        "element " + std::to_string(a.launched) + ": " + task.error().message
                    );
                    failed = true;
                    break;
                }
                auto tid = step_task_id(ref_, st.priority, a.base + a.launched);
                if (!room_for(tid, task->size())) {
                    break;
                }
                create(std::move(tid), std::move(*task));
                ++a.launched;
            }
            if (failed) {
                continue;
            }
        }
        if (a.launched == a.count) {
            std::uint64_t done = 0;
            bool all_ok = true;
            for (std::uint64_t k = a.base; k < a.base + a.count; ++k) {
                if (const auto* o = outcome_of(k)) {
                    ++done;
                    all_ok = all_ok && o->succeeded;
                }
            }
            if (done == a.count) {
                c = static_cast<char>(all_ok ? step_status::succeeded : step_status::failed);
            }
        }
    }

    if (cancelling) {
        for (std::size_t i = 0; i < n.steps.size(); ++i) {
            const auto s = static_cast<step_status>(n.steps[i]);
            if (s == step_status::waiting) {
                n.steps[i] = static_cast<char>(step_status::cancelled);
            } else if (s == step_status::running) {
                // Stays 'r' in the state: it ran when cancelled (docs/protocol.md §11.4).
                if (const auto* a = alloc_of(n, i)) {
                    for (std::uint64_t k = a->base; k < a->base + a->launched; ++k) {
                        if (outcome_of(k) == nullptr) {
                            p.cancels.push_back(step_task_id(ref_, spec_->steps[i].priority, k));
                        }
                    }
                } else if (!spec_->steps[i].map && outcome_of(i) == nullptr) {
                    p.cancels.push_back(step_task_id(ref_, spec_->steps[i].priority, i));
                }
            }
        }
        n.status = workflow_status::cancelled;
        n.finished_ms = now;
        return p;
    }
    bool all_decided = true;
    bool failed = false;
    for (std::size_t i = 0; i < n.steps.size(); ++i) {
        const auto s = static_cast<step_status>(n.steps[i]);
        all_decided = all_decided && is_decided(s);
        failed = failed || s == step_status::skipped ||
                 (s == step_status::failed && !spec_->steps[i].continue_on_failure);
    }
    if (all_decided && launch) {
        n.status = failed ? workflow_status::failed : workflow_status::succeeded;
        n.finished_ms = now;
    }
    return p;
}

workflow_step workflow_fsm::advance(std::int64_t now) {
    workflow_step out;
    if (!loaded_ || in_flight_) {
        return out;
    }
    if (state_.status != workflow_status::running) {
        if (!finished_sent_) {
            finished_sent_ = true;
            out.actions.emplace_back(wf_do::finished{state_.status});
        }
        const auto reap_at = *reap_at_ms(state_, opts_.retention_ms);
        if (now >= reap_at) {
            out.actions.emplace_back(wf_do::reap{});
        } else {
            out.wake_at_ms = reap_at;
        }
        return out;
    }
    auto p = compute(now, true);
    // The estimate compute() keeps as it goes is an upper bound of what it wrote, but an
    // error decided after its last create may take the state past it: then fewer creates
    // (the bound being monotonic in them), down to one.
    while (p.creates.size() > 1 &&
           launch_bound(id_, encode_state(p.next), p.creates) > opts_.max_write_bytes) {
        p = compute(now, true, p.creates.size() / 2);
    }
    const auto& n = p.next;
    const bool write = version_ < 0 || !p.creates.empty() || n.status != state_.status ||
                       n.next != state_.next || n.maps != state_.maps || n.errors != state_.errors;
    if (!write) {
        return out;
    }
    wf_do::write w;
    if (version_ >= 0) {
        w.version = version_;
    }
    w.state = encode_state(n);
    w.creates = std::move(p.creates);
    p.creates.clear();
    in_flight_ = std::move(p);
    out.actions.emplace_back(std::move(w));
    return out;
}

std::vector<step_view> workflow_fsm::view() const {
    const auto p = compute(0, false);
    std::vector<step_view> out(spec_->steps.size());
    const bool cancelled = state_.status == workflow_status::cancelled;
    for (std::size_t i = 0; i < out.size(); ++i) {
        auto& v = out[i];
        const auto& st = spec_->steps[i];
        v.status = static_cast<step_status>(p.next.steps[i]);
        if (st.map) {
            if (const auto* a = alloc_of(p.next, i)) {
                v.tasks = a->launched;
                for (std::uint64_t k = a->base; k < a->base + a->launched; ++k) {
                    if (const auto* o = outcome_of(k)) {
                        ++v.done;
                        if (!o->succeeded && !v.error) {
                            v.error = o->error;
                        }
                    }
                }
            }
        } else if (launched_char(p.next.steps[i]) && !p.next.errors.contains(st.name)) {
            v.tasks = 1;
            if (const auto* o = outcome_of(i)) {
                v.done = 1;
                if (!o->succeeded) {
                    v.error = o->error;
                }
            }
        }
        if (const auto it = p.next.errors.find(st.name); it != p.next.errors.end()) {
            v.error = it->second;
        }
        if (cancelled && v.status == step_status::running) {
            v.status = step_status::cancelled;
        }
        if (v.status == step_status::succeeded || v.status == step_status::failed) {
            v.value = value_of(p.next, i);
        }
    }
    return out;
}

json::object workflow_fsm::result() const {
    json::object out;
    for (const auto i : spec_->sinks()) {
        out[spec_->steps[i].name] = value_of(state_, i);
    }
    return out;
}

}  // namespace zkd::workflow
