// SPDX-License-Identifier: MIT
// Folding partition results into a crack job (docs/crack.md §3): what every participant does
// with a result it read, against the job node as it is. Pure: no I/O, no clock (the caller
// passes the time), unit-tested without a server (tests/unit/apps/crack/fold_test.cpp).
#pragma once

#include "apps/crack/job.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace zkd::crack {

/// What a participant learned about one partition's current task: the data of its result
/// node, or that the task vanished (it is nowhere: not pending, assigned, nor a result).
struct partition_report {
    std::size_t partition = 0;
    std::string task;                 ///< the task id the report is about
    std::optional<std::string> data;  ///< the result node's data; nullopt: vanished
};

/// Folds one report into `j`. A succeeded partition with a valid value is searched ('n') or
/// found ('f': the first find ends a running job as found, with the preimage, stamped
/// `now_ms`); a cancelled one after a find is 'c'; anything else (a failure, a garbage
/// result or value, a preimage that does not hash to the job's hash, a vanished task) marks
/// it failed ('x', listed in `failed`). False if it changes nothing: the partition is
/// accounted for already, or the report is of an older task of that partition.
bool apply(crack_job& j, const partition_report& report, std::int64_t now_ms);

/// Ends a running job whose partitions are all accounted for: not_found when none failed,
/// failed otherwise, stamped `now_ms`. False if it changes nothing.
bool settle(crack_job& j, std::int64_t now_ms);

}  // namespace zkd::crack
