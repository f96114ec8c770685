// SPDX-License-Identifier: MIT
// master_fsm (master_fsm.hpp): the one door, on(), and what each event changes; the decisions
// a decide event runs are in master_fsm_decide.cpp.
#include "roles/master/detail/master_fsm.hpp"

#include "protocol/ids.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <type_traits>
#include <utility>

namespace zkd::roles {

master_fsm::master_fsm(protocol::layout l, std::int64_t epoch, options opts, master_stats& stats)
    : l_(l),
      epoch_(epoch),
      opts_(std::move(opts)),
      stats_(stats),
      index_(opts_.policy),
      stalls_(opts_.unstarted_bound),
      shard_listed_(l_.pending_shards, false),
      shards_unlisted_(l_.pending_shards),
      shard_reading_(l_.pending_shards, false),
      shard_reads_(l_.pending_shards, 0),
      delayed_listed_(l_.pending_shards, false),
      delayed_unlisted_(l_.pending_shards),
      master_node_(opts_.master_node) {}

master_step master_fsm::on(const master_event& e, clock::time_point now) {
    if (!started_) {
        started_ = now;
    }
    master_step step;
    std::visit(
        [&](const auto& ev) {
            if constexpr (std::is_same_v<std::decay_t<decltype(ev)>, master_saw::decide>) {
                // The queue is ordered across shards (§3): nothing is decided before every
                // shard was listed once, nor while reads of shards that were out are not in.
                if (shards_unlisted_ == 0 && shard_reads_in()) {
                    step.wake_at = decide(now);
                    step.decided = true;
                }
            } else {
                handle(ev, now);
            }
        },
        e
    );
    step.actions = std::exchange(out_, {});
    return step;
}

// --- workers ------------------------------------------------------------------------------

void master_fsm::handle(const master_saw::workers_listed& e, clock::time_point /*now*/) {
    const std::set<std::string> listed(e.names.begin(), e.names.end());
    for (auto& [id, w] : workers_) {
        if (w.alive && !listed.contains(id)) {
            w.alive = false;
            index_.erase(id);
            worker_listing_due_ = true;
            spdlog::info("master: worker {} left", id);  // the requeue counts what it held
            requeue(id);
        }
    }
    std::erase_if(ignored_, [&](const std::string& id) { return !listed.contains(id); });
    master_do::read_workers read;
    for (const auto& id : listed) {
        if (!workers_.contains(id) && !ignored_.contains(id)) {
            read.ids.push_back(id);
        }
    }
    if (!read.ids.empty()) {
        ++worker_reads_out_;
        out_.emplace_back(std::move(read));
    }
    workers_listed_ = true;
    publish_features();
}

void master_fsm::handle(const master_saw::workers_read& e, clock::time_point /*now*/) {
    for (const auto& n : e.nodes) {
        if (n.data && worker_read(n.id, *n.data, n.ephemeral)) {
            out_.emplace_back(master_do::follow_worker{n.id});
        }
    }
    worker_reads_out_ -= worker_reads_out_ > 0 ? 1 : 0;
    publish_features();
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
    reindex(id);
    return true;
}

void master_fsm::handle(const master_saw::worker_changed& e, clock::time_point /*now*/) {
    const auto& id = e.id;
    const auto it = workers_.find(id);
    if (it == workers_.end() || !it->second.alive) {
        return;
    }
    if (auto info = protocol::decode_worker(e.data)) {
        if (info->draining && !it->second.info.draining) {
            spdlog::info("master: worker {} is draining; it gets no new tasks", id);
        }
        if (info->unhealthy != it->second.info.unhealthy) {
            std::string types;
            for (const auto& t : info->unhealthy) {
                types += (types.empty() ? "" : ", ") + t;
            }
            spdlog::info(
                "master: worker {} says unhealthy: {}", id, types.empty() ? "none" : types
            );
        }
        it->second.info = std::move(*info);
        reindex(id);
        publish_features();
    }
}

void master_fsm::handle(const master_saw::dir_listed& e, clock::time_point now) {
    const auto it = workers_.find(e.worker);
    if (it == workers_.end() || !it->second.alive) {
        return;  // departed: T6 owns the directory now
    }
    std::set<std::string> listed;
    for (const auto& name : e.names) {
        if (!protocol::is_cancel_marker(name)) {
            listed.insert(name);
        }
    }
    // What left a live worker's directory was completed (T4): for the throughput figure.
    std::uint64_t done = 0;
    for (const auto& tid : it->second.assigned) {
        if (!listed.contains(tid)) {
            done += std::max<std::size_t>(1, protocol::bundle_size(tid));  // a bundle: its tasks
        }
    }
    stats_.finished += done;
    if (done > 0) {
        finishes_.emplace_back(now, done);
    }
    it->second.assigned = std::move(listed);
    it->second.dir_missing = false;  // listed: it is there
    it->second.touched = false;
    reindex(e.worker);
}

void master_fsm::handle(const master_saw::dir_touched& e, clock::time_point /*now*/) {
    if (const auto it = workers_.find(e.worker); it != workers_.end()) {
        it->second.touched = true;
        reindex(e.worker);
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

bool master_fsm::dir_listings_may_be_wanted() {
    const bool one_worker = std::exchange(worker_listing_due_, false);
    return one_worker || !cancels_.empty() || pending_.size() > assigns_in_flight_;
}

void master_fsm::handle(const master_saw::dir_gone& e, clock::time_point /*now*/) {
    const auto& id = e.worker;
    const auto it = workers_.find(id);
    if (it == workers_.end() || !it->second.alive) {
        return;
    }
    if (!it->second.dir_missing) {
        spdlog::warn(
            "master: the assignment directory of worker {} was deleted; it gets no tasks "
            "until it is back",
            id
        );
    }
    it->second.dir_missing = true;
    reindex(id);
    worker_listing_due_ = true;
}

void master_fsm::handle(const master_saw::dir_back& e, clock::time_point /*now*/) {
    if (auto it = workers_.find(e.worker); it != workers_.end()) {
        it->second.dir_missing = false;
        reindex(e.worker);
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

void master_fsm::handle(const master_saw::assign_dirs_listed& e, clock::time_point /*now*/) {
    for (const auto& id : e.names) {
        if (!e.alive.contains(id) && !workers_.contains(id) && orphans_seen_.insert(id).second) {
            spdlog::info("master: found the directory of departed worker {}", id);
            requeue(id);
        }
    }
}

// --- pending tasks and cancels -------------------------------------------------------------

void master_fsm::handle(const master_saw::shard_listed& e, clock::time_point now) {
    const auto shard = e.shard;
    const auto& names = e.names;
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
    shard_seen(shard, now);
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

void master_fsm::handle(const master_saw::shard_logged& e, clock::time_point /*now*/) {
    const auto shard = e.shard;
    const bool listed_since = e.listed_since;
    // Only what is read next anyway is taken as read: the data of a task further back is
    // kept aside (keep_logged) while the budget lasts, and taken when its turn comes.
    long room = load_window().value_or(0);
    if (room > 0) {
        room -= static_cast<long>(pending_.size() - loaded_.size());  // unread, ahead of these
    }
    for (const auto& entry : e.entries) {
        task_key key(entry.name);
        // Listed since: a name the listing lacks is gone, not new.
        auto it = listed_since ? pending_.end() : add_pending(shard, key);
        if (it == pending_.end()) {
            // Known already: listed since the log was written, or ours to read or placed.
            // Its data is as the log's transaction created it only while it is unread.
            it = pending_.find(key);
            if (it == pending_.end() || it->second.shard != shard || it->second.loading ||
                it->second.in_flight || loaded_.contains(entry.name) || logged_.contains(key)) {
                continue;
            }
        }
        if (!entry.data || !it->first.compact()) {
            continue;
        }
        if (room <= 0) {
            keep_logged(it->first, *entry.data);
            continue;
        }
        --room;
        ++stats_.tasks_from_logs;
        // Unread, the node's children are unknown: should someone have written below it,
        // its T2 meets them and clears them first (foreign_below), as for a read task.
        take_data(it->second, entry.name, *entry.data);
    }
}

void master_fsm::handle(const master_saw::tasks_read& e, clock::time_point now) {
    bool failed = false;
    for (const auto& read : e.reads) {
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
    loading_ = false;
    if (failed) {
        // Not while disconnected in a tight loop: the next batch waits a moment.
        load_paused_until_ = now + std::chrono::milliseconds(100);
    }
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
    } else if (auto node = protocol::decode_task_node(tid, data)) {
        p.task = std::make_unique<loaded_task>(loaded_task{std::string(data), head_of(*node)});
    } else {
        p.malformed = std::make_unique<std::string>(node.error().message);
    }
    loaded_.insert(tid);
}

void master_fsm::handle(const master_saw::cancels_listed& e, clock::time_point /*now*/) {
    cancels_ = std::set<std::string>(e.names.begin(), e.names.end());
    std::erase_if(unknown_cancels_, [&](const auto& u) { return !cancels_.contains(u.first); });
}

void master_fsm::handle(const master_saw::foreign_found& e, clock::time_point /*now*/) {
    clear_foreign(e.path);
}

void master_fsm::handle(const master_saw::cleared& e, clock::time_point /*now*/) {
    clearing_.erase(e.path);
}

void master_fsm::handle(const master_saw::answered& e, clock::time_point now) {
    std::visit([&](const auto& txn) { done(txn, e.report, now); }, e.txn);
}

void master_fsm::clear_foreign(const std::string& path) {
    if (clearing_.insert(path).second) {
        out_.emplace_back(master_do::clear_below{path});
    }
}

// --- shard readiness -------------------------------------------------------------------------

void master_fsm::handle(const master_saw::shard_reading& e, clock::time_point /*now*/) {
    if (e.shard < shard_reading_.size()) {
        shard_reading_[e.shard] = true;
    }
}

void master_fsm::handle(const master_saw::shard_read_done& e, clock::time_point /*now*/) {
    if (e.shard < shard_reading_.size()) {
        shard_reading_[e.shard] = false;
        ++shard_reads_[e.shard];
    }
}

void master_fsm::handle(const master_saw::shard_gone& e, clock::time_point now) {
    shard_seen(e.shard, now);  // the shard is gone, or we stop: nothing to wait for
}

/// Until every pending shard has been listed once, the head of what was listed may not be
/// the head of the queue, so a new master decides nothing before (a backlog of 1,000,000 is
/// listed in a few seconds).
void master_fsm::shard_seen(std::uint32_t shard, clock::time_point now) {
    if (shard >= shard_listed_.size() || shard_listed_[shard]) {
        return;
    }
    shard_listed_[shard] = true;
    if (--shards_unlisted_ == 0) {
        spdlog::info(
            "master: {} pending shards listed, {} pending task(s), in {} ms", l_.pending_shards,
            pending_.size(),
            std::chrono::duration_cast<std::chrono::milliseconds>(now - started_.value_or(now))
                .count()
        );
    }
}

/// True once every read of a pending shard that was out when a decision was first due is
/// in, and then every read out at that moment. One transaction may create tasks in several
/// shards (a T1 of many tasks): their data watches fire before any later answer comes, so
/// once a read sent for one of them is answered, the reads for the others are out (the
/// decision may have been due between two of those watches); waiting for them too sees the
/// transaction whole and keeps the queue's order across its shards (§3). The wait is
/// extended once: reads sent later do not extend it again.
bool master_fsm::shard_reads_in() {
    if (!awaited_reads_) {
        awaited_reads_ = reads_out();
        reads_extended_ = false;
    }
    for (const auto& [shard, done] : *awaited_reads_) {
        if (shard_reads_[shard] == done) {
            return false;
        }
    }
    if (!reads_extended_ && !awaited_reads_->empty()) {
        reads_extended_ = true;
        awaited_reads_ = reads_out();
        if (!awaited_reads_->empty()) {
            return false;
        }
    }
    awaited_reads_.reset();
    return true;
}

/// The pending shards being read now, each with its count of reads answered.
std::vector<std::pair<std::uint32_t, std::uint64_t>> master_fsm::reads_out() const {
    std::vector<std::pair<std::uint32_t, std::uint64_t>> out;
    for (std::uint32_t shard = 0; shard < l_.pending_shards; ++shard) {
        if (shard_reading_[shard]) {
            out.emplace_back(shard, shard_reads_[shard]);
        }
    }
    return out;
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
    if (index_.open_workers() == 0) {
        return std::nullopt;
    }
    long want = 32 + index_.free_open();
    for (const auto& tid : loaded_) {
        const auto& p = pending_.at(tid);
        if (!p.in_flight && p.task && index_.anyone_serves(p.task->head.type)) {
            --want;
        }
    }
    return want;
}

void master_fsm::reindex(const std::string& id) {
    const auto it = workers_.find(id);
    if (it == workers_.end()) {
        index_.erase(id);
        return;
    }
    const auto& w = it->second;
    slot_index::worker s;
    s.open = w.alive && !w.info.draining && !w.dir_missing;
    s.assignable = s.open && !w.touched;
    s.capacity = w.info.capacity.value_or(0);
    s.used = static_cast<int>(w.assigned.size()) + w.in_flight;
    s.threads = w.info.threads.value_or(1);
    s.types = w.info.types;
    s.unhealthy = w.info.unhealthy;
    index_.put(id, s);
}

void master_fsm::reindex_used(const std::string& id) {
    if (const auto it = workers_.find(id); it != workers_.end()) {
        index_.set_used(id, static_cast<int>(it->second.assigned.size()) + it->second.in_flight);
    }
}

}  // namespace zkd::roles
