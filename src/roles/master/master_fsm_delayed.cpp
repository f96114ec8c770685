// SPDX-License-Identifier: MIT
// Delayed tasks (docs/protocol.md §6 "Delayed tasks and retries", T10): the master knows every
// delayed task's name and due time from its shards' listings and change logs, waits for the
// earliest with one wake-up, reads the tasks whose time has come, and moves them to pending,
// the same bytes, fenced by the epoch. A cancel request for a delayed task deletes it with a
// cancelled result (T7).
#include "protocol/delay.hpp"
#include "protocol/ids.hpp"
#include "roles/master/detail/master_fsm.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace zkd::roles {

namespace {

/// Wait this long before reading or releasing again a delayed task whose read or release
/// failed for a reason of its own.
constexpr std::int64_t retry_after_ms = 1000;

}  // namespace

std::int64_t master_fsm::wall_now() const {
    return opts_.wall_ms ? opts_.wall_ms() : protocol::now_ms();
}

void master_fsm::handle(const master_saw::delayed_listed& e, clock::time_point /*now*/) {
    if (e.shard >= delayed_listed_.size()) {
        return;
    }
    delayed_.listed(e.shard, e.names);
    if (!delayed_listed_[e.shard]) {
        delayed_listed_[e.shard] = true;
        --delayed_unlisted_;
        if (delayed_unlisted_ == 0) {
            spdlog::info("master: {} delayed task(s) wait", delayed_.size());
        }
    }
}

void master_fsm::handle(const master_saw::delayed_logged& e, clock::time_point /*now*/) {
    if (e.shard >= delayed_listed_.size()) {
        return;
    }
    for (const auto& entry : e.entries) {
        delayed_.logged(e.shard, entry.name, entry.due_ms);
    }
}

std::optional<master_fsm::clock::time_point> master_fsm::release_due(clock::time_point now) {
    // The earliest due time is known only once every delayed shard was listed.
    if (delayed_unlisted_ != 0) {
        return std::nullopt;
    }
    const auto wall = wall_now();
    if (delayed_reads_out_ < opts_.delayed_batch) {
        auto due = delayed_.take_due(wall, opts_.delayed_batch - delayed_reads_out_);
        if (!due.empty()) {
            master_do::read_delayed read;
            for (auto& t : due) {
                read.paths.push_back(l_.delayed_task(t.name));
                read.tids.push_back(std::move(t.name));
            }
            delayed_reads_out_ += read.tids.size();
            out_.emplace_back(std::move(read));
        }
    }
    const auto next = delayed_.next_due();
    if (!next || (*next <= wall && delayed_reads_out_ >= opts_.delayed_batch)) {
        return std::nullopt;  // none waits, or the reads out bring the next step
    }
    // A wall-clock due time as a steady one: a clock stepped meanwhile is met at the next
    // wake-up, which computes it afresh. At least 1 ms on: never a busy loop.
    const auto in = std::max<std::int64_t>(1, *next - wall);
    return now + std::chrono::milliseconds(in);
}

