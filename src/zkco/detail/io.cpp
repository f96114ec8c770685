// SPDX-License-Identifier: MIT
// The C client's I/O, driven from the executor: zookeeper_interest says which socket, which
// events and how long; the executor waits for them and calls zookeeper_process.
#include "zkco/detail/c_client.hpp"
#include "zkco/detail/core.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace asio = boost::asio;

namespace zkd::zkco::detail {

void core::before_request() {
    // zookeeper_st sends a request at once, and when that send fails (the server closed the
    // connection, and a send before this one drew its reset) it closes the socket without
    // failing what is in flight or telling anyone. So first read what the socket holds: a
    // closed connection is then handled the usual way (everything in flight fails with
    // connection loss, the session event says so) before this request is queued.
    if (!socket_) {
        return;
    }
    pollfd p{socket_fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) {
        process_reads();
    }
    cork(true);
}

void core::cork(bool on) {
    // The C client writes a request as two sends, its 4 length bytes and then its body, each
    // a packet of its own (TCP_NODELAY), and the server's selector wakes for each. Corked,
    // the requests of one turn leave together when the pump that kick() posted uncorks.
    if (!socket_ || corked_ == on) {
        return;
    }
    const int v = on ? 1 : 0;
    if (::setsockopt(socket_->native_handle(), IPPROTO_TCP, TCP_CORK, &v, sizeof v) == 0) {
        corked_ = on;
    }
}

void core::sent() {
    ++requests_in_flight_;
    note_silent_disconnect();
    kick();
}

void core::note_silent_disconnect() {
    // What before_request() cannot rule out (a reset drawn by the first of two sends in one
    // flush): the library dropped the connection and says only NOTCONNECTED. What was in
    // flight fails after the reconnect (an out-of-order reply, taken as connection loss);
    // tell the session's waiters now.
    if (state_ == session_state::connected && zh_ != nullptr &&
        zoo_state(zh_) == ZOO_NOTCONNECTED_STATE) {
        zk_event ev;
        ev.k = zk_event::kind::session;
        ev.code = ZOO_NOTCONNECTED_STATE;
        push(std::move(ev));
    }
}

void core::process_reads() {
    // One reply per call; stop at the first call that finds no whole one, or after a batch
    // (the executor has other work, and the wait wakes again for the rest).
    for (int i = 0; i < 64 && zh_ != nullptr; ++i) {
        if (zookeeper_process(zh_, ZOOKEEPER_READ) != ZOK) {
            break;
        }
    }
}

void core::kick() {
    // zoo_a* sends at once when it can; what a full socket buffer (or a connection not made
    // yet) leaves queued needs a write wait, which only a new zookeeper_interest asks for.
    if (pump_posted_ || zh_ == nullptr) {
        return;
    }
    pump_posted_ = true;
    asio::post(ex_, [w = weak_from_this()] {
        if (auto c = w.lock()) {
            c->pump();
        }
    });
}

void core::pump() {
    pump_posted_ = false;
    cork(false);
    if (zh_ == nullptr) {
        return;
    }
    note_silent_disconnect();
    int fd = -1;
    int interest = 0;
    timeval tv{0, 1000};  // an error that sets nothing: look again in a millisecond
    const int rc = zookeeper_interest(zh_, &fd, &interest, &tv);
    if (rc == ZINVALIDSTATE || rc == ZBADARGUMENTS) {
        // Expired or refused: the session event that says so is queued; terminate() stops us.
        stop_io();
        return;
    }
    if (rc != ZOK) {
        // The library closed its socket (a timeout, a failed ping) and failed what was in
        // flight; the next zookeeper_interest connects again.
        fd = -1;
        interest = 0;
    }
    watch_socket(fd);
    if (socket_ && !read_armed_) {
        arm_socket_wait(ZOOKEEPER_READ);
    }
    if (socket_ && (interest & ZOOKEEPER_WRITE) != 0 && !write_armed_) {
        arm_socket_wait(ZOOKEEPER_WRITE);
    }
    // Pings, the receive deadline and reconnection happen in zookeeper_interest: call it
    // again when `tv` is up. A timer that fires early costs one call, so only an earlier
    // deadline moves it.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(tv.tv_sec) +
                          std::chrono::microseconds(tv.tv_usec);
    if (io_timer_armed_ && deadline >= io_deadline_) {
        return;
    }
    io_timer_armed_ = true;
    io_deadline_ = deadline;
    io_timer_->expires_at(deadline);
    io_timer_->async_wait([w = weak_from_this(), gen = ++io_timer_gen_](error_code ec) {
        if (auto c = w.lock()) {
            c->on_io_timer(gen, ec);
        }
    });
}

void core::arm_socket_wait(int events) {
    const bool read = events == ZOOKEEPER_READ;
    (read ? read_armed_ : write_armed_) = true;
    socket_->async_wait(
        read ? asio::posix::stream_descriptor::wait_read
             : asio::posix::stream_descriptor::wait_write,
        [w = weak_from_this(), gen = socket_gen_, events](error_code ec) {
            if (auto c = w.lock()) {
                c->on_socket(events, gen, ec);
            }
        }
    );
}

void core::watch_socket(int fd) {
    struct ::stat st {};
    if (fd >= 0 && ::fstat(fd, &st) != 0) {
        fd = -1;
    }
    if (socket_ && fd == socket_fd_ && st.st_ino == socket_inode_) {
        return;  // the same socket
    }
    cork(false);
    socket_.reset();  // its waits end as operation_aborted, and are stale anyway
    ++socket_gen_;
    read_armed_ = false;
    write_armed_ = false;
    socket_fd_ = -1;
    if (fd < 0) {
        return;
    }
    const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) {
        spdlog::warn("zk: cannot watch the client's socket: {}", std::strerror(errno));
        return;  // the timer calls pump again
    }
    error_code ec;
    socket_ = std::make_unique<asio::posix::stream_descriptor>(ex_);
    socket_->assign(copy, ec);
    if (ec) {
        ::close(copy);
        socket_.reset();
        spdlog::warn("zk: cannot watch the client's socket: {}", ec.message());
        return;
    }
    socket_fd_ = fd;
    socket_inode_ = st.st_ino;
}

