// SPDX-License-Identifier: MIT
#include "roles/master/master_fsm.hpp"

#include "protocol/ids.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace zkd::roles {

master_fsm::master_fsm(protocol::layout l, std::int64_t epoch, options opts, master_stats& stats)
    : l_(l),
      epoch_(epoch),
      opts_(std::move(opts)),
      stats_(stats),
      placer_(opts_.policy),
      stalls_(opts_.unstarted_bound) {}

// --- workers ------------------------------------------------------------------------------

master_fsm::workers_change master_fsm::workers_listed(const std::vector<std::string>& names) {
    const std::set<std::string> now(names.begin(), names.end());
    workers_change out;
    for (auto& [id, w] : workers_) {
        if (w.alive && !now.contains(id)) {
            w.alive = false;
            spdlog::info("master: worker {} left", id);  // the requeue counts what it held
            out.departed.push_back(id);
        }
    }
    std::erase_if(ignored_, [&](const std::string& id) { return !now.contains(id); });
    for (const auto& id : now) {
        if (!workers_.contains(id) && !ignored_.contains(id)) {
            out.to_read.push_back(id);
        }
    }
    return out;
}

bool master_fsm::worker_read(const std::string& id, std::string_view data, bool ephemeral) {
    if (workers_.contains(id)) {
        return false;  // read twice (two listings raced): the first read counts
    }
    if (!ephemeral) {
        // Only a live session stands for a worker: a persistent node would take tasks that
        // nobody runs, forever.
        spdlog::warn(
            "master: ignoring worker node /workers/{}: it is not ephemeral (written "
            "by someone else, not by a zkd worker's session)",
            id
        );
        ignored_.insert(id);
        return false;
    }
    auto info = protocol::decode_worker(data);
    if (!info) {
        spdlog::warn("master: ignoring worker node /workers/{}: {}", id, info.error().message);
        ignored_.insert(id);
        return false;
    }
    spdlog::info(
        "master: worker {} joined (capacity {}, {} type(s))", id, info->capacity.value_or(0),
        info->types.size()
    );
    if (info->draining) {
        spdlog::info("master: worker {} is draining", id);
    }
    // Not listed yet: it may hold tasks already (a dead master's, or ones clients placed
    // directly), so it gets none until its directory's first listing counts them.
    workers_[id] = worker_entry{std::move(*info), true, {}, 0, false, true};
    return true;
}

bool master_fsm::worker_updated(const std::string& id, std::string_view data) {
    const auto it = workers_.find(id);
    if (it == workers_.end() || !it->second.alive) {
        return false;
    }
    if (auto info = protocol::decode_worker(data)) {
        if (info->draining && !it->second.info.draining) {
            spdlog::info("master: worker {} is draining; it gets no new tasks", id);
        }
        it->second.info = std::move(*info);
    }
    return true;
}

std::optional<std::uint64_t> master_fsm::worker_dir_listed(
    const std::string& id, const std::vector<std::string>& names
) {
    const auto it = workers_.find(id);
    if (it == workers_.end() || !it->second.alive) {
        return std::nullopt;  // departed: T6 owns the directory now
    }
    std::set<std::string> now;
    for (const auto& name : names) {
        if (!protocol::is_cancel_marker(name)) {
            now.insert(name);
        }
    }
    // What left a live worker's directory was completed (T4): for the throughput figure.
    std::uint64_t done = 0;
    for (const auto& tid : it->second.assigned) {
        if (!now.contains(tid)) {
            done += std::max<std::size_t>(1, protocol::bundle_size(tid));  // a bundle: its tasks
        }
    }
    stats_.finished += done;
    it->second.assigned = std::move(now);
    it->second.dir_missing = false;  // listed: it is there
    it->second.touched = false;
    return done;
}

void master_fsm::worker_dir_touched(const std::string& id) {
    if (const auto it = workers_.find(id); it != workers_.end()) {
        it->second.touched = true;
    }
}

