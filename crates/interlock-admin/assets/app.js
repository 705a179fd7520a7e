// The interlock dashboard. No framework, no build step, no CDN.
//
// Every piece of data (breaker names above all) reaches the DOM through
// textContent, dataset or setAttribute, never through an HTML parser.
'use strict';

(() => {
  const STATES = {
    closed: 'CLOSED',
    open: 'OPEN',
    half_open: 'HALF OPEN',
    forced_open: 'FORCED OPEN',
    disabled: 'DISABLED',
    metrics_only: 'METRICS ONLY',
  };
  const ACTIONS = [
    { path: 'force-open', label: 'Force open', cls: 'danger' },
    { path: 'disable', label: 'Disable', cls: '' },
    { path: 'metrics-only', label: 'Metrics only', cls: '' },
    { path: 'reset', label: 'Reset', cls: 'primary' },
  ];
  const ACTION_LABELS = {
    force_open: 'force open',
    disable: 'disable',
    metrics_only: 'metrics only',
    reset: 'reset',
  };
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const CHART_H = 120;
  const BAND_H = 10;
  const PAD_TOP = 16;
  const PAD_BOTTOM = 16;
  const MAX_ACTIVITY = 100;

  // The API lives next to the page, whatever the mount point, with or
  // without a trailing slash.
  const base = location.pathname.endsWith('/') ? location.pathname : location.pathname + '/';
  const breakerUrl = (name, action) =>
    base + 'breakers/' + encodeURIComponent(name) + (action ? '/' + action : '');

  // Times come in milliseconds of the server's clock; only differences
  // with the server's "now" are shown.
  let clock = { server: 0, local: performance.now() };
  const serverNow = () => clock.server + (performance.now() - clock.local);
  const sync = (now) => {
    if (typeof now === 'number') clock = { server: now, local: performance.now() };
  };

  let historyMs = 5 * 60 * 1000;
  let controls = false;
  const cards = new Map();
  const $ = (id) => document.getElementById(id);
  const grid = $('breakers');

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function svg(tag, attrs) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    return node;
  }

  function pct(x) {
    if (typeof x !== 'number' || !isFinite(x)) return '–';
    const p = x * 100;
    return (p > 0 && p < 10 ? p.toFixed(1) : p.toFixed(0)) + '%';
  }

  function secs(s) {
    if (typeof s !== 'number' || !isFinite(s)) return '–';
    if (s < 1) return Math.round(s * 1000) + ' ms';
    if (s < 60) return (Math.round(s * 10) / 10) + ' s';
    const m = Math.floor(s / 60);
    const r = Math.round(s - m * 60);
    return m + ' min' + (r ? ' ' + r + ' s' : '');
  }


  function clockTime(t) {
    const when = new Date(Date.now() - (serverNow() - t));
    return when.toLocaleTimeString([], { hour12: false });
  }

  function stateLabel(state) {
    return STATES[state] || String(state).toUpperCase();
  }

  // ---- one card per breaker -------------------------------------------

  function stat(list, label) {
    const dt = el('dt', null, label);
    const dd = el('dd');
    const value = el('span', 'value', '–');
    const sub = el('span', 'sub');
    dd.append(value, sub);
    list.append(dt, dd);
    return { dd, value, sub };
  }

  function makeCard(name) {
    const root = el('article', 'card');
    root.dataset.breaker = name;

    const head = el('header', 'card-head');
    const title = el('h3', 'name', name);
    title.title = name;
    const badge = el('span', 'badge');
    head.append(title, badge);

    const flags = el('div', 'flags');

    const stats = el('dl', 'stats');
    const failure = stat(stats, 'failure rate');
    const slow = stat(stats, 'slow calls');
    const calls = stat(stats, 'calls');
    const retry = stat(stats, 'retry in');

    const chart = svg('svg', { class: 'timeline', role: 'img', height: CHART_H });
    const chartLabel = name + ': state and failure rate over time';
    chart.setAttribute('aria-label', chartLabel);

    const lastFailure = el('p', 'last-failure');

    const config = el('details', 'config');
    config.append(el('summary', null, 'config'));
    const configList = el('dl');
    config.append(configList);

    const actions = el('div', 'actions');
    for (const action of ACTIONS) {
      const button = el('button', action.cls, action.label);
      button.type = 'button';
      button.dataset.action = action.path;
      button.addEventListener('click', () => act(name, action, button));
      actions.append(button);
    }
    actions.hidden = !controls;

    root.append(head, flags, stats, chart, lastFailure, config, actions);
    grid.append(root);
    $('empty').hidden = true;

    const card = {
      name, root, badge, flags, failure, slow, calls, retry, chart, lastFailure,
      configList, actions, view: null, config: null, samples: [], events: [],
    };
    cards.set(name, card);
    return card;
  }

  function cardFor(name) {
    let card = cards.get(name);
    if (!card) {
      card = makeCard(name);
      // Learn its config (samples carry only what changes).
      fetch(breakerUrl(name), { headers: { Accept: 'application/json' } })
        .then((r) => (r.ok ? r.json() : null))
        .then((view) => { if (view) { updateView(card, view); draw(card); } })
        .catch(() => {});
    }
    return card;
  }

  function setState(card, state) {
    card.state = state;
    card.root.dataset.state = state;
    card.badge.textContent = stateLabel(state);
    card.badge.dataset.state = state;
    summary();
  }

  function updateView(card, view) {
    card.view = Object.assign(card.view || {}, view);
    if (view.config) card.config = view.config;
    const v = card.view;
    setState(card, v.state);

    const snapshot = v.snapshot || {};
    const c = card.config;
    const total = snapshot.total_calls || 0;
    card.failure.value.textContent = total ? pct(v.failure_rate) : '–';
    card.failure.sub.textContent = c ? 'threshold ' + pct(c.failure_rate_threshold) : '';
    card.failure.dd.classList.toggle('hot', !!(c && total && v.failure_rate >= c.failure_rate_threshold));
    card.slow.value.textContent = total ? pct(v.slow_call_rate) : '–';
    card.slow.sub.textContent = c ? 'over ' + secs(c.slow_call_duration_threshold_secs) : '';
    card.calls.value.textContent = String(total);
    card.calls.sub.textContent = (snapshot.failed_calls || 0) + ' failed' +
      (c ? ' · min ' + c.minimum_number_of_calls : '');
    const retry = v.retry_after_secs;
    card.retry.value.textContent = retry === null || retry === undefined ? '–' : secs(retry);
    card.retry.sub.textContent = c ? 'wait ' + secs(c.wait_duration_in_open_secs) : '';

    card.flags.replaceChildren();
    if (v.is_coordinated) card.flags.append(el('span', 'flag', 'coordinated'));
    if (v.is_degraded) card.flags.append(el('span', 'flag warn', 'storage degraded'));
    if (v.shared) card.flags.append(el('span', 'flag', 'shared: ' + stateLabel(v.shared.state)));

    if (v.last_failure) {
      card.lastFailure.replaceChildren(
        el('span', 'label', 'last failure '),
        el('code', null, v.last_failure.message),
        el('span', 'type', ' ' + v.last_failure.type_name),
      );
      card.lastFailure.hidden = false;
    } else {
      card.lastFailure.replaceChildren();
      card.lastFailure.hidden = true;
    }

    if (view.config) {
      const c = view.config;
      const rows = [
        ['failure rate threshold', pct(c.failure_rate_threshold)],
        ['slow call rate threshold', pct(c.slow_call_rate_threshold)],
        ['slow call duration', secs(c.slow_call_duration_threshold_secs)],
        ['minimum calls', c.minimum_number_of_calls],
        ['sliding window', c.sliding_window.kind === 'count'
          ? c.sliding_window.size + ' calls' : secs(c.sliding_window.size)],
        ['wait in open', secs(c.wait_duration_in_open_secs) +
          (c.wait_duration_backoff_multiplier !== 1 ? ' × ' + c.wait_duration_backoff_multiplier : '') +
          (c.wait_duration_in_open_max_secs ? ' (max ' + secs(c.wait_duration_in_open_max_secs) + ')' : '')],
        ['probes per round', c.permitted_calls_in_half_open + ' (' + c.max_concurrent_probes + ' at once)'],
        ['trip policy', policy(c.trip_policy)],
        ['half-open policy', policy(c.half_open_policy)],
        ['auto transition', c.auto_transition ? 'on' : 'off'],
      ];
      card.configList.replaceChildren();
      for (const [k, value] of rows) card.configList.append(el('dt', null, k), el('dd', null, value));
    }
  }

  function policy(p) {
    if (!p) return '–';
    switch (p.kind) {
      case 'consecutive_failures': return p.threshold + ' failures in a row';
      case 'failures_within': return p.failures + ' failures within ' + secs(p.period_secs);
      case 'consecutive_successes': return p.successes + ' successes in a row';
      default: return String(p.kind).replace(/_/g, ' ');
    }
  }

  function prune(card) {
    const horizon = serverNow() - historyMs - 5000;
    while (card.samples.length && card.samples[0].t < horizon) card.samples.shift();
    while (card.events.length > 1 && card.events[1].t < horizon) card.events.shift();
  }

  // ---- the timeline: state band, failure rate, threshold, events --------

  function draw(card) {
    const chart = card.chart;
    const width = Math.max(240, Math.round(chart.getBoundingClientRect().width) || 480);
    chart.setAttribute('viewBox', '0 0 ' + width + ' ' + CHART_H);
    chart.setAttribute('width', width);
    const now = serverNow();
    const t0 = now - historyMs;
    const x = (t) => Math.max(0, Math.min(width, ((t - t0) / historyMs) * width));
    const top = PAD_TOP + BAND_H + 6;
    const bottom = CHART_H - PAD_BOTTOM;
    const y = (rate) => bottom - Math.max(0, Math.min(1, rate)) * (bottom - top);
    const nodes = [];

    // Grid: 0, 50, 100 % and one line per minute.
    for (const rate of [0, 0.5, 1]) {
      nodes.push(svg('line', { class: 'grid', x1: 0, x2: width, y1: y(rate), y2: y(rate) }));
    }
    const step = historyMs > 20 * 60000 ? 10 * 60000 : historyMs > 6 * 60000 ? 2 * 60000 : 60000;
    for (let back = step; back < historyMs; back += step) {
      const gx = x(now - back);
      nodes.push(svg('line', { class: 'grid', x1: gx, x2: gx, y1: PAD_TOP, y2: bottom }));
      const label = svg('text', { class: 'tick', x: gx, y: CHART_H - 3, 'text-anchor': 'middle' });
      label.textContent = '−' + Math.round(back / 60000) + ' min';
      nodes.push(label);
    }
    const nowLabel = svg('text', { class: 'tick', x: width - 2, y: CHART_H - 3, 'text-anchor': 'end' });
    nowLabel.textContent = 'now';
    nodes.push(nowLabel);
    for (const [rate, text] of [[1, '100%'], [0.5, '50%']]) {
      const label = svg('text', { class: 'tick', x: 3, y: y(rate) + 11 });
      label.textContent = text;
      nodes.push(label);
    }

    // State band (and a faint tint of the chart) from samples and changes.
    const points = [];
    for (const s of card.samples) points.push({ t: s.t, state: s.state });
    for (const e of card.events) if (e.to) points.push({ t: e.t, state: e.to });
    points.sort((a, b) => a.t - b.t);
    if (points.length) {
      // Consecutive points in the same state make one segment.
      const segments = [];
      for (const p of points) {
        const last = segments[segments.length - 1];
        if (last && last.state === p.state) continue;
        if (last) last.end = p.t;
        segments.push({ state: p.state, start: p.t, end: now });
      }
      const first = card.events.find((e) => e.from && e.t <= points[0].t + 1);
      if (first && points[0].t > t0) {
        // Before the first point: the state the first change came from.
        segments.unshift({ state: first.from, start: t0, end: points[0].t });
      }
      for (const seg of segments) {
        if (seg.end < t0 || seg.end <= seg.start) continue;
        const x1 = x(seg.start);
        const w = Math.max(1, x(seg.end) - x1);
        nodes.push(svg('rect', { class: 'band s-' + seg.state, x: x1, y: PAD_TOP, width: w, height: BAND_H, rx: 1.5 }));
        if (seg.state !== 'closed') {
          nodes.push(svg('rect', { class: 'tint s-' + seg.state, x: x1, y: top, width: w, height: bottom - top }));
        }
      }
    }
    const bandLabel = svg('text', { class: 'tick', x: 0, y: PAD_TOP - 4 });
    bandLabel.textContent = 'state';
    nodes.push(bandLabel);

    // Failure-rate threshold.
    if (card.config) {
      const ty = y(card.config.failure_rate_threshold);
      nodes.push(svg('line', { class: 'threshold', x1: 0, x2: width, y1: ty, y2: ty }));
    }

    // Failure rate (area + line) and slow-call rate (dashed).
    const visible = card.samples.filter((s) => s.t >= t0 - 2000);
    if (visible.length) {
      const line = visible.map((s) => x(s.t).toFixed(1) + ',' + y(s.failure_rate).toFixed(1));
      const area = [x(visible[0].t).toFixed(1) + ',' + bottom].concat(line,
        [x(visible[visible.length - 1].t).toFixed(1) + ',' + bottom]);
      nodes.push(svg('polygon', { class: 'rate-area', points: area.join(' ') }));
      nodes.push(svg('polyline', { class: 'rate', points: line.join(' ') }));
      if (visible.some((s) => s.slow_call_rate > 0)) {
        const slow = visible.map((s) => x(s.t).toFixed(1) + ',' + y(s.slow_call_rate).toFixed(1));
        nodes.push(svg('polyline', { class: 'slow', points: slow.join(' ') }));
      }
      const last = visible[visible.length - 1];
      nodes.push(svg('circle', { class: 'rate-dot', cx: x(last.t), cy: y(last.failure_rate), r: 2.5 }));
    }

    // Transitions and operator actions.
    for (const e of card.events) {
      if (e.t < t0) continue;
      const ex = x(e.t);
      if (e.kind === 'operator') {
        const mark = svg('path', {
          class: 'op-mark',
          d: 'M' + (ex - 4) + ',' + (PAD_TOP - 9) + ' L' + (ex + 4) + ',' + (PAD_TOP - 9) + ' L' + ex + ',' + (PAD_TOP - 2) + ' Z',
        });
        const tip = svg('title');
        tip.textContent = 'operator: ' + (ACTION_LABELS[e.action] || e.action);
        mark.append(tip);
        nodes.push(mark);
      } else if (e.kind === 'state_changed' && e.to) {
        nodes.push(svg('line', { class: 'change s-' + e.to, x1: ex, x2: ex, y1: PAD_TOP, y2: bottom }));
      }
    }
    chart.replaceChildren(...nodes);
  }

  let drawQueued = false;
  function drawAll() {
    if (drawQueued) return;
    drawQueued = true;
    requestAnimationFrame(() => {
      drawQueued = false;
      for (const card of cards.values()) { prune(card); draw(card); }
    });
  }

  // ---- header: summary, connection, operator token ---------------------

  function summary() {
    const counts = {};
    for (const card of cards.values()) counts[card.state] = (counts[card.state] || 0) + 1;
    const box = $('summary');
    box.replaceChildren(el('span', 'count', cards.size + (cards.size === 1 ? ' breaker' : ' breakers')));
    for (const state of Object.keys(STATES)) {
      if (!counts[state]) continue;
      const chip = el('span', 'chip s-' + state, counts[state] + ' ' + STATES[state].toLowerCase());
      box.append(chip);
    }
    $('empty').hidden = cards.size > 0;
  }

  function connection(status, text) {
    $('conn').dataset.status = status;
    $('conn-text').textContent = text;
  }

  let noticeTimer = null;
  function notice(text, kind) {
    const n = $('notice');
    n.textContent = text;
    n.dataset.kind = kind || '';
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(() => { n.textContent = ''; }, 6000);
  }

  function applyControls() {
    const operator = $('operator');
    operator.dataset.controls = controls ? 'on' : 'off';
    $('token').hidden = !controls;
    operator.querySelector('label').textContent = controls
      ? 'Operator token' : 'Read-only: no operator token is configured on the server';
    for (const card of cards.values()) card.actions.hidden = !controls;
  }

  async function act(name, action, button) {
    const token = $('token').value.trim();
    if (!token) {
      notice('Enter the operator token first', 'error');
      $('token').focus();
      return;
    }
    button.disabled = true;
    try {
      const response = await fetch(breakerUrl(name, action.path), {
        method: 'POST',
        headers: { Authorization: 'Bearer ' + token, Accept: 'application/json' },
      });
      if (response.ok) {
        const view = await response.json();
        const card = cards.get(name);
        if (card) { updateView(card, view); draw(card); }
        notice(action.label + ': ' + name, 'ok');
      } else if (response.status === 401) {
        notice('Wrong operator token: nothing changed', 'error');
      } else if (response.status === 404) {
        notice('No such breaker: ' + name, 'error');
      } else {
        notice(action.label + ' failed (' + response.status + ')', 'error');
      }
    } catch (err) {
      notice(action.label + ' failed: ' + err.message, 'error');
    } finally {
      button.disabled = false;
    }
  }

  // ---- the activity log -------------------------------------------------

  function describe(e) {
    switch (e.kind) {
      case 'state_changed': return stateLabel(e.from) + ' → ' + stateLabel(e.to);
      case 'operator': return 'operator: ' + (ACTION_LABELS[e.action] || e.action) +
        ' (' + stateLabel(e.from) + ' → ' + stateLabel(e.to) + ')';
      case 'reset': return 'reset';
      case 'storage_degraded': return 'storage degraded: ' + (e.detail || '');
      case 'storage_recovered': return 'storage recovered';
      default: return String(e.kind).replace(/_/g, ' ');
    }
  }

  function logEntry(e) {
    const li = el('li', 'k-' + e.kind);
    if (e.to) li.dataset.to = e.to;
    li.append(
      el('time', null, clockTime(e.t)),
      el('span', 'name', e.breaker),
      el('span', 'what', describe(e)),
    );
    const list = $('activity');
    list.prepend(li);
    while (list.children.length > MAX_ACTIVITY) list.lastElementChild.remove();
  }

  // ---- the stream ---------------------------------------------------------

  function onInit(data) {
    sync(data.now);
    historyMs = Math.max(1000, (data.history_secs || 300) * 1000);
    controls = !!data.controls;
    for (const b of data.breakers || []) {
      const card = cards.get(b.name) || makeCard(b.name);
      const history = b.history || { samples: [], events: [] };
      delete b.history;
      card.samples = history.samples || [];
      card.events = history.events || [];
      updateView(card, b);
    }
    applyControls();
    $('activity').replaceChildren();
    for (const e of data.activity || []) logEntry(e);
    summary();
    drawAll();
  }

  function onSample(data) {
    sync(data.now);
    for (const b of data.breakers || []) {
      const card = cardFor(b.name);
      card.samples.push({
        t: data.now, state: b.state, failure_rate: b.failure_rate,
        slow_call_rate: b.slow_call_rate, calls: (b.snapshot || {}).total_calls || 0,
      });
      updateView(card, b);
    }
    drawAll();
  }

  function onEvent(e) {
    sync(e.now);
    const card = cardFor(e.breaker);
    card.events.push(e);
    if (e.to) setState(card, e.to);
    if (e.kind === 'state_changed' || e.kind === 'operator') {
      card.root.classList.remove('flash');
      void card.root.offsetWidth;
      card.root.classList.add('flash');
    }
    logEntry(e);
    drawAll();
  }

  function parse(handler) {
    return (message) => {
      let data;
      try { data = JSON.parse(message.data); } catch (_) { return; }
      handler(data);
    };
  }

  function connect() {
    const source = new EventSource(base + 'events');
    source.addEventListener('open', () => connection('live', 'live'));
    source.addEventListener('error', () => connection('down', 'reconnecting…'));
    source.addEventListener('init', parse((d) => { connection('live', 'live'); onInit(d); }));
    source.addEventListener('sample', parse(onSample));
    source.addEventListener('event', parse(onEvent));
  }

  function legend() {
    const box = $('legend');
    for (const state of Object.keys(STATES)) {
      const item = el('span', 'item');
      item.append(el('span', 'swatch s-' + state), el('span', null, STATES[state].toLowerCase()));
      box.append(item);
    }
    const rate = el('span', 'item');
    rate.append(el('span', 'swatch line'), el('span', null, 'failure rate'));
    const threshold = el('span', 'item');
    threshold.append(el('span', 'swatch dashed'), el('span', null, 'threshold'));
    const op = el('span', 'item');
    op.append(el('span', 'swatch op'), el('span', null, 'operator action'));
    box.append(rate, threshold, op);
  }

  legend();
  summary();
  connect();
  setInterval(drawAll, 1000);
  window.addEventListener('resize', drawAll);
})();