void master_fsm::handle(const master_saw::delayed_read& e, clock::time_point /*now*/) {
    const auto wall = wall_now();
    for (const auto& r : e.reads) {
        const bool for_cancel = delayed_cancel_reads_.erase(r.tid) > 0;
        if (!for_cancel) {
            delayed_reads_out_ -= std::min<std::size_t>(delayed_reads_out_, 1);
        }
        if (!delayed_.contains(r.tid)) {
            continue;
        }
        if (r.st == task_read::status::gone) {
            delayed_.forget(r.tid);  // cancelled, or deleted by someone
            continue;
        }
        if (r.st == task_read::status::error) {
            delayed_.put_back(r.tid, wall + retry_after_ms);
            if (for_cancel) {
                delayed_cancel_retry_[r.tid] = wall + retry_after_ms;  // decided again then
            }
            continue;
        }
        if (for_cancel && r.children > 0) {
            // Someone wrote below it: cleared first, then the cancel is decided again.
            clear_foreign(l_.delayed_task(r.tid));
            delayed_.put_back(r.tid, wall + retry_after_ms);
            delayed_cancel_retry_[r.tid] = wall + retry_after_ms;
            continue;
        }
        if (for_cancel && cancels_.contains(r.tid)) {
            cancel_read_delayed(r);
            continue;
        }
        // Read for a cancel whose request went meanwhile: as read for its release.
        // The data says when; a node whose data says nothing (garbage included) is due now,
        // and pending rejects what is no task (§8).
        if (const auto due = protocol::read_due_ms(r.data); due && *due > wall) {
            delayed_.set_due(r.tid, *due);
            continue;
        }
        if (r.children > 0) {
            clear_foreign(l_.delayed_task(r.tid));
            delayed_.put_back(r.tid, wall + retry_after_ms);
            continue;
        }
        master_do::release a;
        a.tid = r.tid;
        a.shard = delayed_.shard_of(r.tid).value_or(0);
        a.ops = protocol::release_ops(l_, r.tid, r.data);
        out_.emplace_back(std::move(a));
    }
}

void master_fsm::done(
    const master_do::release& a, const master_txn_report& r, clock::time_point /*now*/
) {
    switch (protocol::read_release(r.answer)) {
    case protocol::release_outcome::committed:
        if (!a.drop_only) {
            ++stats_.released;
        }
        delayed_.forget(a.tid);
        return;
    case protocol::release_outcome::task_gone:
        delayed_.forget(a.tid);  // cancelled meanwhile
        return;
    case protocol::release_outcome::foreign_below:
        clear_foreign(l_.delayed_task(a.tid));
        break;
    case protocol::release_outcome::pending_exists: {
        spdlog::warn(
            "master: delayed task {} is pending already: its delayed node is deleted", a.tid
        );
        master_do::release drop;
        drop.tid = a.tid;
        drop.shard = a.shard;
        drop.drop_only = true;
        drop.ops = protocol::drop_delayed_ops(l_, a.tid);
        out_.emplace_back(std::move(drop));
        return;
    }
    case protocol::release_outcome::failed:
        if (!r.retryable) {
            spdlog::warn("master: cannot release delayed task {}: {}", a.tid, r.error);
        }
        break;
    }
    delayed_.put_back(a.tid, wall_now() + retry_after_ms);
}

bool master_fsm::cancel_delayed(const std::string& tid) {
    if (!delayed_.contains(tid)) {
        delayed_cancel_retry_.erase(tid);
        return false;
    }
    if (delayed_.in_flight(tid)) {
        return true;  // being read or released: decided once that is answered
    }
    // Its last read for this cancel failed: tried again a second later (put back in the
    // queue then, which wakes a decision), never in a loop of reads.
    if (const auto it = delayed_cancel_retry_.find(tid); it != delayed_cancel_retry_.end()) {
        if (it->second > wall_now()) {
            return true;
        }
        delayed_cancel_retry_.erase(it);
    }
    // Read first: the cancelled result carries what the node says of earlier tries (a
    // retry's `try` and `errors`, a bundle's tasks that a try finished: §6 T7 on a delayed
    // task), then cancel_read_delayed().
    delayed_.hold(tid);
    delayed_cancel_reads_.insert(tid);
    unknown_cancels_.erase(tid);
    out_.emplace_back(master_do::read_delayed{{tid}, {l_.delayed_task(tid)}});
    return true;
}

void master_fsm::cancel_read_delayed(const task_read& r) {
    const auto node = protocol::decode_task_node(r.data);
    master_do::cancel a;
    a.tid = r.tid;
    a.path = l_.delayed_task(r.tid);
    a.ops = protocol::cancel_delayed_ops(
        l_, r.tid, node ? node->assigned.attempt : 0, protocol::now_ms(), r.data
    );
    cancels_in_flight_.insert(r.tid);
    out_.emplace_back(std::move(a));
}

}  // namespace zkd::roles