bool master_fsm::worker_dir_listing_wanted(const std::string& id) const {
    const auto it = workers_.find(id);
    if (it == workers_.end() || !it->second.alive || !cancels_.empty()) {
        return true;
    }
    const auto& w = it->second;
    if (w.dir_missing) {
        return true;  // an assignment found it gone: the listing says whether it is back
    }
    // Wanted once some pending task is not on its way to a worker: until then the count
    // stands in nobody's way.
    return !w.info.draining && pending_.size() > assigns_in_flight_;
}

bool master_fsm::worker_dir_missing(const std::string& id) {
    const auto it = workers_.find(id);
    if (it == workers_.end() || !it->second.alive) {
        return false;
    }
    if (!it->second.dir_missing) {
        spdlog::warn(
            "master: the assignment directory of worker {} was deleted; it gets no tasks "
            "until it is back",
            id
        );
    }
    it->second.dir_missing = true;
    return true;
}

void master_fsm::worker_dir_back(const std::string& id) {
    if (auto it = workers_.find(id); it != workers_.end()) {
        it->second.dir_missing = false;
    }
}

bool master_fsm::worker_alive(const std::string& id) const {
    const auto it = workers_.find(id);
    return it != workers_.end() && it->second.alive;
}

std::vector<std::string> master_fsm::live_workers() const {
    std::vector<std::string> out;
    for (const auto& [id, w] : workers_) {
        if (w.alive) {
            out.push_back(id);
        }
    }
    return out;
}

void master_fsm::departed_done(const std::string& id) {
    stalls_.forget(id);
    stats_.suspects = stalls_.suspects().size();
    if (const auto it = workers_.find(id); it != workers_.end()) {
        assigns_in_flight_ -= static_cast<std::size_t>(it->second.in_flight);
        workers_.erase(it);
    }
}

std::vector<std::string> master_fsm::assign_dirs_listed(
    const std::vector<std::string>& names, const std::set<std::string>& alive
) {
    std::vector<std::string> out;
    for (const auto& id : names) {
        if (!alive.contains(id) && !workers_.contains(id) && orphans_seen_.insert(id).second) {
            spdlog::info("master: found the directory of departed worker {}", id);
            out.push_back(id);
        }
    }
    return out;
}

// --- pending tasks and cancels -------------------------------------------------------------

void master_fsm::shard_listed(std::uint32_t shard, std::vector<std::string> names) {
    // A listing may hold tens of thousands of names and comes after every change of the
    // shard: only names that came or went touch the ordered view (hash lookups otherwise).
    // `known` holds exactly the shard's names that pending_ holds (forget() keeps it so).
    auto& known = shard_tasks_[shard];
    std::size_t still = 0;  // names of `known` listed again
    std::vector<task_key> listed;
    listed.reserve(names.size());
    std::vector<task_key> fresh;  // the names new to `known`
    for (const auto& name : names) {
        listed.emplace_back(name);
        if (known.contains(listed.back())) {
            ++still;
        } else {
            fresh.push_back(listed.back());
        }
    }
    names = {};
    if (still < known.size()) {
        // Gone without us (cancelled, or taken by another master): forget them. (Or taken by
        // us, the answer on its way: a listing during a drain. Sorted keys, not a hash set: no
        // allocation per name.)
        std::sort(listed.begin(), listed.end());
        std::vector<pending_map::iterator> gone;
        for (const auto& key : known) {
            if (std::binary_search(listed.begin(), listed.end(), key)) {
                continue;
            }
            const auto p = pending_.find(key);
            if (p != pending_.end() && !p->second.in_flight) {
                gone.push_back(p);
            }
        }
        for (const auto p : gone) {
            forget(p);
        }
    }
    if (known.size() + fresh.size() > known.bucket_count()) {
        known.reserve(known.size() + fresh.size());  // one rehash for a big listing, not many
    }
    for (auto& key : fresh) {
        add_pending(shard, std::move(key));
    }
}

