// SPDX-License-Identifier: MIT
// master_fsm (master_fsm.hpp): what /master says (docs/protocol.md §2) and when it is written:
// the throughput figure, the suspects, and the node again should someone delete or replace it.
#include "roles/master/detail/master_fsm.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

namespace zkd::roles {

void master_fsm::handle(const master_saw::report_due& /*e*/, clock::time_point now) {
    // Tasks finished per second over the last minute (or since the master started).
    const auto window = std::chrono::seconds(60);
    while (!finishes_.empty() && now - finishes_.front().first > window) {
        finishes_.pop_front();
    }
    std::uint64_t done = 0;
    for (const auto& f : finishes_) {
        done += f.second;
    }
    const double secs = std::chrono::duration<double>(
                            std::min<clock::duration>(now - started_.value_or(now), window)
    )
                            .count();
    const double rate = std::round(static_cast<double>(done) / std::max(secs, 1.0) * 100) / 100;
    if (rate == throughput_written_) {
        return;
    }
    throughput_written_ = rate;
    master_node_.throughput = rate;
    out_.emplace_back(master_do::write_master{protocol::master_report_ops(master_node_), false});
}

void master_fsm::publish_suspects() {
    // Named in /master when they changed: clients placing directly skip them.
    auto suspects = stalls_.suspects();
    stats_.suspects = suspects.size();
    if (suspects.size() > protocol::max_suspects_named) {
        suspects.resize(protocol::max_suspects_named);
    }
    if (suspects == master_node_.suspects) {
        return;
    }
    master_node_.suspects = std::move(suspects);
    out_.emplace_back(master_do::write_master{protocol::master_report_ops(master_node_), false});
}

void master_fsm::publish_features() {
    // What this master and every live worker it has read follow (docs/protocol.md §2
    // "Features"), named in /master when it changed: clients make automatic bundles only
    // while it names entry_results (§4.1). Not before every worker listed was read: a
    // worker of an older zkd not read yet must not be taken for one of ours.
    if (!workers_listed_ || worker_reads_out_ > 0) {
        return;
    }
    auto features = protocol::own_features();
    for (const auto& [id, w] : workers_) {
        if (w.alive) {
            std::erase_if(features, [&](const std::string& f) {
                return !std::binary_search(w.info.features.begin(), w.info.features.end(), f);
            });
        }
    }
    if (features == master_node_.features) {
        return;
    }
    std::string named;
    for (const auto& f : features) {
        named += (named.empty() ? "" : ", ") + f;
    }
    spdlog::info(
        "master {}: the features every member follows: {}", master_node_.id,
        named.empty() ? "none (a member of an older zkd)" : named
    );
    master_node_.features = std::move(features);
    out_.emplace_back(master_do::write_master{protocol::master_report_ops(master_node_), false});
}

void master_fsm::handle(const master_saw::master_node_read& e, clock::time_point /*now*/) {
    bool ours = e.exists && e.owned;
    // Still our node, but someone may have set its data: what clients read the bound on
    // pending tasks from must say it.
    const bool garbled = ours && e.data && !protocol::master_node_says(master_node_, *e.data);
    ours = ours && !garbled;
    if (rewriting_master_node_) {
        // One write at a time: the change that started it may also fire the next watch before
        // the write is applied. What this read saw is looked at again once it is answered.
        master_read_during_rewrite_ = e;
        return;
    }
    if (ours) {
        return;
    }
    spdlog::warn(
        "master {}: /master was {}; writing it again", master_node_.id,
        garbled    ? "overwritten (it no longer said this master's id, epoch and bound)"
        : e.exists ? "replaced by someone else"
                   : "deleted"
    );
    rewriting_master_node_ = true;
    out_.emplace_back(master_do::write_master{
        protocol::master_node_ops(master_node_, e.exists, e.version), true});
}

void master_fsm::handle(const master_saw::master_node_written& /*e*/, clock::time_point now) {
    rewriting_master_node_ = false;
    // A read that came meanwhile may be of a change after the write (a delete, which fires no
    // watch once the node is gone): written again if it says so. If the write came after it
    // instead, the node it writes fails at its version or as existing, harmlessly, and the
    // watch shows what /master holds.
    if (auto read = std::exchange(master_read_during_rewrite_, std::nullopt)) {
        handle(*read, now);
    }
}

}  // namespace zkd::roles
