// SPDX-License-Identifier: MIT
#include "roles/worker/detail/worker_fsm.hpp"

#include "protocol/ids.hpp"

#include <spdlog/spdlog.h>

#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

namespace zkd::roles {

worker_fsm::worker_fsm(protocol::layout l, protocol::member_info me, worker_stats& stats)
    : l_(l), me_(std::move(me)), stats_(stats) {}

template <class DataOf>
std::vector<worker_action> worker_fsm::take(const std::vector<std::string>& names, DataOf data_of) {
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
            out.push_back(worker_action{
                worker_action::kind::run, tid, {}, data_of(tid), std::nullopt});
        }
    }
    for (const auto& tid : markers) {
        // One task of a bundle in hand (§6 T7 "One task of a bundle"): stop that one alone.
        if (const auto ref = protocol::parse_task_ref(tid); ref && ref->index) {
            const std::string bundle(ref->node);
            if (auto it = tasks_.find(bundle); it != tasks_.end()) {
                if (it->second.entries.insert(*ref->index).second) {
                    ++stats_.cancelled;
                    out.push_back(worker_action{
                        worker_action::kind::stop, bundle, {}, std::nullopt, *ref->index});
                }
                continue;
            }
            if (assigned.contains(bundle)) {
                continue;  // not taken up (stopping): T6 deals with it
            }
            // Its bundle is not here: it left before this marker was seen (its T4, a retry
            // or a result, or taken back by the master while the marker came). Should it run
            // again elsewhere, its task must not: the marker goes back to being the task's
            // request, in one multi (a bundle that ended finds the request dropped, §6 T7).
            out.push_back(worker_action{
                worker_action::kind::remove_marker, tid,
                protocol::return_entry_cancel_ops(me_.id, tid, protocol::now_ms()), std::nullopt,
                std::nullopt});
            continue;
        }
        if (auto it = tasks_.find(tid); it != tasks_.end()) {
            if (!it->second.marker) {
                it->second.marker = true;
                if (it->second.plan) {
                    it->second.plan->marker_seen();
                }
                ++stats_.cancelled;
                out.push_back(worker_action{
                    worker_action::kind::stop, tid, {}, std::nullopt, std::nullopt});
            }
        } else if (!assigned.contains(tid)) {
            // Its task is gone (it finished first): the marker is litter.
            out.push_back(worker_action{
                worker_action::kind::remove_marker,
                tid,
                {protocol::txn_op::remove(protocol::layout::cancel_marker(me_.id, tid))},
                std::nullopt,
                std::nullopt});
        }
    }
    return out;
}

std::vector<worker_action> worker_fsm::listed(const std::vector<std::string>& names) {
    return take(names, [](const std::string&) { return std::optional<std::string>(); });
}

std::vector<worker_action> worker_fsm::listed(
    const std::vector<std::string>& names, protocol::dir_stat s
) {
    follower_.listed(s);
    ++stats_.listings;
    return listed(names);
}

std::optional<std::vector<worker_action>> worker_fsm::log_read(
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

worker_action worker_fsm::dir_missing() const {
    return worker_action{
        worker_action::kind::remake_dir,
        {},
        {protocol::txn_op::create(protocol::layout::assign_dir(me_.id), "")},
        std::nullopt,
        std::nullopt};
}

publish_fsm* worker_fsm::plan_of(const std::string& tid) {
    const auto it = tasks_.find(tid);
    return it != tasks_.end() && it->second.plan ? &*it->second.plan : nullptr;
}

publish_fsm::step worker_fsm::publish(
    const std::string& tid, std::string result, std::string target
) {
    auto& t = tasks_[tid];
    t.published = t.entries;  // what the caller's result or retry holds as cancelled
    t.retry = !target.empty();
    t.plan.emplace(l_, me_.id, tid, std::move(result), t.marker, std::move(target));
    return t.plan->start();
}

std::set<std::size_t> worker_fsm::entries_cancelled(const std::string& tid) const {
    const auto it = tasks_.find(tid);
    return it != tasks_.end() ? it->second.entries : std::set<std::size_t>{};
}

bool worker_fsm::marker_seen(const std::string& tid) const {
    const auto it = tasks_.find(tid);
    return it != tasks_.end() && it->second.marker;
}

publish_fsm::step worker_fsm::publish_answered(
    const std::string& tid, const protocol::txn_answer& a
) {
    // No plan: answers for a task whose publish never began (a caller's bug): over.
    auto* p = plan_of(tid);
    if (p == nullptr) {
        return publish_fsm::step{};
    }
    if (!a.failed && !a.per_op.empty()) {
        follower_.removed(p->removes_sent());  // our own deletes, not a stranger's
    }
    return p->answered(a);
}

publish_fsm::step worker_fsm::publish_cleared(const std::string& tid, bool ok) {
    // No plan: answers for a task whose publish never began (a caller's bug): over.
    auto* p = plan_of(tid);
    return p != nullptr ? p->cleared(ok) : publish_fsm::step{};
}

publish_fsm::step worker_fsm::publish_reconnected(const std::string& tid, bool ok) {
    // No plan: answers for a task whose publish never began (a caller's bug): over.
    auto* p = plan_of(tid);
    return p != nullptr ? p->reconnected(ok) : publish_fsm::step{};
}

std::optional<worker_action> worker_fsm::task_ended(
    const std::string& tid, std::optional<publish_end> how
) {
    std::optional<worker_action> left;
    const bool written =
        how && (*how == publish_end::published || *how == publish_end::published_by_lost_try ||
                *how == publish_end::result_existed);
    if (const auto* p = plan_of(tid); p != nullptr && p->marker_left() && written) {
        left = worker_action{
            worker_action::kind::remove_marker,
            tid,
            {protocol::txn_op::remove(protocol::layout::cancel_marker(me_.id, tid))},
            std::nullopt,
            std::nullopt};
    }
    // The markers of a bundle's tasks: litter once its result (or retry) is written.
    if (const auto it = tasks_.find(tid); it != tasks_.end() && written) {
        for (const auto k : it->second.entries) {
            if (!left) {
                left = worker_action{
                    worker_action::kind::remove_marker, tid, {}, std::nullopt, std::nullopt};
            }
            const auto entry = protocol::bundled_task_id(tid, k);
            if (it->second.retry && !it->second.published.contains(k)) {
                // Came after the retry was built: the retry runs the task again unless its
                // request is made again (§6 T7 "One task of a bundle").
                for (auto& op :
                     protocol::return_entry_cancel_ops(me_.id, entry, protocol::now_ms())) {
                    left->ops.push_back(std::move(op));
                }
                continue;
            }
            left->ops.push_back(
                protocol::txn_op::remove(protocol::layout::cancel_marker(me_.id, entry))
            );
        }
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

worker_action worker_fsm::drain() {
    draining_ = true;
    return worker_action{
        worker_action::kind::mark_draining,
        {},
        {protocol::drain_op(me_)},
        std::nullopt,
        std::nullopt};
}

std::vector<std::string> worker_fsm::stop() {
    stopping_ = true;
    std::vector<std::string> out;
    out.reserve(tasks_.size());
    for (const auto& [tid, t] : tasks_) {
        out.push_back(tid);
    }
    return out;
}

bool worker_fsm::cancelled(const std::string& tid) const {
    const auto it = tasks_.find(tid);
    return it != tasks_.end() && it->second.marker;
}

}  // namespace zkd::roles
