// SPDX-License-Identifier: MIT
#include "roles/batcher.hpp"

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

namespace asio = boost::asio;

namespace zkd::roles {

struct multi_batcher::group {
    std::vector<zkco::multi_op> ops;
    std::size_t bytes = 0;
    handler h;
    std::vector<std::size_t> index;  // where each op sits in the transaction being sent
};

struct multi_batcher::state : std::enable_shared_from_this<state> {
    state(zkco::client& z, limits l) : zk(&z), ex(z.get_executor()), lim(l) {}

    zkco::client* zk;  // null once the batcher is gone
    asio::any_io_executor ex;
    limits lim;
    std::vector<zkco::multi_op> prefix;
    std::size_t prefix_bytes = 0;
    std::deque<group> queue;
    int in_flight = 0;
    std::size_t in_flight_groups = 0;
    stats counters;

    void complete(group& g, zkco::error_code ec, std::vector<zkco::op_result> results) {
        ++counters.groups;
        auto hex = asio::get_associated_executor(g.h, ex);
        asio::dispatch(hex, [h = std::move(g.h), ec, r = std::move(results)]() mutable {
            std::move(h)(ec, std::move(r));
        });
    }

    void pump() {
        while (zk != nullptr && in_flight < lim.max_in_flight && !queue.empty()) {
            send_one();
        }
    }

    void send_one() {
        std::vector<zkco::multi_op> ops = prefix;
        std::size_t bytes = prefix_bytes;
        // Identical checks (same path and version) are sent once per transaction.
        std::map<std::pair<std::string, std::int32_t>, std::size_t> checks;
        std::vector<group> batch;
        while (!queue.empty()) {
            auto& g = queue.front();
            const bool first = batch.empty();
            if (!first && (ops.size() + g.ops.size() > lim.max_ops ||
                           bytes + g.bytes > lim.max_bytes)) {
                break;  // a group alone goes even if larger: it fails or succeeds on its own
            }
            g.index.clear();
            for (auto& op : g.ops) {
                if (const auto* c = std::get_if<zkco::op::check>(&op)) {
                    const auto key = std::make_pair(c->path, c->version);
                    if (const auto it = checks.find(key); it != checks.end()) {
                        g.index.push_back(it->second);
                        continue;
                    }
                    checks.emplace(key, ops.size());
                }
                g.index.push_back(ops.size());
                ops.push_back(op);
            }
            bytes += g.bytes;
            batch.push_back(std::move(g));
            queue.pop_front();
        }
        ++in_flight;
        in_flight_groups += batch.size();
        ++counters.transactions;
        counters.ops += ops.size();
        zk->async_multi(std::move(ops), [self = shared_from_this(), batch = std::move(batch),
                                         prefix_size = prefix.size()](
                                            zkco::error_code ec,
                                            std::vector<zkco::op_result> results) mutable {
            self->done(std::move(batch), prefix_size, ec, std::move(results));
        });
    }

    static std::vector<zkco::op_result> slice(const group& g,
                                              const std::vector<zkco::op_result>& results) {
        std::vector<zkco::op_result> out;
        if (results.empty()) {
            return out;
        }
        out.reserve(g.index.size());
        for (const auto i : g.index) {
            out.push_back(i < results.size() ? results[i] : zkco::op_result{});
        }
        return out;
    }

    void done(std::vector<group> batch, std::size_t prefix_size, zkco::error_code ec,
              std::vector<zkco::op_result> results) {
        --in_flight;
        in_flight_groups -= batch.size();
        std::optional<std::size_t> failed;
        if (ec && !results.empty()) {
            failed = zkco::multi_result{ec, results}.failed_op();
        }
        // Groups that did not apply because another one failed go back to the front, in
        // order, before anyone's handler runs (a handler may submit more).
        std::vector<group*> finished;
        std::vector<group> resend;
        for (auto& g : batch) {
            const bool owns_failure =
                failed && std::find(g.index.begin(), g.index.end(), *failed) != g.index.end();
            if (ec && failed && *failed >= prefix_size && !owns_failure) {
                resend.push_back(std::move(g));
            } else {
                finished.push_back(&g);
            }
        }
        counters.resent += resend.size();
        // NOLINTNEXTLINE(modernize-loop-convert): clang 14 cannot parse libstdc++ 12 ranges
        for (auto it = resend.rbegin(); it != resend.rend(); ++it) {
            queue.push_front(std::move(*it));
        }
        for (auto* g : finished) {
            complete(*g, ec, slice(*g, results));
        }
        pump();
    }
};

multi_batcher::multi_batcher(zkco::client& zk, limits lim)
    : state_(std::make_shared<state>(zk, lim)) {}

multi_batcher::~multi_batcher() {
    state_->zk = nullptr;
    auto queued = std::move(state_->queue);
    for (auto& g : queued) {
        // Posted: we may be inside a handler of the group's owner.
        auto hex = asio::get_associated_executor(g.h, state_->ex);
        asio::post(state_->ex, [hex, h = std::move(g.h)]() mutable {
            asio::dispatch(hex, [h = std::move(h)]() mutable {
                std::move(h)(asio::error::operation_aborted, std::vector<zkco::op_result>{});
            });
        });
    }
}

void multi_batcher::set_prefix(std::vector<zkco::multi_op> prefix) {
    state_->prefix_bytes = 0;
    for (const auto& op : prefix) {
        state_->prefix_bytes += zkco::estimated_size(op);
    }
    state_->prefix = std::move(prefix);
}

const multi_batcher::stats& multi_batcher::counters() const noexcept { return state_->counters; }

std::size_t multi_batcher::outstanding() const noexcept {
    return state_->queue.size() + state_->in_flight_groups;
}

void multi_batcher::submit(std::vector<zkco::multi_op> ops, handler h) {
    std::size_t bytes = 0;
    for (const auto& op : ops) {
        bytes += zkco::estimated_size(op);
    }
    // Constructed, never assigned: Boost 1.81's any_completion_handler move assignment wraps
    // its source again and again until the stack overflows.
    state_->queue.push_back(group{std::move(ops), bytes, std::move(h), {}});
    state_->pump();
}

}  // namespace zkd::roles
