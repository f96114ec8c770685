// SPDX-License-Identifier: MIT
#include "roles/worker/worker_fsm.hpp"

#include "protocol/ids.hpp"

#include <spdlog/spdlog.h>

#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

namespace zkd::roles {

// --- publish_plan ----------------------------------------------------------------------------

publish_plan::publish_plan(
    protocol::layout l, std::string worker, std::string tid, std::string result, bool marker
)
    : l_(l),
      worker_(std::move(worker)),
      tid_(std::move(tid)),
      result_(std::move(result)),
      form_{true, marker, true},
      marker_(marker) {}

publish_plan::step publish_plan::done(publish_end e) {
    step s;
    s.what = step::kind::done;
    s.end = e;
    return s;
}

publish_plan::step publish_plan::send() {
    if (tries_ >= max_tries) {
        spdlog::warn("worker {}: cannot publish {}: {} tries failed", worker_, tid_, max_tries);
        return done(publish_end::given_up);
    }
    ++tries_;
    if (!form_.fenced_by_assignment) {
        form_.with_marker = false;  // the marker goes with the assignment only
    }
    sent_ = form_;
    step s;
    s.what = step::kind::send;
    s.ops = protocol::publish_ops(l_, worker_, tid_, result_, sent_);
    return s;
}

publish_plan::step publish_plan::start() {
    return send();
}

publish_plan::step publish_plan::answered(const protocol::txn_answer& a) {
    using protocol::publish_outcome;
    last_unknown_ = false;
    switch (protocol::read_publish(a, sent_)) {
    case publish_outcome::committed:
        return done(publish_end::published);
    case publish_outcome::assignment_gone:
        if (maybe_applied_) {
            // Our unanswered try deleted it: the result went with it (and may be consumed
            // by now).
            spdlog::info(
                "worker {}: the result of task {} was published by a try whose answer was lost",
                worker_, tid_
            );
            return done(publish_end::published_by_lost_try);
        }
        // Deleted by someone else (every try of ours was answered).
        spdlog::warn(
            "worker {}: the assignment of task {} is gone while this worker is still a member; "
            "publishing its result checked against /workers",
            worker_, tid_
        );
        form_.fenced_by_assignment = false;
        return send();
    case publish_outcome::worker_gone:
        // Our /workers node is gone too: the master took the task back.
        spdlog::info("worker {}: task {} was taken back; result discarded", worker_, tid_);
        return done(publish_end::discarded);
    case publish_outcome::foreign_below: {
        // Someone wrote below our assignment: clear it, then publish (§8).
        step s;
        s.what = step::kind::clear_foreign;
        s.path = protocol::layout::assignment(worker_, tid_);
        return s;
    }
    case publish_outcome::result_exists:
        if (!form_.fenced_by_assignment) {
            spdlog::info(
                "worker {}: the result of task {} is there already (a try of ours whose "
                "answer was lost, or another attempt's: its assignment is gone); this one is "
                "not written",
                worker_, tid_
            );
            return done(publish_end::result_existed);
        }
        // Our assignment stands, so no try of ours published: another's node is there (an
        // earlier attempt's late result, or someone else's write). Only one result is ever
        // visible (§3): ours is dropped, said here so that it is not lost without a word.
        spdlog::warn(
            "worker {}: a result node of task {} exists already (another attempt's or a "
            "stranger's): this attempt's result is dropped, its assignment cleared; it was: {}",
            worker_, tid_, result_.substr(0, 300) + (result_.size() > 300 ? "..." : "")
        );
        form_.with_result = false;  // a result exists already: only clear our assignment
        return send();
    case publish_outcome::marker_gone:
        marker_gone_ = true;
        form_.with_marker = false;  // the marker went meanwhile
        return send();
    case publish_outcome::unknown:
        last_unknown_ = true;
        break;
    case publish_outcome::failed:
        break;
    }
    step s;
    s.what = step::kind::reconnect;
    return s;
}

publish_plan::step publish_plan::cleared(bool ok) {
    if (ok) {
        return send();
    }
    step s;
    s.what = step::kind::reconnect;
    return s;
}

publish_plan::step publish_plan::reconnected(bool ok) {
    if (!ok) {
        return done(publish_end::given_up);
    }
    // The outcome was unknown: a retry hits the fence if that try applied.
    maybe_applied_ = maybe_applied_ || last_unknown_;
    return send();
}

// --- worker_state ----------------------------------------------------------------------------

worker_state::worker_state(protocol::layout l, protocol::member_info me, worker_stats& stats)
    : l_(l), me_(std::move(me)), stats_(stats) {}

template <class DataOf>
std::vector<worker_action> worker_state::take(
    const std::vector<std::string>& names, DataOf data_of
) {
    std::vector<worker_action> out;
    if (stopping_) {
        return out;
    }
    std::set<std::string> markers;
    std::set<std::string> assigned;
    for (const auto& name : names) {
        if (protocol::is_cancel_marker(name)) {
            markers.emplace(protocol::marker_task(name));
        } else {
            assigned.insert(name);
        }
    }
    for (const auto& tid : assigned) {
        if (tasks_.try_emplace(tid).second) {
            ++stats_.started;
            out.push_back(worker_action{worker_action::kind::run, tid, {}, data_of(tid)});
        }
    }
    for (const auto& tid : markers) {
        if (auto it = tasks_.find(tid); it != tasks_.end()) {
            if (!it->second.marker) {
                it->second.marker = true;
                if (it->second.plan) {
                    it->second.plan->marker_seen();
                }
                ++stats_.cancelled;
                out.push_back(worker_action{worker_action::kind::stop, tid, {}, std::nullopt});
            }
        } else if (!assigned.contains(tid)) {
            // Its task is gone (it finished first): the marker is litter.
            out.push_back(worker_action{
                worker_action::kind::remove_marker,
                tid,
                {protocol::txn_op::remove(protocol::layout::cancel_marker(me_.id, tid))},
                std::nullopt});
        }
    }
    return out;
}

std::vector<worker_action> worker_state::listed(const std::vector<std::string>& names) {
    return take(names, [](const std::string&) { return std::optional<std::string>(); });
}

std::vector<worker_action> worker_state::listed(
    const std::vector<std::string>& names, protocol::dir_stat s
) {
    follower_.listed(s);
    ++stats_.listings;
    return listed(names);
}

std::optional<std::vector<worker_action>> worker_state::log_read(
    protocol::dir_stat s, std::string_view data
) {
    auto log = protocol::decode_change_log(data);
    const auto created = log ? std::optional<std::size_t>(log->created.size()) : std::nullopt;
    switch (follower_.read(s, created)) {
    case protocol::log_follower::step::list:
        return std::nullopt;
    case protocol::log_follower::step::skip:
        return std::vector<worker_action>{};
    case protocol::log_follower::step::apply:
        break;
    }
    ++stats_.logs_read;
    std::vector<std::string> names;
    std::map<std::string, std::string, std::less<>> data_of;
    names.reserve(log->created.size());
    for (auto& e : log->created) {
        names.push_back(e.name);
        if (e.data) {
            data_of.emplace(std::move(e.name), std::move(*e.data));
        }
    }
    return take(names, [&data_of](const std::string& tid) {
        const auto it = data_of.find(tid);
        return it != data_of.end() ? std::optional<std::string>(std::move(it->second))
                                   : std::nullopt;
    });
}

worker_action worker_state::dir_missing() const {
    return worker_action{
        worker_action::kind::remake_dir,
        {},
        {protocol::txn_op::create(protocol::layout::assign_dir(me_.id), "")},
        std::nullopt};
}

publish_plan* worker_state::plan_of(const std::string& tid) {
    const auto it = tasks_.find(tid);
    return it != tasks_.end() && it->second.plan ? &*it->second.plan : nullptr;
}

publish_plan::step worker_state::publish(const std::string& tid, std::string result) {
    auto& t = tasks_[tid];
    t.plan.emplace(l_, me_.id, tid, std::move(result), t.marker);
    return t.plan->start();
}

publish_plan::step worker_state::publish_answered(
    const std::string& tid, const protocol::txn_answer& a
) {
    // No plan: answers for a task whose publish never began (a caller's bug): over.
    auto* p = plan_of(tid);
    if (p == nullptr) {
        return publish_plan::step{};
    }
    if (!a.failed && !a.per_op.empty()) {
        follower_.removed(p->removes_sent());  // our own deletes, not a stranger's
    }
    return p->answered(a);
}

publish_plan::step worker_state::publish_cleared(const std::string& tid, bool ok) {
    // No plan: answers for a task whose publish never began (a caller's bug): over.
    auto* p = plan_of(tid);
    return p != nullptr ? p->cleared(ok) : publish_plan::step{};
}

publish_plan::step worker_state::publish_reconnected(const std::string& tid, bool ok) {
    // No plan: answers for a task whose publish never began (a caller's bug): over.
    auto* p = plan_of(tid);
    return p != nullptr ? p->reconnected(ok) : publish_plan::step{};
}

std::optional<worker_action> worker_state::task_ended(
    const std::string& tid, std::optional<publish_end> how
) {
    std::optional<worker_action> left;
    if (const auto* p = plan_of(tid);
        p != nullptr && p->marker_left() && how &&
        (*how == publish_end::published || *how == publish_end::published_by_lost_try ||
         *how == publish_end::result_existed)) {
        left = worker_action{
            worker_action::kind::remove_marker,
            tid,
            {protocol::txn_op::remove(protocol::layout::cancel_marker(me_.id, tid))},
            std::nullopt};
    }
    tasks_.erase(tid);
    if (!how) {
        return left;
    }
    switch (*how) {
    case publish_end::published:
    case publish_end::published_by_lost_try:
        ++stats_.published;
        break;
    case publish_end::discarded:
        ++stats_.discarded;
        break;
    case publish_end::result_existed:
    case publish_end::given_up:
        break;
    }
    return left;
}

worker_action worker_state::drain() {
    draining_ = true;
    return worker_action{
        worker_action::kind::mark_draining, {}, {protocol::drain_op(me_)}, std::nullopt};
}

std::vector<std::string> worker_state::stop() {
    stopping_ = true;
    std::vector<std::string> out;
    out.reserve(tasks_.size());
    for (const auto& [tid, t] : tasks_) {
        out.push_back(tid);
    }
    return out;
}

bool worker_state::cancelled(const std::string& tid) const {
    const auto it = tasks_.find(tid);
    return it != tasks_.end() && it->second.marker;
}

}  // namespace zkd::roles
