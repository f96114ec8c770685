// SPDX-License-Identifier: MIT
#include "chaos/jobs.hpp"

#include "schedule/firing.hpp"

#include <boost/json/serialize.hpp>

#include <algorithm>
#include <charconv>
#include <functional>
#include <set>
#include <unordered_map>

namespace zkd::chaos {

namespace json = boost::json;

namespace {

/// How many examples of one kind of violation are listed (as the task checker does).
constexpr std::size_t job_examples = 5;

class job_violations {
public:
    explicit job_violations(std::vector<std::string>& out) : out_(out) {}
    void add(const std::string& kind, const std::string& line) {
        if (seen_[kind]++ < job_examples) {
            out_.push_back(kind + ": " + line);
        }
    }
    void finish() {
        for (const auto& [kind, n] : seen_) {
            if (n > job_examples) {
                out_.push_back(kind + ": ... and " + std::to_string(n - job_examples) + " more");
            }
        }
    }

private:
    std::vector<std::string>& out_;
    std::map<std::string, std::size_t> seen_;
};

std::string brief(const json::value& v) {
    auto s = json::serialize(v);
    return s.size() > 120 ? s.substr(0, 117) + "..." : s;
}

std::int64_t percentile(std::vector<std::int64_t> xs, double p) {
    if (xs.empty()) {
        return 0;
    }
    std::sort(xs.begin(), xs.end());
    const auto i = static_cast<std::size_t>(p / 100.0 * static_cast<double>(xs.size()));
    return xs[std::min(xs.size() - 1, i)];
}

using starts_by_id = std::unordered_map<std::string, std::vector<const task_start*>>;

/// The most starts any one attempt of the task had.
std::size_t most_starts_of_an_attempt(const std::vector<const task_start*>& starts) {
    std::map<int, std::size_t> per;
    std::size_t most = 0;
    for (const auto* s : starts) {
        most = std::max(most, ++per[s->attempt]);
    }
    return most;
}

void check_delayed(
    const jobs_recording& r, const starts_by_id& starts, jobs_report& rep, job_violations& v
) {
    std::unordered_map<std::string, std::vector<const job_result*>> got;
    std::set<std::string> known;
    for (const auto& t : r.delayed) {
        known.insert(t.id);
    }
    for (const auto& res : r.delayed_results) {
        if (!known.contains(res.id)) {
            v.add("delayed: foreign result", res.id + " was never submitted as delayed");
            continue;
        }
        got[res.id].push_back(&res);
    }
    const std::set<std::string> left(r.leftover_results.begin(), r.leftover_results.end());
    std::vector<std::int64_t> lateness;
    if (r.delayed_submit_failures > 0) {
        v.add(
            "delayed: submit failed",
            std::to_string(r.delayed_submit_failures) + " submits of delayed tasks failed"
        );
    }
    for (const auto& t : r.delayed) {
        ++rep.delayed;
        if (t.retries > 0) {
            ++rep.delayed_retried;
        }
        const auto tries = static_cast<std::size_t>(t.retries) + 1;
        const auto s = starts.find(t.id);
        const std::vector<const task_start*> none;
        const auto& mine = s != starts.end() ? s->second : none;
        std::int64_t first = 0;
        for (const auto* st : mine) {
            if (st->at_ms < t.due_ms) {
                ++rep.early_starts;
                v.add(
                    "delayed: started early",
                    t.id + " started at " + std::to_string(st->at_ms) + " (attempt " +
                        std::to_string(st->attempt) + "), " + std::to_string(t.due_ms - st->at_ms) +
                        " ms before its due time " + std::to_string(t.due_ms)
                );
            }
            first = first == 0 ? st->at_ms : std::min(first, st->at_ms);
        }
        if (const auto most = most_starts_of_an_attempt(mine); most > tries) {
            ++rep.started_twice;
            v.add(
                "delayed: started twice", t.id + ": one attempt started " + std::to_string(most) +
                                              " times, " + std::to_string(tries) + " tries allowed"
            );
        }
        const auto it = got.find(t.id);
        if (it == got.end()) {
            const auto why = r.delayed_wait_errors.find(t.id);
            v.add(
                "delayed: lost",
                t.id + " (due " + std::to_string(t.due_ms) + ") got no result" +
                    (why != r.delayed_wait_errors.end() ? " (waiting failed: " + why->second + ")"
                                                        : "")
            );
            continue;
        }
        if (it->second.size() > 1 || left.contains(t.id)) {
            v.add(
                "delayed: duplicated",
                t.id + ": " + std::to_string(it->second.size()) + " results read" +
                    (left.contains(t.id) ? ", and another left in /results" : "")
            );
            continue;
        }
        const auto& res = *it->second.front();
        bool right = true;
        if (res.started_ms != 0 && res.started_ms < t.due_ms) {
            right = false;
            v.add(
                "delayed: started early", t.id + "'s result says it started at " +
                                              std::to_string(res.started_ms) +
                                              ", before its due time " + std::to_string(t.due_ms)
            );
        }
        if (t.retries == 0) {
            if (res.state != "succeeded" || res.value != t.args) {
                right = false;
                v.add(
                    "delayed: wrong", t.id + " ended " + res.state + " with " + brief(res.value) +
                                          ", expected its args " + brief(t.args)
                );
            } else if (first != 0) {
                lateness.push_back(first - t.due_ms);
            }
        } else {
            const auto errors = res.error_finished_ms.size();
            if (res.state != "failed" || res.try_number != t.retries + 1 ||
                errors != static_cast<std::size_t>(t.retries)) {
                right = false;
                v.add(
                    "delayed: wrong retries",
                    t.id + " ended " + res.state + " at try " + std::to_string(res.try_number) +
                        " with " + std::to_string(errors) +
                        " earlier errors; expected failed at try " + std::to_string(t.retries + 1) +
                        " after " + std::to_string(t.retries)
                );
            }
            // A retry waits from the failed try's end: the last try started after the one before.
            if (errors > 0 && res.started_ms != 0 &&
                res.started_ms < res.error_finished_ms.back()) {
                right = false;
                v.add(
                    "delayed: retry early", t.id + "'s last try started at " +
                                                std::to_string(res.started_ms) +
                                                ", before the try before it ended (" +
                                                std::to_string(res.error_finished_ms.back()) + ")"
                );
            }
        }
        if (right) {
            ++rep.delayed_correct;
        }
    }
    rep.lateness_p50_ms = percentile(lateness, 50);
    rep.lateness_p99_ms = percentile(lateness, 99);
    rep.lateness_max_ms =
        lateness.empty() ? 0 : *std::max_element(lateness.begin(), lateness.end());
}

void check_schedule(
    const schedule_record& s, const starts_by_id& starts, jobs_report& rep, job_violations& v
) {
    const auto who = "schedule " + s.name + " (misfire " + s.misfire + ")";
    if (!s.final_read) {
        v.add("schedule: unread", who + ": its document could not be read at the end");
        return;
    }
    if (s.every_ms <= 0 || s.last_due_ms < s.created_ms) {
        v.add("schedule: garbage", who + ": its document says no due time decided");
        return;
    }
    const auto due_count = static_cast<std::uint64_t>((s.last_due_ms - s.created_ms) / s.every_ms);
    if (s.created_ms + static_cast<std::int64_t>(due_count) * s.every_ms != s.last_due_ms) {
        v.add(
            "schedule: not a due time",
            who + ": last_due_ms " + std::to_string(s.last_due_ms) + " is no due time of it"
        );
    }
    rep.due_times += due_count;
    rep.missed += s.missed;
    if (s.fired + s.missed + s.skipped != due_count) {
        v.add(
            "schedule: decided wrongly",
            who + ": " + std::to_string(due_count) + " due times passed, but fired " +
                std::to_string(s.fired) + " + missed " + std::to_string(s.missed) + " + skipped " +
                std::to_string(s.skipped)
        );
    }
    if (s.skipped != 0) {
        v.add(
            "schedule: skipped",
            who + ": " + std::to_string(s.skipped) + " skipped without no_overlap"
        );
    }
    // The results, by due time.
    std::map<std::int64_t, std::vector<const job_result*>> by_due;
    for (const auto& res : s.results) {
        const auto due = schedule::firing_due(s.client, res.id);
        if (!due || *due <= s.created_ms || *due > s.last_due_ms ||
            (*due - s.created_ms) % s.every_ms != 0) {
            v.add(
                "schedule: foreign firing",
                who + ": result " + res.id + " is no firing of a due time it decided"
            );
            continue;
        }
        by_due[*due].push_back(&res);
    }
    rep.firings += by_due.size();
    if (by_due.size() != s.fired) {
        v.add(
            "schedule: firings", who + ": " + std::to_string(s.fired) + " firings recorded, " +
                                     std::to_string(by_due.size()) + " due times with a result"
        );
    }
    for (const auto& [due, list] : by_due) {
        const auto& res = *list.front();
        if (list.size() > 1) {
            v.add(
                "schedule: fired twice", who + ": due time " + std::to_string(due) + " has " +
                                             std::to_string(list.size()) + " results (" + res.id +
                                             ")"
            );
        }
        if (res.state != "succeeded" || res.value != s.args) {
            v.add(
                "schedule: wrong",
                who + ": " + res.id + " ended " + res.state + " with " + brief(res.value)
            );
        }
        if (const auto st = starts.find(res.id); st != starts.end()) {
            if (most_starts_of_an_attempt(st->second) > 1) {
                v.add(
                    "schedule: started twice", who + ": " + res.id + " started twice in one attempt"
                );
            }
            for (const auto* one : st->second) {
                if (one->at_ms < due) {
                    v.add(
                        "schedule: started early", who + ": " + res.id + " started " +
                                                       std::to_string(due - one->at_ms) +
                                                       " ms before its due time"
                    );
                }
            }
        }
    }
    // Due times without a result: missed by the policy, or lost.
    std::uint64_t unfired = 0;
    std::int64_t last_unfired = 0;
    for (std::uint64_t k = 1; k <= due_count; ++k) {
        const auto due = s.created_ms + static_cast<std::int64_t>(k) * s.every_ms;
        if (!by_due.contains(due)) {
            ++unfired;
            last_unfired = due;
        }
    }
    if (s.misfire == "all" && (unfired > 0 || s.missed > 0)) {
        v.add(
            "schedule: missed",
            who + ": " + std::to_string(unfired) + " due times without a firing (the latest " +
                std::to_string(last_unfired) + "), " + std::to_string(s.missed) + " counted missed"
        );
    }
    if (s.misfire == "once" && due_count > 0) {
        // Each run of missed due times ends with the one that fired for them: the last due
        // time decided always fires.
        if (last_unfired == s.last_due_ms) {
            v.add(
                "schedule: missed", who + ": its last due time decided, " +
                                        std::to_string(s.last_due_ms) + ", did not fire"
            );
        }
    }
    rep.lines.push_back(
        who + ", every " + std::to_string(s.every_ms) + " ms: " + std::to_string(due_count) +
        " due times, " + std::to_string(s.fired) + " fired (" + std::to_string(by_due.size()) +
        " results), " + std::to_string(s.missed) + " missed, " + std::to_string(s.skipped) +
        " skipped"
    );
}

void check_workflow(
    const workflow_record& w, const starts_by_id& starts, jobs_report& rep, job_violations& v
) {
    ++rep.workflows;
    const auto who = "workflow " + w.id + " (" + w.shape + ")";
    if (w.status.empty()) {
        v.add("workflow: unread", who + ": " + w.error);
        return;
    }
    if (w.status != "succeeded") {
        v.add(
            "workflow: failed", who + " ended " + w.status + (w.error.empty() ? "" : ": " + w.error)
        );
    } else if (w.result != w.expected_result) {
        v.add(
            "workflow: wrong result",
            who + " returned " + brief(w.result) + ", expected " + brief(w.expected_result)
        );
    } else {
        ++rep.workflows_succeeded;
    }
    std::map<std::string, std::size_t> results;
    for (const auto& res : w.results) {
        ++results[res.id];
        if (res.state != "succeeded") {
            v.add("workflow: task failed", who + ": " + res.id + " ended " + res.state);
        }
    }
    rep.workflow_tasks += w.results.size();
    if (results.size() != w.expected_tasks) {
        v.add(
            "workflow: tasks", who + ": " + std::to_string(results.size()) +
                                   " tasks with a result, " + std::to_string(w.expected_tasks) +
                                   " expected"
        );
    }
    for (const auto& [id, n] : results) {
        std::string line = who;
        line += ": ";
        line += id;
        if (n > 1) {
            v.add("workflow: duplicated", line + " has " + std::to_string(n) + " results");
        }
        if (const auto st = starts.find(id);
            st != starts.end() && most_starts_of_an_attempt(st->second) > 1) {
            if (id == w.fan_in_task) {
                line += " (the fan-in)";
            }
            line += " started twice in one attempt";
            v.add("workflow: launched twice", line);
        }
    }
    if (!w.fan_in_task.empty() && !results.contains(w.fan_in_task)) {
        v.add("workflow: fan-in", who + ": the fan-in " + w.fan_in_task + " has no result");
    }
}

}  // namespace

std::vector<task_start> parse_start_log(std::string_view text, std::size_t* bad) {
    std::vector<task_start> out;
    std::size_t wrong = 0;
    std::size_t from = 0;
    while (from < text.size()) {
        auto nl = text.find('\n', from);
        const bool complete = nl != std::string_view::npos;
        if (!complete) {
            nl = text.size();
        }
        const auto line = text.substr(from, nl - from);
        from = nl + 1;
        const auto a = line.find(' ');
        const auto b = a == std::string_view::npos ? a : line.find(' ', a + 1);
        task_start s;
        bool ok = complete && b != std::string_view::npos && a > 0;
        if (ok) {
            s.id = std::string(line.substr(0, a));
            const auto att = line.substr(a + 1, b - a - 1);
            const auto at = line.substr(b + 1);
            ok = std::from_chars(att.data(), att.data() + att.size(), s.attempt).ptr ==
                     att.data() + att.size() &&
                 std::from_chars(at.data(), at.data() + at.size(), s.at_ms).ptr ==
                     at.data() + at.size() &&
                 !att.empty() && !at.empty();
        }
        if (ok) {
            out.push_back(std::move(s));
        } else if (!line.empty()) {
            ++wrong;
        }
    }
    if (bad != nullptr) {
        *bad = wrong;
    }
    return out;
}

jobs_report check_jobs(const jobs_recording& r) {
    jobs_report rep;
    job_violations v(rep.violations);
    starts_by_id starts;
    for (const auto& s : r.starts) {
        starts[s.id].push_back(&s);
    }
    check_delayed(r, starts, rep, v);
    for (const auto& s : r.schedules) {
        check_schedule(s, starts, rep, v);
    }
    if (r.workflow_submit_failures > 0) {
        v.add(
            "workflow: submit failed",
            std::to_string(r.workflow_submit_failures) + " workflow submits failed"
        );
    }
    for (const auto& w : r.workflows) {
        check_workflow(w, starts, rep, v);
    }
    v.finish();
    return rep;
}

echo_outcome echo_workflow_outcome(const json::object& spec) {
    echo_outcome out;
    const auto* steps_v = spec.if_contains("steps");
    if (steps_v == nullptr || !steps_v->is_object()) {
        return out;
    }
    const auto& steps = steps_v->get_object();
    const auto names_of = [](const json::object& step, const char* field) {
        std::vector<std::string> names;
        if (const auto* a = step.if_contains(field); a != nullptr && a->is_array()) {
            for (const auto& n : a->get_array()) {
                if (n.is_string()) {
                    names.emplace_back(n.get_string());
                }
            }
        }
        std::sort(names.begin(), names.end());
        names.erase(std::unique(names.begin(), names.end()), names.end());
        return names;
    };
    std::set<std::string> waited_for;
    for (const auto& [name, step] : steps) {
        for (auto& n : names_of(step.get_object(), "after")) {
            waited_for.insert(n);
        }
        if (const auto* m = step.get_object().if_contains("map"); m != nullptr && m->is_string()) {
            waited_for.emplace(m->get_string());
        }
    }
    std::map<std::string, json::value> memo;
    std::function<json::value(const std::string&)> value_of = [&](const std::string& name) {
        if (const auto it = memo.find(name); it != memo.end()) {
            return it->second;
        }
        const auto& step = steps.at(name).get_object();
        const json::value args = step.contains("args") ? step.at("args") : json::value();
        auto after = names_of(step, "after");
        json::value value;
        if (const auto* m = step.if_contains("map"); m != nullptr && m->is_string()) {
            const std::string source(m->get_string());
            std::erase(after, source);
            json::object inputs;
            for (const auto& a : after) {
                inputs[a] = value_of(a);
            }
            json::array elements;
            const auto src = value_of(source);
            std::size_t i = 0;
            for (const auto& item : src.is_array() ? src.get_array() : json::array()) {
                ++out.tasks;
                if (!args.is_object()) {
                    elements.push_back(item);
                } else {
                    auto e = args.get_object();
                    e["item"] = item;
                    e["index"] = i;
                    if (!after.empty()) {
                        e["inputs"] = inputs;
                    }
                    elements.emplace_back(std::move(e));
                }
                ++i;
            }
            value = std::move(elements);
        } else {
            ++out.tasks;
            if (args.is_object() && !after.empty()) {
                auto a = args.get_object();
                json::object inputs;
                for (const auto& n : after) {
                    inputs[n] = value_of(n);
                }
                a["inputs"] = std::move(inputs);
                value = std::move(a);
            } else {
                value = args;
            }
        }
        memo[name] = value;
        return value;
    };
    for (const auto& [name, step] : steps) {
        const std::string n(name);
        auto v = value_of(n);
        if (!waited_for.contains(n)) {
            out.result[n] = std::move(v);
        }
    }
    return out;
}

}  // namespace zkd::chaos
