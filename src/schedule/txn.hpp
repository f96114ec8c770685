// SPDX-License-Identifier: MIT
// A schedule's nodes and transactions (docs/protocol.md §12.3, §12.4): S1 add, S2 change
// (pause, resume), S3 remove (the client's), S4 fire (the master's, fenced by its epoch);
// each as a builder of its ops, in the terms of protocol/master_txn.hpp. No I/O.
#pragma once

#include "protocol/layout.hpp"
#include "protocol/master_txn.hpp"
#include "schedule/spec.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::schedule {

/// "/schedules": empty when made, then a change note (schedule_note).
std::string schedules_dir();
/// "/schedules/<name>": the schedule's document.
std::string schedule_node(std::string_view name);

/// The change note a client writes into /schedules with every change of a schedule:
/// `{"v":1,"changed":"<name>"}`; the master reads only that schedule again when the note's
/// version follows the one it saw.
std::string change_note(std::string_view name);
/// The name a change note says; nullopt for anything else (an empty /schedules included).
std::optional<std::string> read_change_note(std::string_view data);

/// S1: create(/results/<client>, "") (node_exists: the client part is taken: draw another),
/// create(/schedules/<name>, document) (node_exists: the name is taken), set(/schedules, note).
std::vector<protocol::txn_op> add_ops(const schedule& s);
/// S2: set(/schedules/<name>, document, version), set(/schedules, note).
std::vector<protocol::txn_op> change_ops(const schedule& s, std::int32_t version);
/// S3: delete(/schedules/<name>, -1), set(/schedules, note).
std::vector<protocol::txn_op> remove_ops(std::string_view name);

/// One schedule's part of an S4: its document after the firings at its version, and the
/// tasks they create (id, data).
struct firing_write {
    std::string name;
    std::int32_t version = 0;
    std::string document;
    std::vector<std::pair<std::string, std::string>> creates;
};

/// An S4 transaction and, per op, the index of the firing_write it belongs to (-1: the epoch
/// check and the change logs).
struct fire_txn {
    std::vector<protocol::txn_op> ops;
    std::vector<int> owner;
};

/// S4: check(/epoch, epoch), per schedule set(/schedules/<name>, document, version) and
/// create(/pending/<s>/<tid>, task) per firing, then one change log per pending shard
/// created in (§6).
fire_txn fire_ops(
    const protocol::layout& l, std::int64_t epoch, const std::vector<firing_write>& writes
);

}  // namespace zkd::schedule
