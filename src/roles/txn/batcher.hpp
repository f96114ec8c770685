// SPDX-License-Identifier: MIT
#pragma once

#include "zkco/client.hpp"
#include "zkco/types.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace zkd::roles {

/// Folds groups of ops into multi() transactions (docs/protocol.md §1 "Batching").
///
/// A group is ops that must commit together (one task's delete + create). Whatever is
/// queued goes on the next turn of the event loop when fewer than `max_in_flight`
/// transactions are out, so a lone group is never held back for a timer, and the groups
/// queued in one turn share a transaction; under load groups pile up and share
/// transactions. Deferred groups (async_submit_deferred) wait for company. A transaction is
/// bounded by `max_ops` and `max_bytes`. Identical check ops of different groups are sent
/// once; a group that creates, sets or deletes a node an earlier group of the transaction
/// writes goes in the next transaction. Across transactions in flight (max_in_flight above
/// 1) no order is kept between writes of one node: a transaction sent again after another
/// group's failure lands after the ones sent meanwhile, so an owner keeps at most one
/// unanswered write of a node. Every transaction starts with the prefix (a master's
/// `check(/epoch, E)`), and may end with change logs (enable_change_logs).
///
/// Failures stay with their group: when a transaction fails, the group owning the failed op
/// completes with the error and its own op results, and the other groups, which did not
/// apply, are sent again. A failed prefix op, or an outcome without per-op results
/// (connection loss, expiry, close), completes every group of the transaction with the error.
///
/// Use on the client's executor only. Destroying the batcher completes queued groups with
/// operation_aborted; groups in flight complete when their transaction does.
class multi_batcher {
public:
    struct limits {
        std::size_t max_ops = 1000;
        std::size_t max_bytes = 900'000;
        int max_in_flight = 4;
        /// How long a deferred group (async_submit_deferred) waits for a transaction to ride.
        std::chrono::milliseconds defer_for{20};
    };

    /// Counters for "ZooKeeper transactions per task" figures.
    struct stats {
        std::uint64_t transactions = 0;    ///< multis sent
        std::uint64_t groups = 0;          ///< groups completed
        std::uint64_t ops = 0;             ///< ops sent, prefix included
        std::uint64_t resent = 0;          ///< groups sent again after another group failed
        std::uint64_t unknown = 0;         ///< transactions whose answer was lost (receipts)
        std::uint64_t receipts_found = 0;  ///< of those, the ones a receipt showed applied
    };

    multi_batcher(zkco::client& zk, limits lim);
    explicit multi_batcher(zkco::client& zk) : multi_batcher(zk, limits{}) {}
    multi_batcher(const multi_batcher&) = delete;
    multi_batcher& operator=(const multi_batcher&) = delete;
    ~multi_batcher();

    /// Ops put at the head of every transaction from now on (already queued groups too).
    void set_prefix(std::vector<zkco::multi_op> prefix);

    /// Makes the outcome of groups submitted with async_submit_decided decidable after a lost
    /// connection (docs/protocol.md §6 T1): each transaction holding one of them also writes
    /// a receipt, one of a few ephemeral
    /// nodes `<dir>/<name>-<k>` of this session, with the transaction's sequence number. When
    /// the connection is lost with a transaction in flight and the session lives on, the
    /// batcher waits for the connection, reads the receipt, and completes the groups as
    /// applied (with empty op results) or sends them again: a group is never applied twice
    /// and never completes with an unknown outcome while the session lives. `dir` must
    /// exist; `name` must be unique among the sessions that may use `dir` at once.
    void enable_receipts(std::string dir, std::string name);

