// SPDX-License-Identifier: MIT
#pragma once

// One publish of a worker's result (docs/protocol.md §6 T4), try by try, with no I/O: which
// ops to send and, after each answer (a lost one included), what next. worker.cpp carries
// the steps out; tests/unit/roles/worker/worker_fsm_test.cpp drives it alone.

#include "protocol/layout.hpp"
#include "protocol/worker_txn.hpp"

#include <string>

namespace zkd::roles {

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
class publish_fsm {
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
    /// `target`: where `result` is created, the task's result path when empty; a retry's
    /// delayed node (docs/protocol.md §6 T4 "Retry"), fenced the same way.
    publish_fsm(
        protocol::layout l,
        std::string worker,
        std::string tid,
        std::string result,
        bool marker,
        std::string target = {}
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
    std::string target_;
    protocol::publish_form form_;  // of the next try
    protocol::publish_form sent_;  // of the try in flight: its answer is read in its terms
    int tries_ = 0;
    bool marker_ = false;         // a cancel marker was seen, before or during the publish
    bool marker_gone_ = false;    // a try found it gone
    bool maybe_applied_ = false;  // a try went unanswered: it may have applied
    bool last_unknown_ = false;   // the answer that led to `reconnect` was lost
};

}  // namespace zkd::roles
