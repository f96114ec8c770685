// SPDX-License-Identifier: MIT
#pragma once

// The worker's decisions (docs/protocol.md §7 "Worker", §6 T4 and T9), with no I/O: what its
// assignment directory lists goes in as events, and the view says what to do — which tasks to
// run, which to stop for a cancel marker, which markers are litter, when to make the
// directory again, when a drain is over — and, per task, how to publish its result (T4) and
// what to do after each answer, a lost one included. worker.cpp carries the actions out
// (handlers, timers, ZooKeeper); tests/unit/roles/worker/worker_fsm_test.cpp drives the view alone.

#include "protocol/change_log.hpp"
#include "protocol/layout.hpp"
#include "protocol/task.hpp"
#include "protocol/worker_txn.hpp"
#include "roles/worker/detail/publish_fsm.hpp"
#include "roles/worker/worker_stats.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace zkd::roles {

/// One thing the worker view wants done.
struct worker_action {
    enum class kind {
        run,            ///< run `tid` (its assignment's data: `data`, else read it), publish;
                        ///< then task_ended()
        stop,           ///< stop the handlers of `tid` (its cancel marker appeared); with
                        ///< `entry`, only that task of the bundle `tid` (its marker
                        ///< `<tid>.<entry>.cancel` appeared, §6 T7 "One task of a bundle")
        remove_marker,  ///< run `ops` (delete markers of tasks no longer here); no answer;
                        ///< a delete followed by a create goes with it as one multi (a
                        ///< task's own marker whose request is made again,
                        ///< protocol::return_entry_cancel_ops), its delete alone should the
                        ///< create find node_exists
        remake_dir,     ///< pause, then run `ops` (create our assignment directory); list again
        mark_draining,  ///< run `ops` (T9: our /workers node says draining); no answer
    };
    kind what = kind::run;
    std::string tid;
    std::vector<protocol::txn_op> ops;
    std::optional<std::string> data;   ///< run: the assignment's data, when the log carried it
    std::optional<std::size_t> entry;  ///< stop: the task of the bundle to stop (else all)
};

class worker_fsm {
public:
    /// `stats` must outlive the view.
    worker_fsm(protocol::layout l, protocol::member_info me, worker_stats& stats);

    /// This worker's node as it joined (/workers/<id>): what T9 writes again, draining.
    void joined(protocol::member_info me) { me_ = std::move(me); }

    /// The assignment directory lists `names` (assignments and <tid>.cancel markers). Starts
    /// the tasks not in hand; a marker stops its task once; a marker whose task is neither
    /// in hand nor assigned is litter (one task of a bundle's: deleted with its request made
    /// again, one multi, since its bundle may have left unrun: taken back, or retried). An
    /// assignment missing from the listing while its task runs changes nothing here: the publish
    /// finds out (see publish_fsm).
    std::vector<worker_action> listed(const std::vector<std::string>& names);
    /// listed(names), for a listing taken when the directory's stat was `s`: reads of its
    /// change log (log_read) follow on from there.
    std::vector<worker_action> listed(const std::vector<std::string>& names, protocol::dir_stat s);
    /// The directory's data was read at `s` (docs/protocol.md §6 "Change logs"). When its
    /// change log accounts for every change since the worker last looked, the actions it
    /// calls for, as listed() would decide them for the children it names (a run carries
    /// the assignment's data when the log did); nullopt when the directory must be listed
    /// instead (a missed version, garbage, a change nobody logged): then listed(names, s).
    std::optional<std::vector<worker_action>> log_read(protocol::dir_stat s, std::string_view data);
    /// The directory is gone: the next read lists it (once it is made again).
    void dir_gone() noexcept { follower_.forget(); }
    /// The assignment directory is gone (someone deleted it while empty): make it again, or
    /// the master can assign nothing while this worker stays a member.
    [[nodiscard]] worker_action dir_missing() const;

    /// Publishing `tid`'s encoded result (T4) begins (with its marker's delete if one was
    /// seen): its first step. Then each answer goes to the matching call below, until a step
    /// says done; then task_ended(). Nothing is published once stopping().
    /// `target`: as publish_fsm's (a retry's delayed node; empty: the result).
    publish_fsm::step publish(const std::string& tid, std::string result, std::string target = {});
    /// True when a cancel marker was seen for `tid` (a cancelled task is never retried).
    [[nodiscard]] bool marker_seen(const std::string& tid) const;
    /// The tasks of the bundle `tid` whose own markers (`<tid>.<k>.cancel`) were seen.
    [[nodiscard]] std::set<std::size_t> entries_cancelled(const std::string& tid) const;
    publish_fsm::step publish_answered(const std::string& tid, const protocol::txn_answer& a);
    publish_fsm::step publish_cleared(const std::string& tid, bool ok);
    publish_fsm::step publish_reconnected(const std::string& tid, bool ok);
    /// `tid`'s turn is over, its result published as `how` says, or not at all (nullopt: its
    /// assignment was gone before it was read, or the worker was stopping). It is no longer
    /// in hand. Yields a remove_marker when its cancel marker came while the try that
    /// published was out: that try did not delete it, and no listing would find it now that
    /// the worker follows its directory's change log (§6); and, once a bundle's result or
    /// retry is written, for the markers of its tasks (T4 does not delete those): a retry
    /// written without a task whose marker came after its T4 was built makes that task's
    /// request again in the multi that deletes the marker (the retry runs it otherwise).
    std::optional<worker_action> task_ended(const std::string& tid, std::optional<publish_end> how);

    /// The drain was requested (T9): mark our node; from now on drained() says when the
    /// tasks in hand are over.
    worker_action drain();
    [[nodiscard]] bool drained() const noexcept { return draining_ && tasks_.empty(); }
    /// The worker stops (session gone, drained, or cancelled): the tasks whose handlers to
    /// stop; their results are not published.
    std::vector<std::string> stop();

    [[nodiscard]] bool stopping() const noexcept { return stopping_; }
    [[nodiscard]] bool draining() const noexcept { return draining_; }
    /// Its cancel marker was seen (its handlers were stopped for it).
    [[nodiscard]] bool cancelled(const std::string& tid) const;
    [[nodiscard]] bool in_hand(const std::string& tid) const { return tasks_.contains(tid); }
    [[nodiscard]] std::size_t in_hand() const noexcept { return tasks_.size(); }
    [[nodiscard]] const protocol::member_info& me() const noexcept { return me_; }

private:
    struct task {
        bool marker = false;              // its <tid>.cancel marker was seen
        std::set<std::size_t> entries;    // a bundle's: its tasks' <tid>.<k>.cancel seen
        std::set<std::size_t> published;  // of those, the ones seen when its T4 was built
        bool retry = false;               // its T4 writes a retry (a delayed node)
        std::optional<publish_fsm> plan;  // once publishing
    };
    publish_fsm* plan_of(const std::string& tid);
    /// listed() and log_read(): `data_of(tid)` gives the data a new task's run carries.
    template <class DataOf>
    std::vector<worker_action> take(const std::vector<std::string>& names, DataOf data_of);

    protocol::layout l_;
    protocol::member_info me_;
    worker_stats& stats_;
    std::map<std::string, task> tasks_;
    protocol::log_follower follower_;  // our directory, through its change log
    bool draining_ = false;
    bool stopping_ = false;
};

}  // namespace zkd::roles