master_fsm::pending_map::iterator master_fsm::add_pending(std::uint32_t shard, task_key key) {
    // New to us, or back: we took it (T2, forgotten since) and a node of the same id appeared
    // again, a new task to us.
    auto [it, added] = pending_.try_emplace(std::move(key));
    if (!added) {
        return pending_.end();  // known; or the same name in another shard: it stays where
                                // it was seen first
    }
    it->second.shard = shard;
    shard_tasks_[shard].insert(it->first);
    if (!it->first.compact()) {
        auto name = it->first.str();
        it->second.malformed = std::make_unique<std::string>("'" + name + "' is not a task id");
        loaded_.insert(std::move(name));
    }
    return it;
}

void master_fsm::shard_logged(
    std::uint32_t shard, std::vector<protocol::log_entry> entries, bool listed_since
) {
    // Only what is read next anyway is taken as read: the data of a task further back is
    // kept aside (keep_logged) while the budget lasts, and taken when its turn comes.
    long room = load_window().value_or(0);
    if (room > 0) {
        room -= static_cast<long>(pending_.size() - loaded_.size());  // unread, ahead of these
    }
    for (auto& e : entries) {
        task_key key(e.name);
        // Listed since: a name the listing lacks is gone, not new.
        auto it = listed_since ? pending_.end() : add_pending(shard, key);
        if (it == pending_.end()) {
            // Known already: listed since the log was written, or ours to read or placed.
            // Its data is as the log's transaction created it only while it is unread.
            it = pending_.find(key);
            if (it == pending_.end() || it->second.shard != shard || it->second.loading ||
                it->second.in_flight || loaded_.contains(e.name) || logged_.contains(key)) {
                continue;
            }
        }
        if (!e.data || !it->first.compact()) {
            continue;
        }
        if (room <= 0) {
            keep_logged(it->first, std::move(*e.data));
            continue;
        }
        --room;
        ++stats_.tasks_from_logs;
        // Unread, the node's children are unknown: should someone have written below it,
        // its T2 meets them and clears them first (foreign_below), as for a read task.
        take_data(it->second, e.name, *e.data);
    }
}

bool master_fsm::tasks_loaded(const std::vector<task_read>& reads) {
    bool failed = false;
    for (const auto& read : reads) {
        auto it = pending_.find(read.tid);
        if (it == pending_.end()) {
            continue;  // cancelled or gone meanwhile
        }
        auto& p = it->second;
        p.loading = false;
        if (read.st == task_read::status::gone) {
            // Gone: forgotten now (not read again and again until the shard's watch says so);
            // should it come back, the shard's next listing has it again.
            forget(it);
            continue;
        }
        if (read.st == task_read::status::error) {
            failed = true;  // try again later
            continue;
        }
        if (read.children > 0) {
            clear_foreign(path_of(read.tid, p));
        }
        take_data(p, read.tid, read.data);
    }
    return failed;
}

namespace {

// What a kept log entry is charged against the budget beyond its data: the map node, the
// key and the string.
constexpr std::size_t logged_overhead = 96;

}  // namespace

void master_fsm::keep_logged(const task_key& key, std::string data) {
    const auto cost = data.size() + logged_overhead;
    if (logged_bytes_ + cost > opts_.logged_data_budget) {
        return;  // read when its turn comes
    }
    const auto [it, added] = logged_.try_emplace(key, std::move(data));
    if (added) {
        logged_bytes_ += cost;
    }
}

std::optional<std::string> master_fsm::take_logged(const task_key& key) {
    const auto it = logged_.find(key);
    if (it == logged_.end()) {
        return std::nullopt;
    }
    auto data = std::move(it->second);
    logged_.erase(it);
    logged_bytes_ -= data.size() + logged_overhead;
    return data;
}

void master_fsm::take_data(pending_entry& p, const std::string& tid, std::string_view data) {
    if (data.size() > protocol::max_task_bytes) {
        // Written by someone else (a client refuses it): too big to assign (§4).
        p.malformed = std::make_unique<std::string>(
            "the task node holds " + std::to_string(data.size()) + " bytes, over the " +
            std::to_string(protocol::max_task_bytes) + " a task may hold"
        );
    } else if (auto spec = protocol::decode_task_node(tid, data)) {
        p.spec = std::make_unique<protocol::task_spec>(std::move(*spec));
    } else {
        p.malformed = std::make_unique<std::string>(spec.error().message);
    }
    loaded_.insert(tid);
}

