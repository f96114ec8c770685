// SPDX-License-Identifier: MIT
// master_fsm's decisions (master_fsm.hpp): which cancels, rejections, assignments and reads to
// start on a decide event, and what the answers to those transactions change.
#include "protocol/ids.hpp"
#include "roles/master/detail/master_fsm.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <utility>

namespace zkd::roles {

// --- decisions -------------------------------------------------------------------------------

std::optional<master_fsm::clock::time_point> master_fsm::decide(clock::time_point now) {
    handle_cancels(now);
    auto grace_ends = reject_unplaceable(now);
    assign(now);
    if (load_more(now)) {
        // Some came from the logs' data kept aside: decide on them now, not at the next event.
        if (const auto more = reject_unplaceable(now);
            more && (!grace_ends || *more < *grace_ends)) {
            grace_ends = more;
        }
        assign(now);
        load_more(now);
    }
    auto wake_at = grace_ends;
    if (const auto relist = relist_departed(now); relist && (!wake_at || *relist < *wake_at)) {
        wake_at = relist;
    }
    for (const auto& [tid, t] : troubled_) {
        if (t.not_before > now && (!wake_at || t.not_before < *wake_at)) {
            wake_at = t.not_before;
        }
    }
    if (load_paused_until_ > now && (!wake_at || load_paused_until_ < *wake_at)) {
        wake_at = load_paused_until_;
    }
    if (const auto due = release_due(now); due && (!wake_at || *due < *wake_at)) {
        wake_at = due;
    }
    return wake_at;
}

void master_fsm::handle_cancels(clock::time_point now) {
    for (const auto& tid : cancels_) {
        if (cancels_in_flight_.contains(tid)) {
            continue;
        }
        auto p = pending_.find(tid);
        const std::string* holder = nullptr;
        for (const auto& [id, w] : workers_) {
            if (w.alive && w.assigned.contains(tid)) {
                holder = &id;
            }
        }
        const bool retry = cancel_failures_.contains(tid);
        if (!retry && cancel_entry(tid)) {
            continue;  // one task of a bundle: forwarded, or waiting for its bundle's T2
        }
        if (!retry && p == pending_.end() && holder == nullptr && cancel_delayed(tid)) {
            continue;  // delayed: cancelled there, or once its read or release is answered
        }
        if (p != pending_.end() && clearing_.contains(path_of(tid, p->second))) {
            continue;  // cancelled once what others wrote below it is gone
        }
        master_do::cancel a;
        a.tid = tid;
        if (!retry && p != pending_.end() && !p->second.in_flight) {
            p->second.in_flight = true;
            a.path = path_of(tid, p->second);
            // A requeued or released bundle read already keeps its published tasks (§6 T4e).
            const auto& task = p->second.task;
            a.ops = protocol::cancel_pending_ops(
                l_, p->second.shard, tid, task ? task->head.attempt : 0, protocol::now_ms(),
                task ? std::string_view(task->data) : std::string_view()
            );
        } else if (!retry && p != pending_.end()) {
            continue;  // an assignment of it is in flight: decide when it lands
        } else if (!retry && holder != nullptr) {
            a.worker = *holder;
            a.ops = protocol::cancel_assigned_ops(*holder, tid);
        } else {
            if (!retry) {
                // Unknown here: finished already, or submitted so recently that its shard has
                // not been read yet. Only a request unknown for a while is dropped.
                const auto since = unknown_cancels_.try_emplace(tid, now).first->second;
                if (now - since < opts_.unknown_cancel_grace) {
                    continue;
                }
            }
            a.ops = protocol::drop_cancel_ops(tid);
        }
        unknown_cancels_.erase(tid);
        cancels_in_flight_.insert(tid);
        out_.emplace_back(std::move(a));
    }
}

void master_fsm::done(
    const master_do::cancel& a, const master_txn_report& r, clock::time_point /*now*/
) {
    const auto& tid = a.tid;
    const auto outcome = protocol::read_cancel(r.answer);
    cancels_in_flight_.erase(tid);
    if (a.path == l_.delayed_task(tid)) {
        // A delayed task's (T7): gone from the delayed tree, or back in the queue.
        if (outcome == protocol::pending_outcome::committed ||
            outcome == protocol::pending_outcome::task_gone) {
            delayed_.forget(tid);
        } else {
            delayed_.put_back(tid, wall_now());
        }
        if (outcome == protocol::pending_outcome::foreign_below) {
            clear_foreign(a.path);
        }
    } else if (auto entry = pending_.find(tid); entry != pending_.end()) {
        entry->second.in_flight = false;
        if (outcome == protocol::pending_outcome::committed) {
            forget(entry);
        }
    }
    if (outcome == protocol::pending_outcome::committed) {
        ++stats_.cancelled;
        cancel_failures_.erase(tid);
        cancels_.erase(tid);
    } else if (outcome == protocol::pending_outcome::foreign_below) {
        // Someone wrote below the pending node: clear it, then cancel again.
        if (auto entry = pending_.find(tid); entry != pending_.end()) {
            clear_foreign(path_of(tid, entry->second));
        }
    } else if (outcome == protocol::pending_outcome::task_gone) {
        // The task moved on from where the view had it: assigned, finished, or back to pending
        // after its worker died (T6). The request stands and is decided again from where the
        // task is next; marking it failed would drop it, and a requeued task would run again.
        // What the view held is stale: forgotten (a shard or directory whose watch fired while
        // this was out lists nothing again).
        if (auto entry = pending_.find(tid); entry != pending_.end() && !a.path.empty()) {
            forget(entry);  // the pending form: its node is gone
        }
        if (auto w = workers_.find(a.worker); w != workers_.end()) {
            // The marker form: the assignment is gone (a bundle's, for one of its tasks).
            const auto ref = protocol::parse_task_ref(tid);
            w->second.assigned.erase(ref ? std::string(ref->node) : tid);
            reindex_used(a.worker);
        }
    } else if (!r.retryable) {
        cancel_failures_.insert(tid);  // next time: only drop the request
    }
}

void master_fsm::reject(
    const std::string& tid, pending_entry& p, std::string_view code, std::string why
) {
    p.in_flight = true;
    master_do::reject a;
    a.tid = tid;
    a.code = std::string(code);
    a.ops = protocol::reject_ops(
        l_, p.shard, tid, code, why, p.task ? p.task->head.attempt : 1, protocol::now_ms(),
        p.task ? std::string_view(p.task->data) : std::string_view()
    );
    a.why = std::move(why);
    out_.emplace_back(std::move(a));
}

void master_fsm::done(
    const master_do::reject& a, const master_txn_report& r, clock::time_point now
) {
    const auto outcome = protocol::read_reject(r.answer);
    auto it = pending_.find(a.tid);
    if (it == pending_.end()) {
        return;
    }
    it->second.in_flight = false;
    if (outcome == protocol::pending_outcome::committed) {
        ++stats_.rejected;
        spdlog::warn("master: task {} rejected ({}): {}", a.tid, a.code, a.why);
    }
    // Done, or its pending node is gone (cancelled): either way, not ours any more.
    if (outcome == protocol::pending_outcome::committed ||
        outcome == protocol::pending_outcome::task_gone) {
        forget(it);
        return;
    }
    if (outcome == protocol::pending_outcome::foreign_below) {
        clear_foreign(path_of(a.tid, it->second));
    }
    if (!stats_.deposed) {
        note_trouble(a.tid, "failing task", r.error, now);
    }
}

std::optional<master_fsm::clock::time_point> master_fsm::reject_unplaceable(clock::time_point now) {
    if (loaded_.empty()) {
        return std::nullopt;  // nothing to look at
    }
    std::optional<clock::time_point> next_check;
    for (const auto& tid : std::vector<std::string>(loaded_.begin(), loaded_.end())) {
        auto& p = pending_.at(tid);
        if (p.in_flight || !may_try(tid, now)) {
            continue;
        }
        if (!p.task) {
            reject(tid, p, protocol::codes::malformed_task, p.malformed ? *p.malformed : "");
            continue;
        }
        if (index_.open_workers() == 0 || index_.anyone_serves(p.task->head.type)) {
            unserved_since_.erase(p.task->head.type);
            continue;
        }
        const auto since = unserved_since_.try_emplace(p.task->head.type, now).first->second;
        if (now - since >= opts_.unknown_type_grace) {
            reject(
                tid, p, protocol::codes::unknown_type,
                "no worker serves task type '" + p.task->head.type + "'"
            );
        } else if (!next_check || since + opts_.unknown_type_grace < *next_check) {
            next_check = since + opts_.unknown_type_grace;
        }
    }
    return next_check;
}

void master_fsm::assign(clock::time_point now) {
    // A worker whose directory changed since it was listed may hold tasks clients placed
    // there directly: nothing goes there until the listing says how many (reading and
    // rejecting go on meanwhile).
    // A suspect (stall_watch) gets nothing, but for a probe now and then. The free slots of
    // the workers that may get a task now: the assignable ones, less what suspects kept
    // waiting have (they are few).
    long free = index_.free_assignable();
    for (const auto& id : stalls_.suspects()) {
        if (const auto* w = index_.find(id); w && w->assignable && !stalls_.may_assign(id, now)) {
            free -= w->free_slots();
        }
    }
    // The queue's order (§3) holds for tasks whose data is not here yet: a task whose data is
    // here (a log brought it) takes no slot that an unread task ahead of it, read now or
    // being read, would want (else, with slots short, the later task holds the slot for its
    // whole run). Tasks behind keep one free slot per unread task ahead. Unread tasks are
    // not counted while none is read or to be read (no load window), as none may take a slot.
    const bool reads_due = loading_ || load_window().value_or(0) > 0;
    auto ahead = pending_.begin();
    long unread_ahead = 0;
    // The assignments decided here go out in one transaction (the batcher's turn): the
    // index keeps them together on a worker up to its threads (slot_index::pick).
    std::string batch_mate;
    for (const auto& tid : loaded_) {
        if (free <= 0) {
            break;
        }
        if (reads_due) {
            // The walk stops before `tid`: it passes loaded tasks and ones in flight (as
            // many as those), and unread ones until they fill the free slots.
            const task_key key(tid);
            for (; ahead != pending_.end() && ahead->first < key; ++ahead) {
                const auto& q = ahead->second;
                if (!q.in_flight && !q.task && !q.malformed) {
                    ++unread_ahead;
                }
            }
            if (unread_ahead >= free) {
                break;
            }
        }
        auto& p = pending_.at(tid);
        if (p.in_flight || !p.task || cancels_.contains(tid) || !may_try(tid, now)) {
            continue;
        }
        // A suspect gets a probe now and then (stall_watch::may_assign), and never a task
        // that was taken back once.
        const bool retried = p.task->head.attempt > 1;
        std::function<bool(std::string_view)> skip;
        if (stalls_.any_suspect()) {
            skip = [&](std::string_view id) {
                return stalls_.suspect(id) &&
                       (retried || !stalls_.may_assign(std::string(id), now));
            };
        }
        const auto pick = index_.pick(p.task->head.type, batch_mate, skip);
        if (!pick) {
            continue;
        }
        const std::string& worker = *pick;
        auto ops = protocol::assign_ops(
            p.shard, tid, worker, p.task->data, p.task->head.attempt, epoch_, protocol::now_ms()
        );
        if (!ops) {
            // Not an object after all (it decoded: never): failed as malformed, next pass.
            p.malformed = std::make_unique<std::string>(ops.error().message);
            p.task.reset();
            continue;
        }
        batch_mate = worker;
        --free;
        ++workers_[worker].in_flight;
        reindex_used(worker);
        if (stalls_.suspect(worker)) {
            stalls_.assigned(worker, tid, now);  // its probe: one task, no more this pass
            if (const auto* w = index_.find(worker)) {
                free -= w->free_slots();
            }
        }
        ++assigns_in_flight_;
        p.in_flight = true;
        out_.emplace_back(master_do::assign{tid, worker, std::move(*ops)});
    }
}

void master_fsm::done(
    const master_do::assign& a, const master_txn_report& r, clock::time_point now
) {
    using protocol::assign_outcome;
    const auto outcome = protocol::read_assign(r.answer);
    if (auto w = workers_.find(a.worker); w != workers_.end()) {
        --w->second.in_flight;
        --assigns_in_flight_;
        if (outcome == assign_outcome::committed) {
            w->second.assigned.insert(a.tid);
        } else {
            stalls_.unassigned(a.worker, a.tid);
        }
        reindex_used(a.worker);
    }
    auto p = pending_.find(a.tid);
    if (p == pending_.end()) {
        return;
    }
    p->second.in_flight = false;
    if (outcome == assign_outcome::committed) {
        ++stats_.assigned;
        if (opts_.on_assigned && p->second.task) {
            opts_.on_assigned(p->second.task->head);
        }
        forget(p);
    } else if (outcome == assign_outcome::task_gone) {
        forget(p);  // gone meanwhile, or our own earlier commit: nothing to do
    } else if (outcome == assign_outcome::worker_dir_gone) {
        // The worker's directory is gone (deleted by someone else): not the task's fault.
        if (auto w = workers_.find(a.worker); w != workers_.end()) {
            w->second.dir_missing = true;
            reindex(a.worker);
            worker_listing_due_ = true;
        }
    } else if (stats_.deposed || outcome == assign_outcome::worker_left) {
        // Deposed, or the worker left: placed again (by whoever is master) on a next pass.
    } else {
        if (outcome == assign_outcome::foreign_below) {
            clear_foreign(path_of(a.tid, p->second));  // then it can go
        }
        // Outcome unknown (a lost connection) or an error of the task's own: try again later;
        // a task that keeps failing for itself ends in a failed result, once.
        const int failures = note_trouble(a.tid, "assigning task", r.error, now);
        if (!r.retryable && failures >= max_assign_failures &&
            outcome != assign_outcome::foreign_below) {
            reject(
                a.tid, p->second, protocol::codes::malformed_task, "cannot be assigned: " + r.error
            );
        }
    }
}

bool master_fsm::load_more(clock::time_point now) {
    if (loading_ || now < load_paused_until_) {
        return false;
    }
    const auto window = load_window();
    if (!window) {
        return false;  // nothing can be placed: tasks wait unread
    }
    long want = *window;
    bool taken = false;
    master_do::read_tasks a;
    for (auto it = pending_.begin(); it != pending_.end() && want > 0 && a.tids.size() < 1000;
         ++it) {
        auto& p = it->second;
        if (p.loading || p.in_flight) {
            continue;
        }
        auto tid = it->first.str();
        if (loaded_.contains(tid)) {
            continue;
        }
        --want;
        // A task taken here is placed before one ahead of it that is being read only while
        // free slots are left for those (assign()).
        if (!logged_.empty()) {
            if (auto data = take_logged(it->first)) {
                ++stats_.tasks_from_logs;
                take_data(p, tid, *data);
                taken = true;
                continue;
            }
        }
        p.loading = true;
        a.paths.push_back(path_of(tid, p));
        a.tids.push_back(std::move(tid));
    }
    if (!a.tids.empty()) {
        loading_ = true;
        out_.emplace_back(std::move(a));
    }
    return taken;
}

}  // namespace zkd::roles