    /// From now on every create of a child of a directory with a change log (/pending/<s>,
    /// /assign/<member>; docs/protocol.md §6 "Change logs") is noted in it: each
    /// transaction also sets the data of each such directory it creates children in to the
    /// log of those children, with their data while the transaction's room for it lasts
    /// (protocol::max_log_inline_bytes, and what keeps the transaction under max_txn_bytes).
    /// And a group whose create fails because its directory is a client's results directory
    /// that does not exist (made on demand, §2) is sent again with the directory's create in
    /// front of it (and again without, should someone make it in between); its handler sees
    /// only its own ops' results. Call before submitting.
    void enable_change_logs();

    /// Queues a group. Signature: void(error_code, std::vector<zkco::op_result>): the group's
    /// own op results (empty when the transaction had none), in the group's order.
    template <class CompletionToken>
    auto async_submit(std::vector<zkco::multi_op> ops, CompletionToken&& token) {
        return initiate(std::move(ops), std::forward<CompletionToken>(token), kind::plain);
    }

    /// As async_submit, for a group whose outcome must be known even when the answer is lost
    /// (creates that must not be sent twice): its transaction writes a receipt, if receipts
    /// are enabled (enable_receipts).
    template <class CompletionToken>
    auto async_submit_decided(std::vector<zkco::multi_op> ops, CompletionToken&& token) {
        return initiate(std::move(ops), std::forward<CompletionToken>(token), kind::decided);
    }

    /// As async_submit, for a group nobody waits for (a client deleting a result it has
    /// read, T5): it does not start a transaction of its own but goes with the next one
    /// (the next task submitted, say), or once it has waited `limits::defer_for`, or at once
    /// when someone waits for the batcher to be idle.
    template <class CompletionToken>
    auto async_submit_deferred(std::vector<zkco::multi_op> ops, CompletionToken&& token) {
        return initiate(std::move(ops), std::forward<CompletionToken>(token), kind::deferred);
    }

    /// Completes, void(error_code), once no group is queued or in flight: at once when none
    /// is, else right after the answer that leaves none. The groups' own handlers run before
    /// and may queue more: callers that must see none loop on outstanding(). Completes with
    /// operation_aborted when the batcher is destroyed first.
    template <class CompletionToken>
    auto async_wait_idle(CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, void(zkco::error_code)>(
            [this](auto h) { wait_idle(std::move(h)); }, token
        );
    }

    /// `f` runs each time the batcher may send a transaction (fewer than `max_in_flight` are
    /// out), right before it takes its queue: what `f` queues then goes in that transaction.
    /// A client holds concurrent submits back while its transaction is in flight and queues
    /// them here, packed (docs/protocol.md §4.1 "Automatic bundles"). `f` must not destroy
    /// the batcher.
    void on_send(std::function<void()> f);
    /// Runs on_send's function on the next turn of the event loop, or, while `max_in_flight`
    /// transactions are out, once one is answered; whatever it queues is sent as usual.
    void poke();

    [[nodiscard]] const stats& counters() const noexcept;
    /// True while transactions write receipts (enable_receipts, and none failed for good).
    [[nodiscard]] bool receipts_enabled() const noexcept;
    /// Groups queued or in flight.
    [[nodiscard]] std::size_t outstanding() const noexcept;

private:
    enum class kind { plain, decided, deferred };

    template <class CompletionToken>
    auto initiate(std::vector<zkco::multi_op> ops, CompletionToken&& token, kind k) {
        return boost::asio::async_initiate<
            CompletionToken, void(zkco::error_code, std::vector<zkco::op_result>)>(
            [this, k](auto h, std::vector<zkco::multi_op> g) {
                submit(std::move(g), std::move(h), k == kind::decided, k == kind::deferred);
            },
            token, std::move(ops)
        );
    }

    using handler =
        boost::asio::any_completion_handler<void(zkco::error_code, std::vector<zkco::op_result>)>;
    struct group;
    struct state;

    void submit(std::vector<zkco::multi_op> ops, handler h, bool decided, bool deferred);
    void wait_idle(boost::asio::any_completion_handler<void(zkco::error_code)> h);

    std::shared_ptr<state> state_;
};

}  // namespace zkd::roles
