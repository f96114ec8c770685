// SPDX-License-Identifier: MIT
#include "apps/crack/detail/open.hpp"

#include "apps/crack/md5_crack.hpp"
#include "protocol/ids.hpp"
#include "protocol/task.hpp"
#include "roles/client/task_client.hpp"

#include <boost/asio/error.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace asio = boost::asio;

namespace zkd::crack::detail {

namespace {

/// Why a partition's task could not go in the job's transaction, as crack says it.
zkco::error_code partition_refused(zkco::error_code ec) {
    return zkco::error_code(
        ec == roles::client_errc::task_too_large ? crack_errc::job_too_large
                                                 : crack_errc::bad_task_options
    );
}

/// How a create attempt ended when it did not fail.
enum class creation {
    created,  ///< our multi applied
    exists,   ///< the job node exists (another client made it, or our earlier attempt did)
};

/// One open_job call.
class job_opener {
public:
    job_opener(zkco::client& zk, protocol::layout l, const crack_spec& spec, const crack_plan& plan)
        : zk_(zk),
          l_(l),
          spec_(spec),
          plan_(plan),
          path_(std::string(crack_jobs_dir) + "/" + plan.job_id) {}

    asio::awaitable<zkco::result<opened_job>> open() {
        bool have_job = false;
        for (int round = 0; round < 10 && !have_job; ++round) {
            auto node = co_await read_job(zk_, path_);
            if (!node) {
                co_return node.error();
            }
            if (node->has_value()) {
                auto adopted = adopt_existing(**node);
                if (!adopted) {
                    co_return adopted.error();
                }
                have_job = true;
                continue;
            }
            auto created = co_await create_job();
            if (!created) {
                co_return created.error();
            }
            have_job = *created == creation::created;  // else it exists now: read it
        }
        if (!have_job) {
            co_return zkco::error_code(crack_errc::job_vanished);
        }
        const auto& job = out_.held.job;
        spdlog::info(
            "crack {}: {} ({} partitions, {} candidates, state {})", plan_.job_id,
            out_.joined ? "joined" : "created", job.total(), job.size, to_string(job.state)
        );
        if (job.state == crack_state::failed && spec_.retry_failed) {
            auto again = co_await resubmit_failed();
            if (!again) {
                co_return again.error();
            }
        }
        co_return std::move(out_);
    }

private:
    zkco::result<void> adopt_existing(const zkco::node& node) {
        auto doc = decode_crack_job(node.data);
        if (!doc) {
            spdlog::warn(
                "crack {}: the job node is garbage: {}", plan_.job_id, doc.error().message
            );
            return zkco::error_code(crack_errc::garbage_job);
        }
        if (doc->hash != plan_.hash || doc->spec != plan_.canonical || doc->size != plan_.size) {
            return zkco::error_code(crack_errc::spec_conflict);
        }
        // Our own multi, applied although its reply was lost, reads as created by us.
        out_.joined = my_ids_.empty() || doc->tasks != my_ids_;
        out_.held = held_job{std::move(*doc), node.stat.version};
        return {};
    }

    /// Capacity of the live workers that are not draining; 0 if it cannot be read.
    asio::awaitable<int> live_capacity() {
        auto kids = co_await zk_.get_children(protocol::layout::workers_dir());
        if (!kids) {
            co_return 0;
        }
        int capacity = 0;
        for (const auto& name : kids->names) {
            auto node = co_await zk_.get(protocol::layout::worker(name));
            if (!node) {
                continue;
            }
            auto w = protocol::decode_worker(node->data);
            if (w && !w->draining && w->capacity) {
                capacity += std::clamp(*w->capacity, 0, max_crack_partitions);
            }
        }
        co_return std::min(capacity, max_crack_partitions);
    }

