// SPDX-License-Identifier: MIT
// Internal to run_crack: creating a job, or joining the one that exists.
#pragma once

#include "apps/crack/detail/io.hpp"
#include "apps/crack/plan.hpp"
#include "protocol/layout.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>

namespace zkd::crack::detail {

/// A job as open_job found or made it.
struct opened_job {
    held_job held;
    bool joined = false;  ///< another client had created the job
    int resubmitted = 0;  ///< failed partitions this call submitted again
};

/// Creates the job of `plan`: its node and every partition's task in one multi (T1), after
/// making /jobs if missing. Or joins the job of the same id if it exists, after checking that
/// it describes the same search; a `failed` one gets its failed partitions submitted again
/// (new tasks, in one multi checked against the job's version) when spec.retry_failed.
/// Errors: crack_errc (job_too_large, garbage_job, spec_conflict, job_vanished), the
/// session's; operation_aborted if cancelled before the create was sent.
/// `spec` and `plan` must outlive the call.
boost::asio::awaitable<zkco::result<opened_job>> open_job(
    zkco::client& zk, protocol::layout l, const crack_spec& spec, const crack_plan& plan
);

}  // namespace zkd::crack::detail
