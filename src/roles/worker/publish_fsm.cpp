// SPDX-License-Identifier: MIT
#include "roles/worker/detail/publish_fsm.hpp"

#include <spdlog/spdlog.h>

#include <utility>

namespace zkd::roles {

publish_fsm::publish_fsm(
    protocol::layout l,
    std::string worker,
    std::string tid,
    std::string result,
    bool marker,
    std::string target
)
    : l_(l),
      worker_(std::move(worker)),
      tid_(std::move(tid)),
      result_(std::move(result)),
      target_(std::move(target)),
      form_{true, marker, true},
      marker_(marker) {}

publish_fsm::step publish_fsm::done(publish_end e) {
    step s;
    s.what = step::kind::done;
    s.end = e;
    return s;
}

publish_fsm::step publish_fsm::send() {
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
    s.ops = protocol::publish_ops(l_, worker_, tid_, result_, sent_, target_);
    return s;
}

publish_fsm::step publish_fsm::start() {
    return send();
}

publish_fsm::step publish_fsm::answered(const protocol::txn_answer& a) {
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

publish_fsm::step publish_fsm::cleared(bool ok) {
    if (ok) {
        return send();
    }
    step s;
    s.what = step::kind::reconnect;
    return s;
}

publish_fsm::step publish_fsm::reconnected(bool ok) {
    if (!ok) {
        return done(publish_end::given_up);
    }
    // The outcome was unknown: a retry hits the fence if that try applied.
    maybe_applied_ = maybe_applied_ || last_unknown_;
    return send();
}

}  // namespace zkd::roles