    asio::awaitable<zkco::result<void>> ensure_jobs_dir() {
        const std::string dir(crack_jobs_dir);
        for (;;) {
            auto there = co_await zk_.exists(dir);
            if (there && *there) {
                co_return zkco::result<void>();
            }
            if (there) {
                auto made = co_await zk_.create(dir, "");
                if (made || made.error() == zkco::errc::node_exists) {
                    co_return zkco::result<void>();
                }
                const bool retry = co_await retry_after(zk_, made.error());
                if (!retry) {
                    co_return made.error();
                }
                continue;
            }
            const bool retry = co_await retry_after(zk_, there.error());
            if (!retry) {
                co_return there.error();
            }
        }
    }

    /// The job node and every partition's pending node, as one multi: the ops and the job.
    asio::awaitable<zkco::result<std::pair<std::vector<zkco::multi_op>, crack_job>>> creation_ops(
    ) {
        int capacity = 0;
        if (spec_.partitions <= 0) {
            capacity = co_await live_capacity();
        }
        const std::uint64_t parts = partition_count(plan_, spec_.partitions, capacity);
        const std::int64_t now = protocol::now_ms();
        crack_job doc;
        doc.hash = plan_.hash;
        doc.spec = plan_.canonical;
        doc.size = plan_.size;
        doc.created_ms = now;
        doc.client = ids_.client_hex();
        const auto ranges = split_keyspace(plan_.size, parts);
        // The job node and its partitions' tasks in one transaction, through the client API.
        roles::task_transaction txn(l_, doc.client, now);
        txn.add(zkco::op::create{path_, {}, zkco::create_mode::persistent, {}});
        for (const auto& range : ranges) {
            std::string tid = ids_.next(spec_.priority, now);
            if (auto added = txn.add_task(tid, partition_task(plan_, spec_, range)); !added) {
                co_return partition_refused(added.error());
            }
            doc.tasks.push_back(std::move(tid));
        }
        doc.partitions.assign(doc.tasks.size(), crack_partition::open);
        std::get<zkco::op::create>(txn.own(0)).data = encode(doc);
        auto ops = txn.ops();
        if (!fits_one_multi(ops)) {
            co_return zkco::error_code(crack_errc::job_too_large);
        }
        co_return std::pair{std::move(ops), std::move(doc)};
    }

    /// Creates the job node and all its partitions in one multi. Yields `exists` if the job
    /// node exists (another client made it, or our earlier attempt applied).
    asio::awaitable<zkco::result<creation>> create_job() {
        auto planned = co_await creation_ops();
        if (!planned) {
            co_return planned.error();
        }
        auto& [ops, doc] = *planned;
        my_ids_ = doc.tasks;
        auto dir = co_await ensure_jobs_dir();
        if (!dir) {
            co_return dir.error();
        }
        // The partitions' results directory, before one can finish (else the first result's
        // writer makes it, in a second try: docs/protocol.md §2). A failure is no error.
        (void)co_await zk_.create(protocol::layout::client_results(ids_.client_hex()), "");
        for (;;) {
            const bool stop = co_await cancelled();
            if (stop) {
                co_return zkco::error_code(asio::error::operation_aborted);
            }
            auto copy = ops;
            auto r = co_await zk_.multi(std::move(copy));
            if (r) {
                out_.held = held_job{std::move(doc), 0};
                out_.joined = false;
                co_return creation::created;
            }
            const auto failed = r.failed_op();
            if (failed && *failed < r.results.size()) {
                const auto ec = r.results[*failed].ec;
                if (*failed == 0 && ec == zkco::errc::node_exists) {
                    co_return creation::exists;
                }
                spdlog::warn(
                    "crack {}: cannot create the job (op {}): {}", plan_.job_id, *failed,
                    ec.message()
                );
                co_return ec;
            }
            const bool retry = co_await retry_after(zk_, r.ec);
            if (!retry) {
                co_return r.ec;
            }
        }
    }

