// SPDX-License-Identifier: MIT
#include "roles/master/detail/stall_watch.hpp"

#include <algorithm>

namespace zkd::roles {

std::vector<std::string> stall_watch::listed(
    const std::string& worker, const std::set<std::string>& tids
) {
    auto& w = workers_[worker];
    std::vector<std::string> out;
    for (const auto& tid : tids) {
        if (w.last.contains(tid) && !w.started.contains(tid)) {
            out.push_back(tid);
        }
    }
    if (!w.probe.empty() && !tids.contains(w.probe)) {
        out.push_back(w.probe);  // gone from the directory: read() hears it is gone (done)
    }
    std::erase_if(w.started, [&](const std::string& tid) { return !tids.contains(tid); });
    w.last = tids;
    return out;
}

stall_watch::verdict stall_watch::read(
    const std::string& worker, const std::vector<assignment>& reads
) {
    verdict v;
    auto& w = workers_[worker];
    // A task it marked, or its probe done, shows the worker works: what else sits unmarked
    // is taken back without suspecting it (an assignment someone wrote without its change
    // log is one the worker never saw).
    bool works = false;
    for (const auto& r : reads) {
        if (r.gone && r.tid == w.probe) {
            works = true;
        } else if (!r.gone && r.running) {
            w.started.insert(r.tid);
            works = true;
        }
    }
    if (works && w.suspect) {
        trust(w, v);
        suspects_.erase(worker);
    }
    for (const auto& r : reads) {
        if (r.gone || r.running || r.age_ms < bound_.count()) {
            continue;
        }
        v.take_back.push_back(r.tid);
        if (r.tid == w.probe) {
            w.probe.clear();  // the next probe comes `bound` after this one
        }
        if (!works && !w.suspect) {
            w.suspect = true;
            v.now_suspect = true;
            suspects_.insert(worker);
        }
    }
    return v;
}

void stall_watch::trust(worker_state& w, verdict& v) {
    w.suspect = false;
    w.probe.clear();
    w.probed_at.reset();
    v.trusted_again = true;
}

bool stall_watch::suspect(std::string_view worker) const {
    return suspects_.find(worker) != suspects_.end();
}

bool stall_watch::may_assign(const std::string& worker, clock::time_point now) const {
    const auto it = workers_.find(worker);
    if (it == workers_.end() || !it->second.suspect) {
        return true;
    }
    const auto& w = it->second;
    return w.probe.empty() && (!w.probed_at || now - *w.probed_at >= bound_);
}

void stall_watch::assigned(
    const std::string& worker, const std::string& tid, clock::time_point now
) {
    const auto it = workers_.find(worker);
    if (it != workers_.end() && it->second.suspect) {
        it->second.probe = tid;
        it->second.probed_at = now;
    }
}

void stall_watch::unassigned(const std::string& worker, const std::string& tid) {
    const auto it = workers_.find(worker);
    if (it != workers_.end() && it->second.probe == tid) {
        it->second.probe.clear();  // its assignment failed: no probe is out
    }
}

void stall_watch::forget(const std::string& worker) {
    workers_.erase(worker);
    suspects_.erase(worker);
}

std::vector<std::string> stall_watch::suspects() const {
    return {suspects_.begin(), suspects_.end()};
}

}  // namespace zkd::roles