void core::on_socket(int events, std::uint64_t gen, error_code ec) {
    if (gen != socket_gen_ || zh_ == nullptr) {
        return;  // a wait on a socket we dropped
    }
    (events == ZOOKEEPER_READ ? read_armed_ : write_armed_) = false;
    if (ec == asio::error::operation_aborted) {
        return;
    }
    if (ec) {
        // The descriptor itself failed: give it up, the library finds out on its own.
        watch_socket(-1);
    } else if (events == ZOOKEEPER_READ) {
        process_reads();
    } else {
        (void)zookeeper_process(zh_, ZOOKEEPER_WRITE);
    }
    pump();
}

void core::on_io_timer(std::uint64_t gen, error_code ec) {
    if (gen != io_timer_gen_ || ec) {
        return;  // moved or stopped
    }
    io_timer_armed_ = false;
    // The pings go out from here: a loop this late is a loop that could lose its connection
    // (after 2/3 of the session timeout without a reply the C client gives up on it).
    const auto late = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - io_deadline_
    );
    if (state_ == session_state::connected && late > std::chrono::milliseconds(500)) {
        spdlog::warn(
            "zk: the event loop ran the ZooKeeper client's timer {} ms late (session timeout "
            "{} ms): a loop stalled past two thirds of it loses the connection",
            late.count(), negotiated_.count()
        );
    }
    pump();
}

void core::stop_io() {
    cork(false);  // zookeeper_close's request must not wait for the kernel's 200 ms
    socket_.reset();
    ++socket_gen_;
    read_armed_ = false;
    write_armed_ = false;
    socket_fd_ = -1;
    ++io_timer_gen_;
    io_timer_armed_ = false;
    if (io_timer_) {
        io_timer_->cancel();
    }
}

}  // namespace zkd::zkco::detail
