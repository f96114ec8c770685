// SPDX-License-Identifier: MIT
#pragma once

// The waits on a client's own results (task_client::inbox): private to the client room,
// shared by its submit side (task_client.cpp) and its results side (results.cpp).

#include "roles/client/submit_fsm.hpp"
#include "roles/client/task_client.hpp"

#include <boost/asio/steady_timer.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace zkd::roles {

/// One wait parked in the inbox: the follower fills it in and cancels `ready`.
struct task_client::inbox_wait {
    explicit inbox_wait(const boost::asio::any_io_executor& ex)
        : ready(ex, boost::asio::steady_timer::time_point::max()) {}

    boost::asio::steady_timer ready;  ///< a timer used as a condvar
    bool done = false;
    bool read_it = false;  ///< delivered by name only: the wait reads the result itself
    std::string name;      ///< the name it was delivered for (a wait may wait for two)
    /// The name it waits for without its data (results_inbox::wait's `name_only`): a
    /// delivery of it fills nothing in.
    std::string name_only;
    /// Names delivered to it after it was done (a wait on two names that both came).
    std::vector<std::string> also;
    zkco::result<zkco::node> node = zkco::error_code(boost::asio::error::operation_aborted);
};

/// The waits on this client's own results and the view of its results directory, shared by
/// the waits and the follower (which may outlive this client: it checks `alive`).
struct task_client::inbox {
    results_inbox view;
    std::map<std::string, std::vector<std::shared_ptr<inbox_wait>>> waits;  ///< by name
    bool running = false;  ///< a follower runs (while waits are parked)

    /// Completes the waits on `name`.
    void complete(const std::string& name, const std::function<void(inbox_wait&)>& fill) {
        const auto it = waits.find(name);
        if (it == waits.end()) {
            return;
        }
        for (const auto& w : it->second) {
            if (w->done) {
                w->also.push_back(name);  // it took the other name it waited for
                continue;
            }
            if (name != w->name_only) {
                fill(*w);
            }
            w->name = name;
            w->done = true;
            w->ready.cancel();
        }
        waits.erase(it);
    }

    void deliver(const results_inbox::delivery& d) {
        for (const auto& entry : d.with_data) {
            complete(entry.first, [&entry](inbox_wait& w) {
                w.node = zkco::node{entry.second, {}};
            });
        }
        for (const auto& name : d.to_read) {
            complete(name, [](inbox_wait& w) { w.read_it = true; });
        }
        for (const auto& name : d.named) {
            complete(name, [](inbox_wait&) {});
        }
    }

    /// The follower stops: every parked wait fails with `ec`.
    void fail(zkco::error_code ec) {
        auto all = std::move(waits);
        waits.clear();
        for (const auto& [name, ws] : all) {
            for (const auto& w : ws) {
                view.unwait(name, name == w->name_only);
                if (w->done) {
                    continue;  // failed already, under the other name it waited for
                }
                w->node = ec;
                w->done = true;
                w->ready.cancel();
            }
        }
        view.gone();
        running = false;
    }
};

}  // namespace zkd::roles