void master_fsm::load_finished() {
    loading_ = false;
}

void master_fsm::cancels_listed(const std::vector<std::string>& names) {
    cancels_ = std::set<std::string>(names.begin(), names.end());
    std::erase_if(unknown_cancels_, [&](const auto& e) { return !cancels_.contains(e.first); });
}

bool master_fsm::begin_clearing(const std::string& path) {
    return clearing_.insert(path).second;
}

void master_fsm::foreign_cleared(const std::string& path) {
    clearing_.erase(path);
}

void master_fsm::clear_foreign(const std::string& path) {
    if (!begin_clearing(path)) {
        return;
    }
    master_action a;
    a.what = master_action::kind::clear_foreign;
    a.path = path;
    out_.push_back(std::move(a));
}

std::string master_fsm::pending_path(const std::string& tid) const {
    const auto it = pending_.find(tid);
    return it == pending_.end() ? l_.pending_task(tid) : path_of(tid, it->second);
}

std::string master_fsm::path_of(const std::string& tid, const pending_entry& p) const {
    return protocol::layout::pending_shard(p.shard) + "/" + tid;
}

void master_fsm::forget(pending_map::iterator p) {
    if (auto k = shard_tasks_.find(p->second.shard); k != shard_tasks_.end()) {
        k->second.erase(p->first);
    }
    if (!logged_.empty()) {
        take_logged(p->first);
    }
    if (!loaded_.empty() || !troubled_.empty()) {
        const auto tid = p->first.str();
        loaded_.erase(tid);
        troubled_.erase(tid);
    }
    pending_.erase(p);
}

int master_fsm::note_trouble(
    const std::string& tid, std::string_view what, const std::string& error, clock::time_point now
) {
    auto& t = troubled_[tid];
    ++t.failures;
    const auto wait = std::min(
        std::chrono::milliseconds(100) * (1 << std::min(t.failures, 6)),
        std::chrono::milliseconds(5000)
    );
    t.not_before = now + wait;
    if (t.failures == 1) {
        spdlog::warn(
            "master: {} {} failed: {}; trying again in {} ms", what, tid, error, wait.count()
        );
    }
    return t.failures;
}

bool master_fsm::may_try(const std::string& tid, clock::time_point now) const {
    const auto t = troubled_.find(tid);
    return t == troubled_.end() || t->second.not_before <= now;
}

std::optional<long> master_fsm::load_window() const {
    const auto live = slots();
    if (live.empty()) {
        return std::nullopt;
    }
    long want = 32;
    for (const auto& s : live) {
        want += s.free_slots();
    }
    for (const auto& tid : loaded_) {
        const auto& p = pending_.at(tid);
        if (!p.in_flight && p.spec && protocol::anyone_serves(live, p.spec->type)) {
            --want;
        }
    }
    return want;
}

std::vector<protocol::worker_slot> master_fsm::slots() const {
    std::vector<protocol::worker_slot> out;
    for (const auto& [id, w] : workers_) {
        if (w.alive && !w.info.draining && !w.dir_missing) {
            out.push_back(protocol::worker_slot{
                id, w.info.capacity.value_or(0), static_cast<int>(w.assigned.size()) + w.in_flight,
                w.info.types, w.info.threads.value_or(1)});
        }
    }
    return out;
}

// --- decisions ---------------------------------------------------------------------------------