    /// The job with its failed partitions open again as new tasks, running, and the multi
    /// that writes it (checked against the held version); nullopt when none failed.
    zkco::result<std::optional<std::pair<std::vector<zkco::multi_op>, crack_job>>> resubmission() {
        const auto ranges = split_keyspace(plan_.size, out_.held.job.tasks.size());
        if (ranges.size() != out_.held.job.tasks.size()) {
            return zkco::error_code(crack_errc::spec_conflict);
        }
        crack_job doc = out_.held.job;
        const std::int64_t now = protocol::now_ms();
        roles::task_transaction txn(l_, ids_.client_hex(), now);
        txn.add(zkco::op::set{path_, {}, out_.held.version});
        for (std::size_t i = 0; i < doc.tasks.size(); ++i) {
            if (doc.partitions[i] != crack_partition::failed) {
                continue;
            }
            std::string tid = ids_.next(spec_.priority, now);
            if (auto added = txn.add_task(tid, partition_task(plan_, spec_, ranges[i])); !added) {
                return partition_refused(added.error());
            }
            doc.tasks[i] = std::move(tid);
            doc.partitions[i] = crack_partition::open;
        }
        if (txn.task_count() == 0) {
            return std::nullopt;
        }
        doc.failed.clear();
        doc.state = crack_state::running;
        doc.finished_ms = 0;
        ++doc.retries;
        std::get<zkco::op::set>(txn.own(0)).data = encode(doc);
        auto ops = txn.ops();
        if (!fits_one_multi(ops)) {
            return zkco::error_code(crack_errc::job_too_large);
        }
        return std::pair{std::move(ops), std::move(doc)};
    }

    /// Joining a failed job: its failed partitions become new tasks, the job running again,
    /// in one multi checked against the job's version.
    asio::awaitable<zkco::result<void>> resubmit_failed() {
        for (int round = 0; round < 20 && out_.held.job.state == crack_state::failed; ++round) {
            auto planned = resubmission();
            if (!planned || !planned->has_value()) {
                co_return planned ? zkco::result<void>() : zkco::result<void>(planned.error());
            }
            auto& [ops, doc] = **planned;
            // The partitions it opens again: those whose task it replaces.
            int redo = 0;
            for (std::size_t i = 0; i < doc.tasks.size(); ++i) {
                redo += doc.tasks[i] != out_.held.job.tasks[i] ? 1 : 0;
            }
            auto r = co_await zk_.multi(std::move(ops));
            if (r) {
                const std::int32_t v =
                    r.results.empty() ? out_.held.version + 1 : r.results[0].stat.version;
                out_.held.adopt(std::move(doc), v);
                out_.resubmitted += redo;
                spdlog::info("crack {}: resubmitted {} failed partitions", plan_.job_id, redo);
                co_return zkco::result<void>();
            }
            const auto failed = r.failed_op();
            if (failed && (*failed != 0 || r.results[0].ec != zkco::errc::bad_version)) {
                co_return r.results[*failed].ec;
            }
            if (!failed) {
                const bool retry = co_await retry_after(zk_, r.ec);
                if (!retry) {
                    co_return r.ec;
                }
            }
            // Someone else changed the job (or our multi applied unseen): read it again.
            auto fresh = co_await reread_job(zk_, path_);
            if (!fresh) {
                co_return fresh.error();
            }
            if (fresh->job.tasks == doc.tasks) {
                out_.resubmitted += redo;  // ours applied
            }
            out_.held.adopt(std::move(fresh->job), fresh->version);
        }
        co_return zkco::result<void>();
    }

    zkco::client& zk_;
    protocol::layout l_;
    const crack_spec& spec_;
    const crack_plan& plan_;
    std::string path_;
    protocol::task_id_generator ids_;
    std::vector<std::string> my_ids_;  // the task ids of our create multi
    opened_job out_;
};

}  // namespace

asio::awaitable<zkco::result<opened_job>> open_job(
    zkco::client& zk, protocol::layout l, const crack_spec& spec, const crack_plan& plan
) {
    job_opener opener(zk, l, spec, plan);
    auto r = co_await opener.open();
    co_return r;
}

}  // namespace zkd::crack::detail
