// SPDX-License-Identifier: MIT
#include "chaos/checker.hpp"

#include <boost/json/serialize.hpp>

#include <algorithm>
#include <set>
#include <unordered_map>
#include <utility>

namespace zkd::chaos {

namespace {

/// How many examples of one kind of violation are listed; the counts say the rest.
constexpr std::size_t examples = 5;

class violation_list {
public:
    explicit violation_list(std::vector<std::string>& out) : out_(out) {}
    void add(const std::string& kind, const std::string& line) {
        if (seen_[kind]++ < examples) {
            out_.push_back(kind + ": " + line);
        }
    }
    /// Closes a kind with "... and N more" when examples were dropped.
    void finish() {
        for (const auto& [kind, n] : seen_) {
            if (n > examples) {
                out_.push_back(kind + ": ... and " + std::to_string(n - examples) + " more");
            }
        }
    }

private:
    std::vector<std::string>& out_;
    std::map<std::string, std::size_t> seen_;
};

std::string shown(const boost::json::value& v) {
    auto s = boost::json::serialize(v);
    return s.size() > 120 ? s.substr(0, 117) + "..." : s;
}

}  // namespace

std::pair<std::int64_t, std::int64_t> longest_stall(
    const std::vector<submitted_task>& submitted,
    const std::vector<observed_result>& results,
    std::int64_t end_ms
) {
    // +1 at a submit, -1 at a task's first result; a result before its submit's record (the
    // load records the submit once the call returns) counts from its result on.
    std::vector<std::pair<std::int64_t, int>> events;
    std::set<std::string> known;
    for (const auto& t : submitted) {
        known.insert(t.id);
    }
    std::set<std::string> answered;
    std::unordered_map<std::string, std::int64_t> submitted_at;
    for (const auto& t : submitted) {
        submitted_at[t.id] = t.at_ms;
    }
    for (const auto& r : results) {
        if (known.contains(r.id) && answered.insert(r.id).second) {
            const auto at = std::max(r.at_ms, submitted_at[r.id]);
            events.emplace_back(at, -1);
        }
    }
    for (const auto& t : submitted) {
        events.emplace_back(t.at_ms, +1);
    }
    // At equal times results go first: a task submitted and answered in the same millisecond
    // never opens a stall.
    std::sort(events.begin(), events.end());
    std::int64_t out = 0;
    std::int64_t mark = 0;
    std::int64_t best = 0;
    std::int64_t best_from = 0;
    for (const auto& [at, delta] : events) {
        if (delta > 0) {
            if (out == 0) {
                mark = at;
            }
            ++out;
            continue;
        }
        if (out > 0 && at - mark > best) {
            best = at - mark;
            best_from = mark;
        }
        mark = at;
        --out;
    }
    if (out > 0 && end_ms - mark > best) {
        best = end_ms - mark;
        best_from = mark;
    }
    return {best, best_from};
}

check_report check(const recording& r) {
    check_report rep;
    violation_list v(rep.violations);
    rep.submitted = r.submitted.size();
    rep.submit_failures = r.submit_failures;
    rep.placed_directly = r.placed_directly;
    rep.results = r.results.size();
    if (r.submit_failures > 0) {
        v.add(
            "submit failed", std::to_string(r.submit_failures) +
                                 " submit calls failed (outcome unknown to the client)"
        );
    }

    std::unordered_map<std::string, const submitted_task*> by_id;
    for (const auto& t : r.submitted) {
        by_id.emplace(t.id, &t);
    }
    std::unordered_map<std::string, std::vector<const observed_result*>> got;
    for (const auto& res : r.results) {
        if (!by_id.contains(res.id)) {
            ++rep.foreign;
            v.add("foreign result", res.id + " was never submitted by this run");
            continue;
        }
        got[res.id].push_back(&res);
    }
    const std::set<std::string> left_results(
        r.leftovers.results.begin(), r.leftovers.results.end()
    );

    for (const auto& t : r.submitted) {
        const auto it = got.find(t.id);
        const bool left = left_results.contains(t.id);
        if (it == got.end()) {
            ++rep.lost;
            const auto why = r.wait_errors.find(t.id);
            v.add(
                "lost",
                t.id + " (submitted at " + std::to_string(t.at_ms) + " ms) got no result" +
                    (left ? " (but one was left in /results)" : "") +
                    (why != r.wait_errors.end() ? " (waiting failed: " + why->second + ")" : "")
            );
            continue;
        }
        const auto& list = it->second;
        const bool dup = list.size() > 1 || left;
        if (dup) {
            ++rep.duplicated;
            const auto info = r.leftovers.result_info.find(t.id);
            v.add(
                "duplicated",
                t.id + ": " + std::to_string(list.size()) + " results read (worker " +
                    list.front()->worker + ", attempt " + std::to_string(list.front()->attempt) +
                    ")" + (left ? ", and another left in /results after ours was consumed" : "") +
                    (info != r.leftovers.result_info.end() ? " (" + info->second + ")" : "")
            );
        }
        bool all_right = true;
        for (const auto* res : list) {
            if (res->state != "succeeded") {
                all_right = false;
                v.add(
                    "wrong", t.id + " ended " + res->state + " (attempt " +
                                 std::to_string(res->attempt) + ", worker " + res->worker + ")"
                );
            } else if (res->value != t.expected) {
                all_right = false;
                v.add(
                    "wrong",
                    t.id + " carried " + shown(res->value) + ", expected " + shown(t.expected)
                );
            }
        }
        if (!all_right) {
            ++rep.wrong;
        } else if (!dup) {
            ++rep.correct;
        }
    }

    for (const auto& id : r.leftovers.pending) {
        ++rep.leftover_pending;
        v.add("left in /pending", id + (by_id.contains(id) ? " (a task of this run)" : ""));
    }
    for (const auto& id : r.leftovers.delayed) {
        ++rep.leftover_delayed;
        v.add("left in /delayed", id + " (due long before the end)");
    }
    for (const auto& a : r.leftovers.assigned) {
        ++rep.leftover_assigned;
        v.add("left in /assign", a);
    }
    for (const auto& id : r.leftovers.results) {
        if (by_id.contains(id) && got.contains(id)) {
            continue;  // counted as duplicated above
        }
        ++rep.leftover_results;
        const auto info = r.leftovers.result_info.find(id);
        v.add(
            "left in /results",
            id + (info != r.leftovers.result_info.end() ? " (" + info->second + ")" : "")
        );
    }
    for (const auto& e : r.ends) {
        if (e.expected && e.evidence.empty()) {
            continue;
        }
        ++rep.crashes;
        std::string how = e.signal != 0      ? "killed by signal " + std::to_string(e.signal)
                          : e.exit_code >= 0 ? "exited with " + std::to_string(e.exit_code)
                                             : "still running at the end";
        v.add(
            "crash", e.name + " " + how +
                         (e.expected ? " (as chaos made it)" : " (not caused by chaos)") +
                         (e.evidence.empty() ? "" : "; its log: " + e.evidence)
        );
    }

    const auto [stall, from] = longest_stall(r.submitted, r.results, r.end_ms);
    rep.longest_stall_ms = stall;
    rep.longest_stall_from_ms = from;

    // Recovery: the first result of a task submitted at or after the fault.
    std::vector<std::pair<std::int64_t, std::int64_t>> answered;  // (submitted, first result)
    for (const auto& t : r.submitted) {
        if (const auto it = got.find(t.id); it != got.end()) {
            answered.emplace_back(t.at_ms, it->second.front()->at_ms);
        }
    }
    std::sort(answered.begin(), answered.end());
    for (const auto& f : r.faults) {
        fault_outcome o;
        o.f = f;
        if (f.skipped) {
            ++rep.faults_skipped;
        } else {
            ++rep.faults_by_kind[std::string(name(f.planned.kind))];
            const auto first = std::lower_bound(
                answered.begin(), answered.end(), std::make_pair(f.at_ms, std::int64_t{0})
            );
            for (auto it = first; it != answered.end(); ++it) {
                const auto after = it->second - f.at_ms;
                if (!o.recovery_ms || after < *o.recovery_ms) {
                    o.recovery_ms = after;
                }
            }
            if (f.served_again_ms) {
                o.served_after_ms = *f.served_again_ms - f.at_ms;
            }
        }
        rep.timeline.push_back(std::move(o));
    }
    v.finish();
    return rep;
}

}  // namespace zkd::chaos
