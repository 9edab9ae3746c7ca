// hourglass dashboard: a page over the daemon's own API (/v1/queues,
// /v1/jobs, /metrics), polled while the tab is visible. Everything shown
// from the daemon goes into the page as text nodes or attributes, never as
// markup: a job's payload, result, error or handler name cannot run.
'use strict';
(() => {
  const POLL_MS = 2000;
  const HISTORY = 150; // samples kept for the charts over time: 5 minutes at 2 s
  const STAGES = ['admission', 'queue', 'run', 'idle', 'reclaim', 'retry'];
  const LIST_STATES = ['queued', 'running', 'scheduled', 'waiting', 'retrying', 'dead', 'finished'];
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const SVG_TAGS = new Set(['svg', 'rect', 'line', 'text', 'g', 'title', 'path']);

  // ---- building the page: elements from data, text only ----
  function el(tag, attrs, ...kids) {
    const e = SVG_TAGS.has(tag) ? document.createElementNS(SVG_NS, tag) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const k of kids.flat(Infinity)) {
      if (k === null || k === undefined || k === false) continue;
      e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return e;
  }
  const fmtMs = (ms) => {
    if (ms === null || ms === undefined || Number.isNaN(ms)) return '–';
    const a = Math.abs(ms);
    if (a >= 3600e3) return (ms / 3600e3).toFixed(1) + ' h';
    if (a >= 60e3) return (ms / 60e3).toFixed(1) + ' min';
    if (a >= 1e3) return (ms / 1e3).toFixed(a >= 10e3 ? 0 : 1) + ' s';
    if (a >= 1) return ms.toFixed(a >= 10 ? 0 : 1) + ' ms';
    return (ms * 1000).toFixed(0) + ' µs';
  };
  const fmtRate = (r) => (r >= 100 ? r.toFixed(0) : r >= 10 ? r.toFixed(1) : r.toFixed(2));
  const jobHref = (id) => '#/jobs/' + encodeURIComponent(id);
  const queueHref = (name, st) => '#/queues/' + encodeURIComponent(name) + (st ? '/' + st : '');

  // ---- tokens: this tab only ----
  const tokens = { read: sessionStorage.getItem('hg.read') || '', admin: sessionStorage.getItem('hg.admin') || '' };

  async function api(method, path, admin) {
    const headers = {};
    // The daemon lets the admin token read too: an operator who entered only it sees the pages.
    const read = method === 'GET' || method === 'HEAD';
    const t = admin ? tokens.admin : tokens.read || (read ? tokens.admin : '');
    if (t) headers.Authorization = 'Bearer ' + t;
    const r = await fetch(path, { method, headers, cache: 'no-store', credentials: 'omit' });
    const text = await r.text();
    let body = text;
    try { body = JSON.parse(text); } catch (_) { /* text, as /metrics */ }
    return { status: r.status, body, text };
  }

  // ---- /metrics: Prometheus text, summed over labels as asked ----
  function parseMetrics(text) {
    const m = new Map();
    for (const line of text.split('\n')) {
      if (!line || line[0] === '#') continue;
      const mm = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
      if (!mm) continue;
      const labels = {};
      if (mm[2]) {
        for (const p of mm[2].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
          labels[p[1]] = p[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
        }
      }
      if (!m.has(mm[1])) m.set(mm[1], []);
      m.get(mm[1]).push({ labels, value: Number(mm[3]) });
    }
    return m;
  }
  const total = (m, name, pred) =>
    (m.get(name) || []).filter((s) => !pred || pred(s.labels)).reduce((a, s) => a + s.value, 0);
  // A histogram summed over its labels: [{le (seconds), count in this bucket}], +Inf last.
  function histogram(m, name) {
    const byLe = new Map();
    for (const s of m.get(name + '_bucket') || []) {
      const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le);
      byLe.set(le, (byLe.get(le) || 0) + s.value);
    }
    const les = [...byLe.keys()].sort((a, b) => a - b);
    let prev = 0;
    return les.map((le) => {
      const c = byLe.get(le);
      const b = { le, count: c - prev, cumulative: c };
      prev = c;
      return b;
    });
  }
  // The bucket bound below which half the observations fall (seconds), or null.
  function median(h) {
    const n = h.length ? h[h.length - 1].cumulative : 0;
    if (!n) return null;
    const b = h.find((x) => x.cumulative >= n / 2);
    return b && Number.isFinite(b.le) ? b.le : null;
  }

  // ---- state ----
  const state = {
    route: null, queues: null, metrics: null, history: [], list: null, job: null,
    error: null, lastOk: 0, confirm: null, busy: false,
  };

  function parseRoute() {
    let parts;
    try {
      parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
    } catch (_) {
      return { page: 'overview' }; // a malformed address: the overview, not a page that throws at every poll
    }
    if (parts[0] === 'queues' && parts[1]) {
      return { page: 'queue', name: parts[1], state: LIST_STATES.includes(parts[2]) ? parts[2] : 'dead' };
    }
    if (parts[0] === 'jobs' && parts[1]) return { page: 'job', id: parts[1] };
    return { page: 'overview' };
  }

  // One sample of the counters the charts over time are drawn from. In a
  // fleet the expiries are the fleet's (the queue's totals at the broker);
  // admission refusals, goodput and late work are this daemon's (/metrics).
  function sample(m, queue) {
    const s = { t: Date.now(), ok: total(m, 'hourglass_jobs_finished_total', (l) => l.outcome === 'ok'),
      late: total(m, 'hourglass_jobs_completed_late_total'), stages: {}, fleet: !!(queue && queue.totals) };
    const expired = s.fleet ? queue.totals.expired || {} : null;
    for (const st of STAGES) {
      s.stages[st] = expired ? expired[st] || 0 : total(m, 'hourglass_jobs_expired_total', (l) => l.stage === st);
    }
    s.stages.admission = total(m, 'hourglass_jobs_rejected_total', (l) => l.reason === 'insufficient_budget');
    return s;
  }

  // One poll at a time: a slow daemon is not asked twice as often. A poll
  // asked for meanwhile (a click, a new page) runs right after.
  let polling = false;
  let pollAgain = false;
  async function poll() {
    if (polling) {
      pollAgain = true;
      return;
    }
    polling = true;
    state.route = parseRoute();
    try {
      const r = state.route;
      const calls = [api('GET', '/v1/queues'), api('GET', '/metrics')];
      if (r.page === 'queue') calls.push(api('GET', '/v1/jobs?limit=50&state=' + r.state));
      if (r.page === 'job') calls.push(api('GET', '/v1/jobs/' + encodeURIComponent(r.id)));
      const [q, m, extra] = await Promise.all(calls);
      if (q.status === 401) throw new Error('this daemon needs the access token: open Tokens above');
      if (q.status !== 200) throw new Error('GET /v1/queues answered ' + q.status);
      state.queues = q.body.queues || [];
      if (m.status === 200) {
        state.metrics = parseMetrics(m.text);
        state.history.push(sample(state.metrics, state.queues[0]));
        if (state.history.length > HISTORY) state.history.shift();
      }
      state.list = r.page === 'queue' ? extra : null;
      state.job = r.page === 'job' ? extra : null;
      state.error = null;
      state.lastOk = Date.now();
    } catch (e) {
      state.error = e.message || String(e);
    }
    polling = false;
    render();
    if (pollAgain) {
      pollAgain = false;
      poll();
    }
  }

  // ---- charts: SVG drawn here ----
  // Bars over time, stacked by series: rates per second between samples.
  function timeChart(history, series, label) {
    const W = 320, H = 120, P = 22;
    const rows = [];
    for (let i = 1; i < history.length; i++) {
      const a = history[i - 1], b = history[i];
      const dt = Math.max((b.t - a.t) / 1000, 0.001);
      rows.push(series.map((s) => Math.max(0, (s.get(b) - s.get(a)) / dt)));
    }
    const peak = Math.max(1e-9, ...rows.map((r) => r.reduce((x, y) => x + y, 0)));
    const bw = (W - P) / HISTORY;
    const svg = el('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label });
    svg.append(el('line', { class: 'axis', x1: P, y1: H - 14, x2: W, y2: H - 14 }));
    svg.append(el('text', { x: 0, y: 10 }, fmtRate(peak) + '/s'), el('text', { x: 0, y: H - 16 }, '0'));
    svg.append(el('text', { x: P, y: H - 2 }, '−' + Math.round((HISTORY * POLL_MS) / 60000) + ' min'),
      el('text', { x: W - 24, y: H - 2 }, 'now'));
    const x0 = W - rows.length * bw;
    rows.forEach((r, i) => {
      let y = H - 14;
      r.forEach((v, k) => {
        const h = (v / peak) * (H - 30);
        if (h <= 0) return;
        y -= h;
        svg.append(el('rect', { class: 's-' + series[k].cls, x: x0 + i * bw, y, width: Math.max(bw - 0.5, 0.5), height: h },
          el('title', {}, `${series[k].name}: ${fmtRate(v)}/s`)));
      });
    });
    const legend = el('div', { class: 'legend' }, series.map((s) => el('span', {}, el('i', { class: 's-' + s.cls }), s.name)));
    return [svg, legend];
  }

  // A histogram's buckets as bars, with a dashed line at `markSeconds`.
  function histogramChart(h, markSeconds, markLabel, label, empty) {
    const W = 320, H = 120, P = 4;
    const svg = el('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label });
    const n = h.length;
    if (!n || !h[n - 1].cumulative) {
      svg.append(el('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle' }, empty || 'no jobs yet'));
      return svg;
    }
    const peak = Math.max(...h.map((b) => b.count), 1);
    const bw = (W - P * 2) / n;
    h.forEach((b, i) => {
      const hh = (b.count / peak) * (H - 34);
      const late = markSeconds !== null && b.le > markSeconds;
      svg.append(el('rect', { class: late ? 's-late' : 's-queue', x: P + i * bw, y: H - 18 - hh, width: bw - 1, height: hh },
        el('title', {}, `≤ ${Number.isFinite(b.le) ? fmtMs(b.le * 1000) : '∞'}: ${b.count}`)));
      if (i % 3 === 0) {
        svg.append(el('text', { x: P + i * bw, y: H - 4 }, Number.isFinite(b.le) ? fmtMs(b.le * 1000) : '∞'));
      }
    });
    if (markSeconds !== null) {
      const i = h.findIndex((b) => b.le >= markSeconds);
      const x = P + (i < 0 ? n : i + 1) * bw;
      svg.append(el('line', { class: 'mark', x1: x, y1: 4, x2: x, y2: H - 18 }),
        el('text', { class: 'mark-label', x: Math.min(x + 3, W - 90), y: 12 }, markLabel + ' ' + fmtMs(markSeconds * 1000)));
    }
    return svg;
  }

  // ---- actions: each confirmed, each with the admin token ----
  function flash(text, bad) {
    const f = document.getElementById('flash');
    f.replaceChildren(el('p', { class: bad ? 'bad' : '' }, text));
    clearTimeout(flash.timer);
    flash.timer = setTimeout(() => f.replaceChildren(), 8000);
  }

  // `admin`: the action needs the admin token (all but cancel, which the API
  // grants to whoever may read the job, as DELETE /v1/jobs/{id} does).
  function actionButton(key, label, run, danger, admin = true) {
    if (state.confirm === key) {
      return el('span', { class: 'actions' },
        el('button', { class: 'confirm', 'data-action': key + ':confirm', onclick: () => act(key, run, admin) }, 'Confirm ' + label.toLowerCase()),
        el('button', { 'data-action': key + ':keep', onclick: () => { state.confirm = null; render(); } }, 'Keep'));
    }
    return el('button', { class: danger ? 'danger' : '', 'data-action': key, disabled: state.busy,
      onclick: () => { state.confirm = key; render(); } }, label);
  }

  async function act(key, run, admin) {
    state.confirm = null;
    if (admin && !tokens.admin) {
      flash('Actions need the admin token (--admin-token-file): open Tokens above.', true);
      render();
      return;
    }
    state.busy = true;
    render();
    try {
      const r = await run();
      const b = r.body && typeof r.body === 'object' ? r.body : {};
      const ok = r.status >= 200 && r.status < 300;
      flash(ok ? `${key.split(':')[0]}: done (${r.status})` + (b.purged !== undefined ? `, ${b.purged} purged` : '')
        + (b.replayed !== undefined ? `, ${b.replayed} replayed` + (b.refused ? ', then one refused at admission' : '') : '')
        : `${key.split(':')[0]} refused: ${r.status} ${b.error || ''}${b.stage ? ' (' + b.stage + ')' : ''} ${b.message || ''}`, !ok);
    } catch (e) {
      flash(String(e), true);
    }
    state.busy = false;
    poll();
  }
  const post = (path) => () => api('POST', path, true);
  const del = (path, admin) => () => api('DELETE', path, admin);

  // ---- pages ----
  function queueCard(q, link) {
    const c = q.counts || {};
    const m = state.metrics;
    const budget = m ? median(histogram(m, 'hourglass_request_budget_seconds')) : null;
    const pw = q.predicted_wait_ms;
    const count = (k, name) => el('div', {}, el('b', { 'data-count': k }, c[k] ?? '–'), el('span', {}, name));
    const t = q.totals;
    const n = (group, k) => ((t && t[group]) || {})[k] || 0;
    const card = el('section', { class: 'card', 'data-queue': q.name },
      el('h2', {}, link ? el('a', { href: queueHref(q.name) }, q.name) : q.name, ' ',
        q.paused ? el('span', { class: 'badge paused', 'data-paused': 'true' }, 'paused') : el('span', { class: 'badge ok' }, 'running'),
        ' ', el('span', { class: 'muted' }, q.store)),
      el('div', { class: 'counts' }, count('queued', 'queued'), count('running', 'running'), count('scheduled', 'scheduled'), count('waiting', 'waiting'), count('dead', 'dead')));
    // The backlog against the wait it implies and the budget jobs carry.
    const W = 300, H = 26;
    const scale = Math.max(pw ?? 0, budget !== null ? budget * 1000 : 0, 1) * 1.15;
    const bar = el('svg', { class: 'bar', viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': 'predicted wait against the typical budget' });
    bar.append(el('rect', { class: 's-budget', x: 0, y: 6, width: W, height: 12 }));
    if (pw !== null && pw !== undefined) {
      const over = budget !== null && pw > budget * 1000;
      bar.append(el('rect', { class: over ? 's-late' : 's-wait', x: 0, y: 6, width: (Math.min(pw, scale) / scale) * W, height: 12 }));
    }
    if (budget !== null) {
      const x = ((budget * 1000) / scale) * W;
      bar.append(el('line', { class: 'mark', x1: x, y1: 0, x2: x, y2: H }));
    }
    card.append(bar, el('p', { class: 'muted' },
      'predicted wait ', el('b', { 'data-field': 'predicted_wait' }, pw === null ? 'none serve it' : fmtMs(pw)),
      budget !== null ? ` · typical budget ≤ ${fmtMs(budget * 1000)}` : '',
      q.oldest_queued_age_ms !== undefined ? ` · oldest waiting ${fmtMs(q.oldest_queued_age_ms)}` : '',
      ' · ', el('b', { 'data-field': 'live_slots' }, q.live_slots ?? 0), ' live slots',
      c.retrying ? ` · ${c.retrying}${q.retrying_partial ? '+' : ''} of the scheduled are retries` : ''));
    if (t) {
      const expired = Object.entries(t.expired || {}).map(([st, v]) => `${st} ${v}`).join(', ');
      card.append(el('p', { class: 'muted' }, 'since the queue began: ', el('b', { 'data-field': 'fleet_ok' }, n('finished', 'ok')),
        ' ok · ', n('finished', 'error'), ' error · ', el('b', { 'data-field': 'fleet_expired' },
          Object.values(t.expired || {}).reduce((a, v) => a + v, 0)), ' expired', expired ? ` (${expired})` : '',
        ` · ${t.retries || 0} retries · ${n('finished', 'dead')} dead (${t.dead_dropped || 0} dropped from the list)`));
    }
    return card;
  }

  function deadlinePanels() {
    const m = state.metrics;
    if (!m) return [];
    const h = state.history;
    const runMedian = median(histogram(m, 'hourglass_run_duration_seconds'));
    const budget = median(histogram(m, 'hourglass_request_budget_seconds'));
    const last = h[h.length - 1];
    const first = h[0];
    const span = last && first && last.t > first.t ? (last.t - first.t) / 1000 : 0;
    const goodput = span ? (last.ok - first.ok) / span : 0;
    const wasted = span ? (last.late - first.late) / span : 0;
    const breakers = (m.get('hourglass_circuit_state') || []).map((s) =>
      el('tr', {}, el('td', {}, s.labels.upstream), el('td', {}, ['closed', 'half-open', 'open'][s.value] || s.value)));
    return [
      el('div', { class: 'grid' },
        el('section', { class: 'card' }, el('h2', {}, 'Expiries by stage'),
          el('p', { class: 'muted' }, last && last.fleet ? 'the fleet\'s, at the broker; admission: this daemon\'s refusals' : 'this daemon\'s'),
          timeChart(h, STAGES.map((st) => ({ name: st, cls: st, get: (s) => s.stages[st] })), 'expiries by stage over time')),
        el('section', { class: 'card' }, el('h2', {}, 'Goodput and wasted work'),
          el('p', { class: 'muted' }, el('b', { 'data-field': 'goodput' }, fmtRate(goodput)), ' jobs/s ok · ',
            el('b', { 'data-field': 'wasted' }, fmtRate(wasted)), ' jobs/s completed late'),
          el('p', { class: 'muted' }, 'this daemon since it started: ', el('b', { 'data-field': 'ok_total' }, last ? last.ok : 0), ' ok, ',
            el('b', { 'data-field': 'late_total' }, last ? last.late : 0), ' late, ',
            el('b', { 'data-field': 'expired_total' }, last ? STAGES.reduce((a, st) => a + last.stages[st], 0) : 0), ' expired or refused for their budget'),
          timeChart(h, [{ name: 'ok', cls: 'ok', get: (s) => s.ok }, { name: 'completed late', cls: 'late', get: (s) => s.late }], 'goodput over time'))),
      el('div', { class: 'grid' },
        el('section', { class: 'card' }, el('h2', {}, 'Budget left at dispatch'),
          histogramChart(histogram(m, 'hourglass_remaining_budget_at_dispatch_seconds'), null, '', 'remaining budget at dispatch',
            'no job with a deadline yet (async jobs carry a freshness)'),
          el('p', { class: 'muted' }, runMedian !== null ? `typical run ≤ ${fmtMs(runMedian * 1000)}: a job dispatched with less left is likely to expire running` : 'no runs yet')),
        el('section', { class: 'card' }, el('h2', {}, 'Queue delay'),
          histogramChart(histogram(m, 'hourglass_queue_delay_seconds'), budget, 'budget', 'queue delay'),
          el('p', { class: 'muted' }, 'red: waited longer than the typical budget')),
        breakers.length ? el('section', { class: 'card' }, el('h2', {}, 'Circuit breakers'),
          el('table', {}, el('tr', {}, el('th', {}, 'upstream'), el('th', {}, 'state')), breakers)) : null),
    ];
  }

  function consumersTable(q) {
    if (!q.consumers || !q.consumers.length) return null;
    return el('section', { class: 'card' }, el('h2', {}, 'Consumers'), el('div', { class: 'scroll' }, el('table', {},
      el('tr', {}, el('th', {}, 'daemon'), el('th', {}, 'slots'), el('th', {}, 'held'), el('th', {}, 'lease left')),
      q.consumers.map((c) => el('tr', {}, el('td', { class: 'mono' }, c.name), el('td', {}, c.slots), el('td', {}, c.held),
        el('td', {}, c.lease_left_ms === undefined ? '–' : c.lease_left_ms <= 0 ? 'expired'
          : fmtMs(c.lease_left_ms) + (c.draining ? ' (draining)' : '')))))));
  }

  function jobDetail(j) {
    const bits = [];
    if (j.stage) bits.push('stage ' + j.stage);
    if (j.cause) bits.push(j.cause);
    if (j.due_in_ms !== undefined) bits.push('due in ' + fmtMs(j.due_in_ms));
    if (j.waiting_for) bits.push('waiting for ' + j.waiting_for);
    if (j.wake_in_ms !== undefined) bits.push('wakes in ' + fmtMs(j.wake_in_ms));
    // a person's wait: the two clocks, the machine's standing still while it waits
    if (j.human_wait_used_ms !== undefined) {
      bits.push('person ' + fmtMs(j.human_wait_used_ms) + ' used' +
        (j.human_wait_left_ms !== undefined ? ', ' + fmtMs(j.human_wait_left_ms) + ' left' : ''));
    }
    if (j.machine_used_ms !== undefined) {
      bits.push('machine ' + fmtMs(j.machine_used_ms) + ' used' +
        (j.machine_left_ms !== undefined ? ', ' + fmtMs(j.machine_left_ms) + ' left' : ''));
    }
    if (j.consumer) bits.push('on ' + j.consumer);
    if (j.error) bits.push(j.error + (j.message ? ': ' + j.message : ''));
    if (j.attempt) bits.push(`attempt ${j.attempt}, ${j.attempts_left} left`);
    return bits.join(' · ');
  }

  function jobActions(j, queue) {
    const id = j.id;
    const acts = [];
    if (j.state === 'dead') {
      acts.push(actionButton('replay:' + id, 'Replay', post('/v1/jobs/' + encodeURIComponent(id) + '/replay')));
      acts.push(actionButton('delete:' + id, 'Delete', del('/v1/queues/' + encodeURIComponent(queue) + '/dead/' + encodeURIComponent(id), true), true));
    }
    if (['queued', 'running', 'scheduled', 'waiting'].includes(j.state) && !j.cancel_requested) {
      acts.push(actionButton('cancel:' + id, 'Cancel', del('/v1/jobs/' + encodeURIComponent(id), false), true, false));
    }
    return el('span', { class: 'actions' }, acts);
  }

  function overviewPage() {
    return [el('h1', {}, 'Queues'), el('div', { class: 'grid' }, state.queues.map((q) => queueCard(q, true))), deadlinePanels()];
  }

  function queuePage(r) {
    const q = state.queues.find((x) => x.name === r.name);
    if (!q) return [el('h1', {}, r.name), el('p', {}, 'This daemon does not serve that queue.')];
    const fleet = q.store === 'fleet';
    const list = state.list;
    const jobs = list && list.status === 200 ? list.body.jobs : [];
    return [
      el('h1', {}, el('a', { href: '#/' }, 'Queues'), ' / ', q.name),
      el('div', { class: 'grid' }, queueCard(q, false),
        el('section', { class: 'card' }, el('h2', {}, 'Actions'),
          fleet ? el('div', { class: 'actions' },
            q.paused ? actionButton('resume:' + q.name, 'Resume', post('/v1/queues/' + encodeURIComponent(q.name) + '/resume'))
              : actionButton('pause:' + q.name, 'Pause', post('/v1/queues/' + encodeURIComponent(q.name) + '/pause'), true),
            actionButton('replay-dead:' + q.name, 'Replay 100 oldest dead',
              post('/v1/queues/' + encodeURIComponent(q.name) + '/dead/replay?limit=100&confirm=yes')),
            actionButton('purge:' + q.name, 'Purge 100 oldest dead',
              del('/v1/queues/' + encodeURIComponent(q.name) + '/dead?limit=100&confirm=yes', true), true))
            : el('p', { class: 'muted' }, 'Pause and the dead letter are the fleet\'s (--broker).'),
          el('p', { class: 'muted' }, 'Paused: consumers take nothing new within one renewal; waiting jobs keep ageing and expire when their freshness runs out.')),
        consumersTable(q)),
      el('section', { class: 'card' },
        el('div', { class: 'tabs' }, LIST_STATES.map((s) => el('a', { href: queueHref(q.name, s), class: s === r.state ? 'on' : '' }, s))),
        list && list.status !== 200 ? el('p', { class: 'bad' }, `listing refused: ${list.status} ${list.body.message || ''}`) : null,
        jobs.length === 0 ? el('p', { class: 'muted', 'data-empty': r.state }, 'No ' + r.state + ' jobs.') :
          el('div', { class: 'scroll' }, el('table', { 'data-list': r.state },
            el('tr', {}, el('th', {}, 'job'), el('th', {}, 'handler'), el('th', {}, 'state'), el('th', {}, 'detail'), el('th', {}, '')),
            jobs.map((j) => el('tr', { 'data-job': j.id },
              el('td', { class: 'mono' }, el('a', { href: jobHref(j.id) }, j.id.slice(0, 12) + '…')),
              el('td', {}, j.handler), el('td', {}, j.state), el('td', {}, jobDetail(j)), el('td', {}, jobActions(j, q.name)))))),
        list && list.body && list.body.next_cursor ? el('p', { class: 'muted' }, 'First 50 shown; the API walks the rest (GET /v1/jobs?cursor=…).') : null),
    ];
  }

  // Where the job's time went, from its timeline: waiting, running, its
  // freshness (the wait it could afford) and its deadline marked, and where it ran out.
  function budgetBar(j) {
    const t = j.timeline || [];
    const ev = (name) => t.find((e) => e.event === name);
    const accepted = ev('accepted') || {};
    const due = (ev('due') || {}).at_ms || 0;
    const started = ev('started');
    const finished = ev('finished');
    const nowMs = j.age_ms; // memory only: where "now" is on a job still going
    const end = finished && finished.at_ms !== undefined ? finished.at_ms
      : started && j.state === 'running' && nowMs !== undefined ? nowMs : started ? started.at_ms : nowMs ?? due;
    const freshUntil = accepted.freshness_ms !== undefined ? due + accepted.freshness_ms : null;
    const scale = Math.max(end || 0, freshUntil ?? 0, accepted.deadline_at_ms ?? 0, 1) * 1.05;
    const W = 320, H = 52;
    const x = (ms) => Math.max(0, Math.min(W, (ms / scale) * W));
    const svg = el('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'where the job\'s time went' });
    const waitEnd = started ? started.at_ms : end;
    if (waitEnd > due) {
      svg.append(el('rect', { class: 's-queue', x: x(due), y: 14, width: x(waitEnd) - x(due), height: 14 },
        el('title', {}, 'waiting ' + fmtMs(waitEnd - due))));
    }
    if (started && end > started.at_ms) {
      svg.append(el('rect', { class: 's-run', x: x(started.at_ms), y: 14, width: x(end) - x(started.at_ms), height: 14 },
        el('title', {}, 'running ' + fmtMs(end - started.at_ms))));
    }
    // A label right of its line, or left of it near the right edge.
    const label = (at, text, y) => el('text', { class: 'mark-label', x: at > W * 0.6 ? at - 2 : at + 2, y,
      'text-anchor': at > W * 0.6 ? 'end' : 'start' }, text);
    const mark = (ms, text, y) => svg.append(el('line', { class: 'mark', x1: x(ms), y1: 8, x2: x(ms), y2: 34 }),
      label(x(ms), text, y));
    if (freshUntil !== null) mark(freshUntil, 'fresh until ' + fmtMs(freshUntil), 7);
    if (accepted.deadline_at_ms !== undefined) mark(accepted.deadline_at_ms, 'deadline', 48);
    if (finished && finished.stage) {
      svg.append(label(x(end), 'ran out: ' + finished.stage, 48));
    }
    const rows = t.map((e) => {
      const bits = [];
      if (e.freshness_ms !== undefined) bits.push('fresh for ' + fmtMs(e.freshness_ms));
      if (e.deadline_at_ms !== undefined) bits.push('deadline at ' + fmtMs(e.deadline_at_ms));
      if (e.waited_ms !== undefined) bits.push('waited ' + fmtMs(e.waited_ms));
      if (e.freshness_left_ms !== undefined) bits.push(fmtMs(e.freshness_left_ms) + ' of freshness left');
      if (e.delivery !== undefined) bits.push('delivery ' + e.delivery);
      if (e.consumer) bits.push('on ' + e.consumer);
      if (e.attempt !== undefined) bits.push('attempt ' + e.attempt);
      if (e.state) bits.push(e.state);
      if (e.outcome) bits.push(e.outcome);
      if (e.stage) bits.push('stage ' + e.stage);
      if (e.run_ms !== undefined) bits.push('ran ' + fmtMs(e.run_ms));
      return el('tr', { 'data-event': e.event }, el('td', {}, e.at_ms !== undefined ? '+' + fmtMs(e.at_ms) : ''),
        el('td', {}, e.event.replace('_', ' ')), el('td', {}, bits.join(' · ')));
    });
    return [svg, el('div', { class: 'legend' }, el('span', {}, el('i', { class: 's-queue' }), 'waiting'),
      el('span', {}, el('i', { class: 's-run' }), 'running')),
    t.length ? el('table', { class: 'timeline' }, rows) : el('p', { class: 'muted' }, 'No timeline recorded for this job.')];
  }

  function jobPage(r) {
    const res = state.job;
    if (!res) return [el('p', { class: 'muted' }, 'Loading…')];
    if (res.status !== 200) return [el('h1', {}, 'Job'), el('p', {}, `GET /v1/jobs/${r.id}: ${res.status} ${res.body.message || ''}`)];
    const j = res.body;
    const queue = (state.queues[0] || {}).name || 'default';
    const fields = el('dl', { class: 'fields' });
    for (const [k, v] of Object.entries(j)) {
      if (k === 'attempts' || k === 'timeline' || k === 'result' || k === 'result_base64' || k === 'payload') continue;
      fields.append(el('dt', {}, k), el('dd', { 'data-field': k }, typeof v === 'number' && k.endsWith('_ms') ? fmtMs(v) : String(v)));
    }
    // Only the last attempts are kept: number them from the first kept one.
    const ended = j.attempt !== undefined ? j.attempt - (j.state === 'running' ? 1 : 0) : (j.attempts || []).length;
    const firstKept = Math.max(ended - (j.attempts || []).length, 0) + 1;
    const attempts = (j.attempts || []).map((a, i) => el('tr', {}, el('td', {}, firstKept + i), el('td', {}, a.outcome),
      el('td', {}, a.stage || ''), el('td', {}, a.error ? a.error + ': ' + (a.message || '') : ''), el('td', {}, fmtMs(a.run_ms))));
    return [
      el('h1', {}, el('a', { href: queueHref(queue) }, queue), ' / job ', el('span', { class: 'mono' }, j.id)),
      el('div', { class: 'grid' },
        el('section', { class: 'card' }, el('h2', {}, j.handler, ' · ', j.state), fields, el('p', {}, jobActions(j, queue))),
        el('section', { class: 'card' }, el('h2', {}, 'Where its time went'), budgetBar(j),
          attempts.length ? el('table', {}, el('tr', {}, ['#', 'outcome', 'stage', 'error', 'run'].map((h) => el('th', {}, h))), attempts) : null)),
      j.payload
        ? el('section', { class: 'card' }, el('h2', {}, 'Payload (', j.payload.content_type || 'no content type', ', ',
          j.payload.bytes + ' bytes', j.payload.base64 !== undefined ? ', base64' : '',
          j.payload.truncated ? ', the first of them' : '', ')'),
          el('pre', { class: 'payload', 'data-field': 'payload' }, j.payload.text ?? j.payload.base64))
        : null,
      j.result !== undefined || j.result_base64 !== undefined
        ? el('section', { class: 'card' }, el('h2', {}, 'Result', j.content_type ? ' (' + j.content_type + ')' : ''),
          el('pre', { class: 'payload', 'data-field': 'result' }, j.result ?? j.result_base64 + ' (base64)'))
        : null,
    ];
  }

  function render() {
    const live = document.getElementById('live');
    const age = Date.now() - state.lastOk;
    live.textContent = state.lastOk ? 'updated ' + new Date(state.lastOk).toLocaleTimeString() : 'connecting…';
    live.classList.toggle('stale', !state.lastOk || age > 3 * POLL_MS);
    const main = document.getElementById('main');
    if (state.error && !state.queues) {
      main.replaceChildren(el('p', { class: 'bad', 'data-error': '' }, state.error));
      return;
    }
    if (!state.queues) return;
    const r = state.route;
    const page = r.page === 'queue' ? queuePage(r) : r.page === 'job' ? jobPage(r) : overviewPage();
    main.replaceChildren(...[state.error ? el('p', { class: 'bad' }, state.error) : null, page].flat(Infinity).filter(Boolean));
  }

  // ---- start ----
  document.getElementById('read-token').value = tokens.read;
  document.getElementById('admin-token').value = tokens.admin;
  document.getElementById('token-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    tokens.read = document.getElementById('read-token').value.trim();
    tokens.admin = document.getElementById('admin-token').value.trim();
    sessionStorage.setItem('hg.read', tokens.read);
    sessionStorage.setItem('hg.admin', tokens.admin);
    document.getElementById('tokens').open = false;
    state.queues = null;
    poll();
  });
  window.addEventListener('hashchange', () => { state.confirm = null; state.list = null; state.job = null; poll(); });
  // Polls only while the tab is seen: a hidden dashboard costs the daemon nothing.
  setInterval(() => { if (!document.hidden && !state.busy) poll(); }, POLL_MS);
  document.addEventListener('visibilitychange', () => { if (!document.hidden) poll(); });
  poll();
})();