master_step master_fsm::next(clock::time_point now) {
    handle_cancels(now);
    auto grace_ends = reject_unplaceable(now);
    assign(now);
    if (load_more()) {
        // Some came from the logs' data kept aside: decide on them now, not at the next event.
        if (const auto more = reject_unplaceable(now);
            more && (!grace_ends || *more < *grace_ends)) {
            grace_ends = more;
        }
        assign(now);
        load_more();
    }
    master_step step;
    step.actions = std::exchange(out_, {});
    step.wake_at = grace_ends;
    for (const auto& [tid, t] : troubled_) {
        if (t.not_before > now && (!step.wake_at || t.not_before < *step.wake_at)) {
            step.wake_at = t.not_before;
        }
    }
    return step;
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
        if (p != pending_.end() && clearing_.contains(path_of(tid, p->second))) {
            continue;  // cancelled once what others wrote below it is gone
        }
        master_action a;
        a.what = master_action::kind::cancel;
        a.tid = tid;
        if (!retry && p != pending_.end() && !p->second.in_flight) {
            p->second.in_flight = true;
            a.path = path_of(tid, p->second);
            a.ops = protocol::cancel_pending_ops(
                l_, p->second.shard, tid, p->second.spec ? p->second.spec->attempt : 0,
                protocol::now_ms()
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
        out_.push_back(std::move(a));
    }
}

void master_fsm::cancel_done(const master_action& a, const master_txn_report& r) {
    const auto& tid = a.tid;
    const auto outcome = protocol::read_cancel(r.answer);
    cancels_in_flight_.erase(tid);
    if (auto entry = pending_.find(tid); entry != pending_.end()) {
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
            w->second.assigned.erase(tid);  // the marker form: the assignment is gone
        }
    } else if (!r.retryable) {
        cancel_failures_.insert(tid);  // next time: only drop the request
    }
}

void master_fsm::reject(
    const std::string& tid, pending_entry& p, std::string_view code, std::string why
) {
    p.in_flight = true;
    master_action a;
    a.what = master_action::kind::reject;
    a.tid = tid;
    a.code = std::string(code);
    a.ops = protocol::reject_ops(
        l_, p.shard, tid, code, why, p.spec ? p.spec->attempt : 1, protocol::now_ms()
    );
    a.why = std::move(why);
    out_.push_back(std::move(a));
}

void master_fsm::reject_done(
    const master_action& a, const master_txn_report& r, clock::time_point now
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
    const auto live = slots();
    std::optional<clock::time_point> next_check;
    for (const auto& tid : std::vector<std::string>(loaded_.begin(), loaded_.end())) {
        auto& p = pending_.at(tid);
        if (p.in_flight || !may_try(tid, now)) {
            continue;
        }
        if (!p.spec) {
            reject(tid, p, protocol::codes::malformed_task, p.malformed ? *p.malformed : "");
            continue;
        }
        if (live.empty() || protocol::anyone_serves(live, p.spec->type)) {
            unserved_since_.erase(p.spec->type);
            continue;
        }
        const auto since = unserved_since_.try_emplace(p.spec->type, now).first->second;
        if (now - since >= opts_.unknown_type_grace) {
            reject(
                tid, p, protocol::codes::unknown_type,
                "no worker serves task type '" + p.spec->type + "'"
            );
        } else if (!next_check || since + opts_.unknown_type_grace < *next_check) {
            next_check = since + opts_.unknown_type_grace;
        }
    }
    return next_check;
}

