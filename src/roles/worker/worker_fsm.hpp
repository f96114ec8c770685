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

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zkd::roles {

/// What a worker has done, for logs and tests.
struct worker_stats {
    std::uint64_t started = 0;
    std::uint64_t published = 0;   ///< results written (T4 committed)
    std::uint64_t discarded = 0;   ///< results dropped: the assignment was gone (requeued)
    std::uint64_t cancelled = 0;   ///< handlers stopped by a cancel marker
    std::uint64_t listings = 0;    ///< listings of the assignment directory
    std::uint64_t logs_read = 0;   ///< its change log read and applied instead (§6)
    std::uint64_t task_reads = 0;  ///< assignments read one by one (no data from a log)
};

/// How a publish (T4) ended.
enum class publish_end {
    published,              ///< committed
    published_by_lost_try,  ///< a try whose answer was lost applied: not sent again
    result_existed,         ///< without its assignment, a result was there already
    discarded,              ///< the master took the task back (our /workers node is gone)
    given_up,               ///< an error that does not go away by itself, or ten tries
};

/// T4 for one task, try by try: which ops to send, and after each answer what next.
/// The assignment's delete is the fence: only while it exists may the worker publish. Should
/// it be gone while our /workers node stands (someone else deleted it: the master takes
/// assignments back only from departed workers), the result goes with a check of /workers
/// instead, so the task is not lost while its client waits. But once a try went unanswered,
/// a missing assignment means that try applied (its result may have been consumed since):
/// nothing is sent again.
class publish_plan {
public:
    struct step {
        enum class kind {
            send,           ///< run `ops`, then answered()
            clear_foreign,  ///< delete what others wrote below `path`, then cleared()
            reconnect,      ///< wait until connected again after the error, then reconnected()
            done,           ///< over: `end` says how
        };
        kind what = kind::done;
        std::vector<protocol::txn_op> ops;
        std::string path;
        publish_end end = publish_end::given_up;
    };

    static constexpr int max_tries = 10;

    /// `marker`: a cancel marker exists for the task (its delete goes with the first try).
    publish_plan(
        protocol::layout l, std::string worker, std::string tid, std::string result, bool marker
    );

    step start();
    /// The answer to the last `send` (no per-op results: the outcome is unknown).
    step answered(const protocol::txn_answer& a);
    /// The `clear_foreign` is over: `ok` false means it failed (then reconnect).
    step cleared(bool ok);
    /// After `reconnect`: `ok` when connected again and retrying makes sense.
    step reconnected(bool ok);

    /// A cancel marker appeared meanwhile: later tries delete it too.
    void marker_seen() noexcept {
        form_.with_marker = true;
        marker_ = true;
    }
    /// Once done: a cancel marker was seen that the try which ended the publish did not
    /// delete (it was sent before the marker came, or checked /workers instead), and that was
    /// not found gone. Nobody else deletes it while this worker lives: the worker must.
    [[nodiscard]] bool marker_left() const noexcept {
        return marker_ && !marker_gone_ && !(sent_.fenced_by_assignment && sent_.with_marker);
    }

    /// The form of the next try.
    [[nodiscard]] const protocol::publish_form& form() const noexcept { return form_; }
    /// How many children of the worker's directory the try in flight deletes, if it applies
    /// (the assignment and its marker; none when fenced by /workers instead).
    [[nodiscard]] std::size_t removes_sent() const noexcept {
        return sent_.fenced_by_assignment ? (sent_.with_marker ? 2 : 1) : 0;
    }
    [[nodiscard]] bool maybe_applied() const noexcept { return maybe_applied_; }

private:
    step send();
    static step done(publish_end e);

    protocol::layout l_;
    std::string worker_;
    std::string tid_;
    std::string result_;
    protocol::publish_form form_;  // of the next try
    protocol::publish_form sent_;  // of the try in flight: its answer is read in its terms
    int tries_ = 0;
    bool marker_ = false;         // a cancel marker was seen, before or during the publish
    bool marker_gone_ = false;    // a try found it gone
    bool maybe_applied_ = false;  // a try went unanswered: it may have applied
    bool last_unknown_ = false;   // the answer that led to `reconnect` was lost
};

/// One thing the worker view wants done.
struct worker_action {
    enum class kind {
        run,            ///< run `tid` (its assignment's data: `data`, else read it), publish;
                        ///< then task_ended()
        stop,           ///< stop the handlers of `tid` (its cancel marker appeared)
        remove_marker,  ///< run `ops` (delete the marker of a task no longer here); no answer
        remake_dir,     ///< pause, then run `ops` (create our assignment directory); list again
        mark_draining,  ///< run `ops` (T9: our /workers node says draining); no answer
    };
    kind what = kind::run;
    std::string tid;
    std::vector<protocol::txn_op> ops;
    std::optional<std::string> data;  ///< run: the assignment's data, when the log carried it
};

class worker_state {
public:
    /// `stats` must outlive the view.
    worker_state(protocol::layout l, protocol::member_info me, worker_stats& stats);

    /// This worker's node as it joined (/workers/<id>): what T9 writes again, draining.
    void joined(protocol::member_info me) { me_ = std::move(me); }

    /// The assignment directory lists `names` (assignments and <tid>.cancel markers). Starts
    /// the tasks not in hand; a marker stops its task once; a marker whose task is neither
    /// in hand nor assigned is litter. An assignment missing from the listing while its task
    /// runs changes nothing here: the publish finds out (see publish_plan).
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
    publish_plan::step publish(const std::string& tid, std::string result);
    publish_plan::step publish_answered(const std::string& tid, const protocol::txn_answer& a);
    publish_plan::step publish_cleared(const std::string& tid, bool ok);
    publish_plan::step publish_reconnected(const std::string& tid, bool ok);
    /// `tid`'s turn is over, its result published as `how` says, or not at all (nullopt: its
    /// assignment was gone before it was read, or the worker was stopping). It is no longer
    /// in hand. Yields a remove_marker when its cancel marker came while the try that
    /// published was out: that try did not delete it, and no listing would find it now that
    /// the worker follows its directory's change log (§6).
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
        bool marker = false;               // its <tid>.cancel marker was seen
        std::optional<publish_plan> plan;  // once publishing
    };
    publish_plan* plan_of(const std::string& tid);
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
