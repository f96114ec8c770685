// SPDX-License-Identifier: MIT
#pragma once

// Stalled workers (docs/protocol.md §7 "Master loop", "Stalled workers"), decided without I/O.
//
// A worker marks each assignment it takes up as running within a moment (T3). One whose
// assignments sit unmarked holds tasks it does not run: its event loop is wedged while its
// session lives, or its /workers node is a stranger's. The master lists each live worker's
// directory every half `bound`; an assignment found in two listings in a row and not known to
// run is read, and one not marked running `bound` after it was assigned is taken back (T6 for
// that one task) and its worker made suspect: it gets no task from the master, and clients
// placing directly skip it (the master names it in /master), until it shows it works again.
// A suspect gets one task at a time, every `bound` (a probe): once the probe runs or is
// done, the worker is trusted again.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::roles {

class stall_watch {
public:
    using clock = std::chrono::steady_clock;

    /// `bound`: how long an assignment may stay unmarked; 0 turns the watch off.
    explicit stall_watch(std::chrono::milliseconds bound) : bound_(bound) {}

    [[nodiscard]] bool enabled() const { return bound_.count() > 0; }
    /// How often the master lists the live workers' directories: half the bound.
    [[nodiscard]] std::chrono::milliseconds period() const { return bound_ / 2; }

    /// A live worker's directory lists `tids` (cancel markers left out): the assignments to
    /// read now (in the last listing too, and not known to run).
    std::vector<std::string> listed(const std::string& worker, const std::set<std::string>& tids);

    /// One assignment as read.
    struct assignment {
        std::string tid;
        bool gone = false;        ///< finished (or taken back) since the listing
        bool running = false;     ///< it carries running_ms (T3)
        std::int64_t age_ms = 0;  ///< since it was assigned (now - assigned_ms)
    };
    /// What became of a check: the assignments to take back, and whether the worker has just
    /// become suspect or been trusted again (for the logs and /master).
    struct verdict {
        std::vector<std::string> take_back;
        bool now_suspect = false;
        bool trusted_again = false;
    };
    /// The reads of what listed() returned.
    verdict read(const std::string& worker, const std::vector<assignment>& reads);

    [[nodiscard]] bool suspect(std::string_view worker) const;
    /// Some worker is suspect: without one, nothing needs asking worker by worker.
    [[nodiscard]] bool any_suspect() const { return !suspects_.empty(); }
    /// Whether the master may give `worker` a task now: yes unless suspect; a suspect gets one
    /// at a time, `bound` after the last (the probe).
    [[nodiscard]] bool may_assign(const std::string& worker, clock::time_point now) const;
    /// The master is assigning `tid` to `worker` (for a suspect: its probe).
    void assigned(const std::string& worker, const std::string& tid, clock::time_point now);
    /// That assignment did not commit.
    void unassigned(const std::string& worker, const std::string& tid);
    /// The worker left: forget it.
    void forget(const std::string& worker);
    /// The suspects, sorted (what /master names).
    [[nodiscard]] std::vector<std::string> suspects() const;

private:
    struct worker_state {
        std::set<std::string> last;     // the last listing
        std::set<std::string> started;  // known to run (marked), while listed
        bool suspect = false;
        std::string probe;  // a suspect's task given to see it work; empty: none out
        std::optional<clock::time_point> probed_at;
    };
    void trust(worker_state& w, verdict& v);

    std::chrono::milliseconds bound_;
    std::map<std::string, worker_state> workers_;
    std::set<std::string, std::less<>> suspects_;  // the workers whose state says suspect
};

}  // namespace zkd::roles