void master_fsm::assign(clock::time_point now) {
    auto live = slots();
    // A worker whose directory changed since it was listed may hold tasks clients placed
    // there directly: nothing goes there until the listing says how many (reading and
    // rejecting go on meanwhile).
    // A suspect (stall_watch) gets nothing, but for a probe now and then.
    std::erase_if(live, [this, now](const protocol::worker_slot& s) {
        return workers_.at(s.id).touched || !stalls_.may_assign(s.id, now);
    });
    int free = 0;
    for (const auto& s : live) {
        free += s.free_slots();
    }
    // The queue's order (§3) holds for tasks whose data is not here yet: a task whose data is
    // here (a log brought it) takes no slot that an unread task ahead of it, read now or
    // being read, would want (else, with slots short, the later task holds the slot for its
    // whole run). Tasks behind keep one free slot per unread task ahead. Unread tasks are
    // not counted while none is read or to be read (no load window), as none may take a slot.
    const bool reads_due = loading_ || load_window().value_or(0) > 0;
    auto ahead = pending_.begin();
    int unread_ahead = 0;
    // The assignments decided here go out in one transaction (the batcher's turn): the
    // placer keeps them together on a worker up to its threads (placer::pick).
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
                if (!q.in_flight && !q.spec && !q.malformed) {
                    ++unread_ahead;
                }
            }
            if (unread_ahead >= free) {
                break;
            }
        }
        auto& p = pending_.at(tid);
        if (p.in_flight || !p.spec || cancels_.contains(tid) || !may_try(tid, now)) {
            continue;
        }
        auto pick = placer_.pick(live, p.spec->type, batch_mate);
        if (pick && p.spec->attempt > 1 && stalls_.suspect(live[*pick].id)) {
            // A task that was taken back once is no suspect's probe: pick again without it.
            auto& probed = live[*pick];
            const int capacity = std::exchange(probed.capacity, probed.used);
            pick = placer_.pick(live, p.spec->type, batch_mate);
            probed.capacity = capacity;
        }
        if (!pick) {
            continue;
        }
        auto& slot = live[*pick];
        batch_mate = slot.id;
        ++slot.used;
        --free;
        if (stalls_.suspect(slot.id)) {
            stalls_.assigned(slot.id, tid, now);  // its probe: one task, no more this pass
            free -= slot.free_slots();
            slot.capacity = slot.used;
        }
        ++workers_[slot.id].in_flight;
        ++assigns_in_flight_;
        p.in_flight = true;
        master_action a;
        a.what = master_action::kind::assign;
        a.tid = tid;
        a.worker = slot.id;
        a.ops = protocol::assign_ops(p.shard, tid, slot.id, *p.spec, epoch_, protocol::now_ms());
        out_.push_back(std::move(a));
    }
}

void master_fsm::assign_done(
    const master_action& a, const master_txn_report& r, clock::time_point now
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
    }
    auto p = pending_.find(a.tid);
    if (p == pending_.end()) {
        return;
    }
    p->second.in_flight = false;
    if (outcome == assign_outcome::committed) {
        ++stats_.assigned;
        if (opts_.on_assigned && p->second.spec) {
            opts_.on_assigned(*p->second.spec);
        }
        forget(p);
    } else if (outcome == assign_outcome::task_gone) {
        forget(p);  // gone meanwhile, or our own earlier commit: nothing to do
    } else if (outcome == assign_outcome::worker_dir_gone) {
        // The worker's directory is gone (deleted by someone else): not the task's fault.
        if (auto w = workers_.find(a.worker); w != workers_.end()) {
            w->second.dir_missing = true;
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

void master_fsm::done(const master_action& a, const master_txn_report& r, clock::time_point now) {
    switch (a.what) {
    case master_action::kind::assign:
        assign_done(a, r, now);
        break;
    case master_action::kind::reject:
        reject_done(a, r, now);
        break;
    case master_action::kind::cancel:
        cancel_done(a, r);
        break;
    case master_action::kind::load:
    case master_action::kind::clear_foreign:
        break;
    }
}

bool master_fsm::load_more() {
    if (loading_) {
        return false;
    }
    const auto window = load_window();
    if (!window) {
        return false;  // nothing can be placed: tasks wait unread
    }
    long want = *window;
    bool taken = false;
    master_action a;
    a.what = master_action::kind::load;
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
        out_.push_back(std::move(a));
    }
    return taken;
}

result_sweep sweep_window(
    const std::vector<std::string>& sorted, const std::string& after, std::size_t most
) {
    auto from = std::upper_bound(sorted.begin(), sorted.end(), after);
    if (from == sorted.end()) {
        from = sorted.begin();
    }
    const auto n = std::min<std::size_t>(most, static_cast<std::size_t>(sorted.end() - from));
    result_sweep out;
    out.dirs.assign(from, from + static_cast<std::ptrdiff_t>(n));
    if (from + static_cast<std::ptrdiff_t>(n) != sorted.end()) {
        out.next_after = out.dirs.back();
    }
    return out;
}

}  // namespace zkd::roles
