// SPDX-License-Identifier: MIT
// zkd's status page: polls GET /v1/status (with the bearer token as a header, never in the
// URL) every POLL_MS while the tab is visible, and draws the answer. No dependencies: every
// element, table and chart is made here with the DOM (text only: nothing the server sends
// is ever parsed as HTML).
'use strict';

(() => {
  const TOKEN_KEY = 'zkd-status-token';
  const $ = (id) => document.getElementById(id);
  const fragment = (key) => {
    const m = new RegExp('(?:^#|&)' + key + '=([^&]*)').exec(location.hash);
    return m ? decodeURIComponent(m[1]) : null;
  };

  // How often to poll: 2 s, or #poll=MS (250 ms to 60 s).
  const POLL_MS = Math.min(60000, Math.max(250, Number(fragment('poll')) || 2000));

  // The token: from the URL fragment (#token=...; a fragment never reaches the server or
  // its logs), which is then removed from the address bar, or typed into the form on a 401.
  let token = sessionStorage.getItem(TOKEN_KEY) || '';
  const fromHash = fragment('token');
  if (fromHash !== null) {
    token = fromHash;
    sessionStorage.setItem(TOKEN_KEY, token);
    const rest = location.hash.replace(/(^#|&)token=[^&]*/, '$1').replace(/^#&/, '#');
    history.replaceState(null, '', location.pathname + location.search + (rest === '#' ? '' : rest));
  }

  let timer = null;
  let waitingForToken = false;
  let inflight = false;

  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    if (props) {
      for (const [k, v] of Object.entries(props)) {
        if (k === 'class') e.className = v;
        else if (k === 'data') Object.assign(e.dataset, v);
        else e[k] = v;
      }
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  function svg(tag, attrs) {
    const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  }

  function fmtNum(v, digits) {
    if (v === null || v === undefined || Number.isNaN(v)) return '–';
    if (Math.abs(v) >= 1000) return Math.round(v).toLocaleString('en');
    return Number(v.toFixed(digits === undefined ? 1 : digits)).toString();
  }

  function fmtAge(ms) {
    if (ms === null || ms === undefined || ms < 0) return '–';
    const s = ms / 1000;
    if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + ' s';
    const m = s / 60;
    if (m < 60) return Math.floor(m) + ' min ' + Math.floor(s % 60) + ' s';
    const h = m / 60;
    if (h < 48) return Math.floor(h) + ' h ' + Math.floor(m % 60) + ' min';
    return Math.floor(h / 24) + ' d';
  }

  function setRows(tbody, rows, columns, emptyText) {
    tbody.replaceChildren(...(rows.length ? rows : [
      el('tr', { class: 'none' }, el('td', { colSpan: columns }, emptyText)),
    ]));
  }

  function meter(fraction, label) {
    const f = Math.max(0, Math.min(1, fraction || 0));
    const bar = el('span');
    bar.style.width = (f * 100).toFixed(1) + '%';
    return el('span', { class: 'meter' + (f >= 1 ? ' full' : ''), title: label || '' }, bar);
  }

  function tile(value, key) {
    return el('div', { class: 'tile' }, el('div', { class: 'v' }, value), el('div', { class: 'k' }, key));
  }

  // --- rendering ---------------------------------------------------------------------------

  function renderHeader(s) {
    const c = s.cluster;
    const m = c && c.master;
    if (s.error) {
      $('master').textContent = 'master: unknown';
    } else if (!m) {
      $('master').textContent = 'no master (election in progress?)';
    } else if (m.garbage) {
      $('master').textContent = 'master node holds garbage: ' + m.garbage;
    } else {
      $('master').textContent = 'master ' + m.id + ' · epoch ' + m.epoch;
    }
    const conn = $('conn');
    if (s.error) {
      conn.textContent = 'ZooKeeper: ' + s.error.code;
      conn.className = 'badge bad';
    } else {
      conn.textContent = 'live';
      conn.className = 'badge ok';
    }
    $('updated').textContent = 'updated ' + new Date(s.now_ms).toLocaleTimeString('en-GB');
    const banner = $('error');
    if (s.error) {
      banner.textContent = 'Cannot read the cluster: ' + s.error.message +
        ' (this node\'s own figures below are current).';
      banner.hidden = false;
    } else {
      banner.hidden = true;
    }
  }

  function renderTiles(s) {
    const c = s.cluster;
    const tiles = [];
    if (c) {
      const workers = c.workers || [];
      const capacity = workers.reduce((n, w) => n + (w.capacity || 0), 0);
      const assigned = workers.reduce((n, w) => n + (w.assigned || 0), 0);
      tiles.push(tile(c.master ? c.epoch : '–', 'epoch'));
      tiles.push(tile(workers.length, 'workers'));
      tiles.push(tile(assigned + ' / ' + capacity, 'slots in use'));
      tiles.push(tile(fmtNum(c.pending, 0), 'pending'));
      tiles.push(tile(fmtNum(s.assigned_total, 0), 'assigned or running'));
      tiles.push(tile(c.master && c.master.throughput !== null && c.master.throughput !== undefined
        ? fmtNum(c.master.throughput, 2) : '–', 'finished/s (last minute, master)'));
      tiles.push(tile(fmtNum(c.results, 0), 'results not consumed'));
      tiles.push(tile(fmtNum(c.delayed || 0, 0), 'delayed (waiting for their time)'));
    }
    // The next delayed task's due time: the master's own (exact) when this node is master,
    // else the earliest time in the delayed tasks' ids (a retry may be due later).
    const jobs = s.node && s.node.jobs;
    const due = (jobs && jobs.delayed_next_due_ms) || (s.queue && s.queue.delayed_earliest_ms);
    if (due) {
      const left = due - s.now_ms;
      tiles.push(tile(left > 0 ? 'in ' + fmtAge(left) : 'now', 'next delayed task due'));
    }
    if (s.node) {
      const mt = s.node.master_totals;
      tiles.push(tile(fmtNum(mt.lost, 0), 'lost (this node as master)'));
      tiles.push(tile(fmtNum(mt.requeued, 0), 'requeued (this node as master)'));
    }
    // Schedules and workflows: the master's own figures, shown once there is something.
    if (jobs && jobs.schedules.count !== null && (jobs.schedules.count || jobs.schedules.fired)) {
      const sc = jobs.schedules;
      tiles.push(tile(fmtNum(sc.count, 0) + (sc.paused ? ' (' + fmtNum(sc.paused, 0) + ' paused)' : ''),
        'schedules (master)'));
      tiles.push(tile(fmtNum(sc.fired, 0) + ' / ' + fmtNum(sc.late, 0), 'firings / late (this node as master)'));
    }
    const wfs = jobs && jobs.workflows.by_state;
    if (wfs && (wfs.running || wfs.succeeded || wfs.failed || wfs.cancelled)) {
      const wf = wfs;
      tiles.push(tile(fmtNum(wf.running, 0), 'workflows running (master)'));
      tiles.push(tile(fmtNum(wf.succeeded, 0) + ' / ' + fmtNum(wf.failed, 0) + ' / ' + fmtNum(wf.cancelled, 0),
        'workflows succeeded / failed / cancelled (master)'));
    }
    $('tiles').replaceChildren(...tiles);
  }

  function renderWorkers(s) {
    const c = s.cluster;
    const workers = (c && c.workers) || [];
    const masterId = c && c.master && c.master.id;
    const me = s.node && s.node.member;
    $('workers-count').textContent = c ? '(' + workers.length + ')' : '';
    const rows = workers.map((w) => {
      const badges = [];
      if (w.id === masterId) badges.push(el('span', { class: 'badge master' }, 'master'), ' ');
      if (w.id === me) badges.push(el('span', { class: 'badge' }, 'this node'), ' ');
      let state;
      if (w.garbage) state = el('span', { class: 'badge bad', title: w.garbage }, 'garbage');
      else if (w.ignored) state = el('span', { class: 'badge bad', title: w.ignored }, 'ignored');
      else if (w.suspect) {
        state = el('span', { class: 'badge bad', title: 'left assignments unstarted: gets only a probe' },
          'suspect');
      } else if (w.draining) state = el('span', { class: 'badge warn' }, 'draining');
      else state = el('span', { class: 'badge ok' }, 'active');
      const cap = w.capacity || 0;
      return el('tr', { data: { worker: w.id } },
        el('td', { class: 'id' }, w.id, ' ', ...badges),
        el('td', { class: 'host' }, w.host || ''),
        el('td', { class: 'num' }, meter(cap ? w.assigned / cap : 0, w.assigned + ' of ' + cap),
          w.assigned + ' / ' + cap),
        el('td', { class: 'num' }, w.running),
        el('td', null, (w.types && w.types.length) ? w.types.join(', ') : (w.garbage ? '' : 'every type')),
        el('td', null, state));
    });
    setRows($('workers').tBodies[0], rows, 6, c ? 'no workers' : 'unknown');
  }

  function renderQueue(s) {
    const q = s.queue;
    const box = $('queue');
    if (!q) {
      $('queue-total').textContent = '';
      box.replaceChildren(el('p', { class: 'muted' }, 'unknown'));
      return;
    }
    $('queue-total').textContent = '(' + fmtNum(q.pending, 0) + ' pending)';
    if (!q.by_priority) {
      box.replaceChildren(el('p', { class: 'muted' }, 'too many pending tasks to count by priority'));
      return;
    }
    const max = Math.max(1, ...q.by_priority);
    const rows = [];
    for (let p = 9; p >= 0; --p) {
      const n = q.by_priority[p];
      const fill = el('span');
      fill.style.width = ((n / max) * 100).toFixed(1) + '%';
      rows.push(el('div', { class: 'row', data: { priority: p } },
        el('span', null, 'priority ' + p), el('div', { class: 'bar' }, fill),
        el('span', { class: 'num' }, fmtNum(n, 0))));
    }
    box.replaceChildren(...rows);
  }

  function renderRunning(s) {
    const tasks = (s.running || []).slice();
    const now = s.now_ms;
    tasks.sort((a, b) => (a.running_ms || a.assigned_ms || 0) - (b.running_ms || b.assigned_ms || 0));
    $('running-count').textContent = s.running
      ? '(' + s.assigned_total + (s.truncated ? ', ' + tasks.length + ' shown' : '') + ')' : '';
    const rows = tasks.map((t) => {
      const since = t.running_ms || t.assigned_ms;
      let progress = '';
      if (t.progress) {
        const f = t.progress.fraction;
        progress = el('span', null, meter(f), Math.round(f * 100) + '%',
          t.progress.message ? ' ' + t.progress.message : '');
      }
      return el('tr', { data: { task: t.id } },
        el('td', { class: 'id' }, t.id),
        el('td', null, t.type || (t.garbage ? 'garbage' : '')),
        el('td', { class: 'id' }, t.worker || ''),
        el('td', null, t.state),
        el('td', { class: 'num', title: 'since submission: ' + fmtAge(t.age_ms) },
          since ? fmtAge(now - since) : '–'),
        el('td', null, progress));
    });
    setRows($('running').tBodies[0], rows, 6, s.running ? 'nothing running' : 'unknown');
  }

  function renderFailures(s) {
    const rows = (s.failures || []).map((f) => el('tr', { data: { task: f.id } },
      el('td', { class: 'id' }, f.id),
      el('td', null, el('span', { class: 'badge ' + (f.state === 'cancelled' ? 'warn' : 'bad') }, f.state)),
      el('td', { class: 'id' }, f.worker || ''),
      el('td', { class: 'num' }, f.attempt || ''),
      el('td', null, f.finished_ms ? fmtAge(s.now_ms - f.finished_ms) + ' ago' : ''),
      el('td', null, f.error ? f.error.code + ': ' + f.error.message : '')));
    const scan = s.failures_scan || { complete: true };
    if (!scan.complete && rows.length) {
      rows.push(el('tr', { class: 'none' }, el('td', { colSpan: 6 }, 'not scanned now: ' + scan.reason)));
    }
    setRows($('failures').tBodies[0], rows, 6,
      scan.complete ? 'none seen' : 'not scanned: ' + scan.reason);
  }

  function renderNode(s) {
    const n = s.node;
    const facts = [];
    const add = (k, v) => facts.push(el('dt', null, k), el('dd', null, v));
    if (!n) {
      add('node', 'this server runs without a node');
    } else {
      add('member', n.member || '(between sessions)');
      add('ZooKeeper session', n.session + ' (' + n.sessions + ' so far)');
      add('role', n.master ? 'master, epoch ' + n.epoch : 'worker' + (n.elected ? ' (was master ' + n.elected + '×)' : ''));
      const w = n.worker;
      add('worker', w.started + ' started · ' + w.succeeded + ' succeeded · ' + w.failed + ' failed · ' +
        w.timed_out + ' timed out · ' + w.cancelled + ' cancelled · ' + w.discarded + ' discarded');
      const m = n.master_totals;
      add('as master', m.assigned + ' assigned · ' + m.finished + ' tries finished · ' + m.requeued +
        ' requeued · ' + m.lost + ' lost · ' + m.rejected + ' rejected');
      const j = n.jobs;
      if (j) {
        add('delayed and retries', j.retried + ' tries retried by this worker · ' + j.released +
          ' released as master' + (j.delayed !== null ? ' · ' + j.delayed + ' waiting' : ''));
        const st = j.workflows.steps;
        if (st) {
          add('workflow steps', Object.keys(st).map((k) => st[k] + ' ' + k).join(' · '));
        }
        const sc = j.schedules;
        if (sc.fired) {
          add('schedule firings', sc.fired + ' fired · ' + sc.late + ' late (over 1 s) · mean lateness ' +
            fmtAge(Math.round(sc.lateness_ms_sum / sc.fired)) + ' · ' + sc.skipped + ' skipped · ' +
            sc.missed + ' missed');
        }
      }
    }
    $('node').replaceChildren(...facts);
  }

  // A line chart: `series` is [{name, values: [number|null]}] over the same `times` (ms).
  function drawChart(id, times, series, unit) {
    const box = $('chart-' + id);
    const W = 360, H = 140, L = 40, R = 8, T = 8, B = 20;
    const parts = [];
    const values = series.flatMap((s) => s.values).filter((v) => v !== null && v !== undefined);
    parts.push(svg('line', { class: 'axis', x1: L, y1: H - B, x2: W - R, y2: H - B }));
    parts.push(svg('line', { class: 'axis', x1: L, y1: T, x2: L, y2: H - B }));
    if (times.length < 2 || values.length === 0) {
      const t = svg('text', { class: 'empty', x: L + 10, y: H / 2 });
      t.textContent = times.length < 2 ? 'collecting samples…' : 'no data from this node';
      parts.push(t);
    } else {
      const max = Math.max(...values) * 1.1 || 1;
      const t0 = times[0], t1 = times[times.length - 1];
      const x = (t) => L + ((t - t0) / Math.max(1, t1 - t0)) * (W - L - R);
      const y = (v) => H - B - (v / max) * (H - T - B);
      series.forEach((s, i) => {
        // Gaps (null) split the line.
        let pts = [];
        const flush = () => {
          if (pts.length) parts.push(svg('polyline', { class: 's' + i, points: pts.join(' ') }));
          pts = [];
        };
        s.values.forEach((v, k) => {
          if (v === null || v === undefined) flush();
          else pts.push(x(times[k]).toFixed(1) + ',' + y(v).toFixed(1));
        });
        flush();
      });
      const label = (text, attrs) => {
        const t = svg('text', Object.assign({ class: 'tick' }, attrs));
        t.textContent = text;
        parts.push(t);
      };
      label(fmtNum(max, 2) + (unit ? ' ' + unit : ''), { x: 2, y: T + 8 });
      label('0', { x: L - 10, y: H - B });
      label('−' + fmtAge(t1 - t0), { x: L, y: H - 5 });
      label('now', { x: W - R - 20, y: H - 5 });
    }
    box.replaceChildren(...parts);
    $('legend-' + id).replaceChildren(...series.map((s, i) => el('span', { class: 'k' + i }, s.name)));
  }

  function renderCharts(s) {
    const iv = (s.history && s.history.intervals) || [];
    const times = iv.map((i) => i.t);
    const wasMaster = iv.some((i) => i.master);
    const col = (f) => iv.map(f);
    const throughput = [
      { name: 'results by this worker /s', values: col((i) => i.succeeded + i.failed + i.timed_out + i.cancelled) },
      { name: 'failed or timed out /s', values: col((i) => i.failed + i.timed_out) },
    ];
    if (wasMaster) {
      throughput.unshift({ name: 'assigned /s (as master)', values: col((i) => (i.master ? i.assigned : null)) });
    }
    drawChart('throughput', times, throughput, '/s');
    drawChart('latency', times, [
      { name: 'p50', values: col((i) => i.assign_p50_ms) },
      { name: 'p99', values: col((i) => i.assign_p99_ms) },
    ], 'ms');
    drawChart('queue', times, [{ name: 'pending (as master)', values: col((i) => i.queue_depth) }], '');
    const span = iv.length ? fmtAge(iv.reduce((n, i) => n + i.seconds * 1000, 0)) : '0 s';
    $('chart-note').textContent = 'Charts: the last ' + span + ' as this node counted them (sampled in the ' +
      'server, kept ' + ((s.history && s.history.capacity) || 0) + ' samples). Assignments, latency and ' +
      'queue depth are the master\'s: ' + (s.node && s.node.master ? 'this node is the master.'
        : 'open the page on the master to see them.');
  }

  function render(s) {
    renderHeader(s);
    renderTiles(s);
    renderWorkers(s);
    renderQueue(s);
    renderRunning(s);
    renderFailures(s);
    renderNode(s);
    renderCharts(s);
    document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
  }

  // --- polling -----------------------------------------------------------------------------

  function showLogin(why) {
    waitingForToken = true;
    $('login-why').textContent = why;
    $('login').hidden = false;
    $('conn').textContent = 'token needed';
    $('conn').className = 'badge warn';
    $('token').focus();
  }

  function schedule(delay) {
    if (timer !== null || waitingForToken || document.hidden) return;
    timer = setTimeout(poll, delay === undefined ? POLL_MS : delay);
  }

  async function poll() {
    timer = null;
    if (inflight || document.hidden) return;
    inflight = true;
    try {
      const headers = { Accept: 'application/json' };
      if (token) headers.Authorization = 'Bearer ' + token;
      const res = await fetch('/v1/status', { headers, cache: 'no-store', credentials: 'omit' });
      if (res.status === 401) {
        showLogin(token ? 'The token was refused.' : 'This server needs a token.');
        return;
      }
      const body = await res.json();
      if (!res.ok) {
        $('error').textContent = 'GET /v1/status: ' + res.status + ' ' +
          ((body.error && body.error.message) || '');
        $('error').hidden = false;
        $('conn').textContent = 'error';
        $('conn').className = 'badge bad';
      } else {
        render(body);
      }
    } catch (e) {
      $('error').textContent = 'Cannot reach zkd: ' + e.message;
      $('error').hidden = false;
      $('conn').textContent = 'offline';
      $('conn').className = 'badge bad';
    } finally {
      inflight = false;
      schedule();
    }
  }

  $('login').addEventListener('submit', (ev) => {
    ev.preventDefault();
    token = $('token').value.trim();
    $('token').value = '';
    sessionStorage.setItem(TOKEN_KEY, token);
    $('login').hidden = true;
    waitingForToken = false;
    schedule(0);
  });

  // Nobody looking, no requests: a hidden tab stops polling and resumes when shown.
  document.addEventListener('visibilitychange', () => {
    if (document.hidden) {
      if (timer !== null) clearTimeout(timer);
      timer = null;
    } else {
      schedule(0);
    }
  });

  schedule(0);
})();
