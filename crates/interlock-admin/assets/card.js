// The interlock dashboard: one breaker's card (state, rates, timeline,
// config, last failure, operator buttons), opened on demand, and the
// formatting the page shares. Loaded before app.js, which drives it. No
// framework, no build step.
//
// Every piece of data (breaker names above all) reaches the DOM through
// textContent, dataset or setAttribute, never through an HTML parser.
'use strict';

window.InterlockCard = (() => {
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const CHART_H = 120;
  const BAND_H = 10;
  const PAD_TOP = 16;
  const PAD_BOTTOM = 16;
  const LOCAL_ACTIONS = [
    { path: 'force-open', label: 'Force open', cls: 'danger' },
    { path: 'disable', label: 'Disable', cls: '' },
    { path: 'metrics-only', label: 'Metrics only', cls: '' },
    { path: 'reset', label: 'Reset', cls: 'primary' },
  ];
  const FLEET_ACTIONS = [
    {
      path: 'trip', label: 'Trip fleet-wide', cls: 'danger', target: 'open',
      warning: 'Every instance will reject its calls to this dependency until the breaker recovers.',
    },
    {
      path: 'close', label: 'Close fleet-wide', cls: 'primary', target: 'closed',
      warning: 'Every instance will admit its calls to this dependency again.',
    },
  ];

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

  // Formatting shared by the table and the cards; times are ms of the
  // server's clock, `serverNow` its reading now.
  function format(serverNow, STATES, ACTION_LABELS) {
    const fmt = {
      pct(x) {
        if (typeof x !== 'number' || !isFinite(x)) return '–';
        const p = x * 100;
        return (p > 0 && p < 10 ? p.toFixed(1) : p.toFixed(0)) + '%';
      },
      secs(s) {
        if (typeof s !== 'number' || !isFinite(s)) return '–';
        if (s < 1) return Math.round(s * 1000) + ' ms';
        if (s < 60) return (Math.round(s * 10) / 10) + ' s';
        const m = Math.floor(s / 60);
        const r = Math.round(s - m * 60);
        return m + ' min' + (r ? ' ' + r + ' s' : '');
      },
      // A duration in ms, to the precision an operator needs.
      ago(ms) {
        const s = Math.max(0, Math.floor(ms / 1000));
        if (s < 60) return s + ' s';
        const m = Math.floor(s / 60);
        if (m < 60) return m + ' min' + (m < 10 && s % 60 ? ' ' + (s % 60) + ' s' : '');
        const h = Math.floor(m / 60);
        if (h < 48) return h + ' h' + (m % 60 ? ' ' + (m % 60) + ' min' : '');
        return Math.floor(h / 24) + ' d';
      },
      clockTime(t) {
        const when = new Date(Date.now() - (serverNow() - t));
        return when.toLocaleTimeString([], { hour12: false });
      },
      // The storage's clock: Unix time for Redis, an arbitrary origin otherwise.
      storageTime(ms) {
        if (!ms) return '–';
        if (ms > 946684800000) return new Date(ms).toLocaleTimeString([], { hour12: false });
        return 't = ' + fmt.secs(ms / 1000) + ' (storage clock)';
      },
      stateLabel(state) {
        return STATES[state] || String(state).toUpperCase();
      },
      badge(state) {
        const b = el('span', 'badge', fmt.stateLabel(state));
        b.dataset.state = state;
        return b;
      },
      actionLabel(action) {
        return ACTION_LABELS[action] || String(action);
      },
    };
    return fmt;
  }

  function stat(list, label) {
    const dt = el('dt', null, label);
    const dd = el('dd');
    const value = el('span', 'value', '–');
    const sub = el('span', 'sub');
    dd.append(value, sub);
    list.append(dt, dd);
    return { dd, value, sub };
  }

  function policy(fmt, p) {
    if (!p) return '–';
    switch (p.kind) {
      case 'consecutive_failures': return p.threshold + ' failures in a row';
      case 'failures_within': return p.failures + ' failures within ' + fmt.secs(p.period_secs);
      case 'consecutive_successes': return p.successes + ' successes in a row';
      default: return String(p.kind).replace(/_/g, ' ');
    }
  }

  // ctx: { fmt, serverNow(), historyMs(), controls(), fleetControls(),
  //        coordinated(), act(name, action, button), fleetAct(name, action, version, button),
  //        fetchJson(url), breakerUrl(name, suffix), onClose (optional) }
  function create(ctx, name, options) {
    const fmt = ctx.fmt;
    const compact = !!(options && options.compact);
    const root = el('article', 'card');
    root.dataset.breaker = name;
    const titleId = 'card-title-' + Math.random().toString(36).slice(2);
    root.setAttribute('aria-labelledby', titleId);

    const head = el('header', 'card-head');
    const title = el(compact ? 'h3' : 'h2', 'name', name);
    title.id = titleId;
    title.title = name;
    title.tabIndex = -1;
    const badge = el('span', 'badge');
    head.append(title, badge);
    let closeButton = null;
    if (options && options.onClose) {
      closeButton = el('button', 'close', '×');
      closeButton.type = 'button';
      closeButton.setAttribute('aria-label', 'Close the card of ' + name);
      closeButton.title = 'Close (Esc)';
      closeButton.addEventListener('click', options.onClose);
      head.append(closeButton);
    }

    const flags = el('div', 'flags');
    const stats = el('dl', 'stats');
    const failure = stat(stats, 'failure rate');
    const slow = stat(stats, 'slow calls');
    const calls = stat(stats, 'calls');
    const since = stat(stats, 'in state for');

    const chart = svg('svg', { class: 'timeline', role: 'img', height: CHART_H });
    const lastFailure = el('p', 'last-failure');
    lastFailure.hidden = true;

    const fleet = el('section', 'fleet');
    fleet.hidden = !ctx.coordinated();
    const fleetTitle = el('h4', null, 'Fleet: the shared state every instance follows');
    const fleetStats = el('dl', 'stats fleet-stats');
    const fleetState = stat(fleetStats, 'shared state');
    const fleetVersion = stat(fleetStats, 'version');
    const fleetOpened = stat(fleetStats, 'opened at');
    const fleetProbes = stat(fleetStats, 'probes this round');
    fleet.append(fleetTitle, fleetStats);

    const config = el('details', 'config');
    config.append(el('summary', null, 'config'));
    const configList = el('dl');
    config.append(configList);

    // Operator buttons: this instance's overrides, and the fleet's shared
    // state, in two clearly labelled groups.
    const localGroup = el('fieldset', 'actions local');
    localGroup.append(el('legend', null, 'This instance only (local override)'));
    for (const action of LOCAL_ACTIONS) {
      const button = el('button', action.cls, action.label);
      button.type = 'button';
      button.dataset.action = action.path;
      button.dataset.scope = 'local';
      button.setAttribute('aria-label', action.label + ' ' + name + ' on this instance');
      button.addEventListener('click', () => ctx.act(name, action, button));
      localGroup.append(button);
    }
    const fleetGroup = el('fieldset', 'actions fleet-actions');
    const fleetLegend = el('legend', null, 'Whole fleet (shared state, fenced)');
    fleetGroup.append(fleetLegend);
    const confirmBox = el('div', 'confirm');
    confirmBox.hidden = true;
    for (const action of FLEET_ACTIONS) {
      const button = el('button', action.cls, action.label);
      button.type = 'button';
      button.dataset.action = 'fleet-' + action.path;
      button.dataset.scope = 'fleet';
      button.setAttribute('aria-label', action.label + ': ' + name + ' on every instance');
      button.addEventListener('click', () => askFleet(action, button));
      fleetGroup.append(button);
    }
    fleetGroup.append(confirmBox);

    root.append(head, flags, stats, chart, lastFailure, fleet, config, localGroup, fleetGroup);

    const card = {
      name, root, title, rec: null, view: null, samples: [], events: [], createdAt: null,
      historyLoaded: false,
    };

    function askFleet(action, button) {
      const shared = card.rec && card.rec.shared;
      const version = shared ? shared.version : 0;
      confirmBox.replaceChildren(
        el('p', null, action.label.replace(' fleet-wide', '') + ' ' + name + ' for the whole fleet, at shared version v' +
          version + '? ' + action.warning),
      );
      const yes = el('button', action.cls, 'Confirm: ' + action.label.toLowerCase());
      yes.type = 'button';
      yes.dataset.action = 'confirm-fleet-' + action.path;
      const no = el('button', null, 'Cancel');
      no.type = 'button';
      yes.addEventListener('click', () => {
        confirmBox.hidden = true;
        ctx.fleetAct(name, action, version, button);
        button.focus();
      });
      no.addEventListener('click', () => { confirmBox.hidden = true; button.focus(); });
      confirmBox.append(yes, no);
      confirmBox.hidden = false;
      yes.focus();
    }

    function applyControls() {
      localGroup.hidden = !ctx.controls();
      fleetGroup.hidden = !ctx.fleetControls();
      fleet.hidden = !ctx.coordinated();
    }

    card.update = (rec) => {
      card.rec = rec;
      root.dataset.state = rec.state;
      badge.textContent = fmt.stateLabel(rec.state);
      badge.dataset.state = rec.state;
      const total = rec.calls || 0;
      failure.value.textContent = total ? fmt.pct(rec.failure_rate) : '–';
      failure.sub.textContent = 'threshold ' + fmt.pct(rec.failure_rate_threshold);
      failure.dd.classList.toggle('hot', !!(total && rec.failure_rate >= rec.failure_rate_threshold));
      slow.value.textContent = total ? fmt.pct(rec.slow_call_rate) : '–';
      const c = card.view && card.view.config;
      slow.sub.textContent = c ? 'over ' + fmt.secs(c.slow_call_duration_threshold_secs) : '';
      calls.value.textContent = String(total);
      calls.sub.textContent = (rec.failed_calls || 0) + ' failed' + (c ? ' · min ' + c.minimum_number_of_calls : '');
      card.tick();

      flags.replaceChildren();
      if (ctx.coordinated()) flags.append(el('span', 'flag', 'coordinated'));
      if (rec.degraded) flags.append(el('span', 'flag warn', 'storage degraded: running on local state'));

      const s = rec.shared;
      if (s) {
        fleetState.value.replaceChildren(fmt.badge(s.state));
        fleetVersion.value.textContent = 'v' + s.version;
        fleetOpened.value.textContent = s.state === 'closed' ? '–' : fmt.storageTime(s.opened_at);
        fleetProbes.value.textContent = s.state === 'half_open'
          ? s.probes_remaining + ' of ' + s.probes_permitted + ' left' : '–';
        fleetProbes.sub.textContent = s.state === 'half_open'
          ? s.probes_completed + ' done · ' + s.probe_failures + ' failed · ' + s.probe_slows + ' slow' : '';
        fleetLegend.textContent = 'Whole fleet (shared state, fenced at v' + s.version + ')';
      } else {
        fleetState.value.textContent = 'not read yet';
        fleetVersion.value.textContent = '–';
        fleetOpened.value.textContent = '–';
        fleetProbes.value.textContent = '–';
        fleetProbes.sub.textContent = '';
      }
      applyControls();
    };

    // Relative times move with the clock, not with the data.
    card.tick = () => {
      const rec = card.rec;
      if (!rec) return;
      since.value.textContent = fmt.ago(ctx.serverNow() - rec.state_since);
      since.sub.textContent = 'since ' + fmt.clockTime(rec.state_since);
      if (rec.retry_at !== null && rec.retry_at !== undefined) {
        since.sub.textContent = 'retry in ' + fmt.secs(Math.max(0, rec.retry_at - ctx.serverNow()) / 1000);
      }
    };

    // The rarely changing part: config and last failure.
    card.setView = (view) => {
      card.view = view;
      if (view.last_failure) {
        lastFailure.replaceChildren(
          el('span', 'label', 'last failure '),
          el('code', null, view.last_failure.message),
          el('span', 'type', ' ' + view.last_failure.type_name),
        );
        lastFailure.hidden = false;
      } else {
        lastFailure.replaceChildren();
        lastFailure.hidden = true;
      }
      const c = view.config;
      if (c) {
        const rows = [
          ['failure rate threshold', fmt.pct(c.failure_rate_threshold)],
          ['slow call rate threshold', fmt.pct(c.slow_call_rate_threshold)],
          ['slow call duration', fmt.secs(c.slow_call_duration_threshold_secs)],
          ['minimum calls', c.minimum_number_of_calls],
          ['sliding window', c.sliding_window.kind === 'count'
            ? c.sliding_window.size + ' calls' : fmt.secs(c.sliding_window.size)],
          ['wait in open', fmt.secs(c.wait_duration_in_open_secs) +
            (c.wait_duration_backoff_multiplier !== 1 ? ' × ' + c.wait_duration_backoff_multiplier : '') +
            (c.wait_duration_in_open_max_secs ? ' (max ' + fmt.secs(c.wait_duration_in_open_max_secs) + ')' : '')],
          ['probes per round', c.permitted_calls_in_half_open + ' (' + c.max_concurrent_probes + ' at once)'],
          ['stalled round abandoned after', c.max_wait_in_half_open_secs == null
            ? 'never' : fmt.secs(c.max_wait_in_half_open_secs)],
          ['trip policy', policy(fmt, c.trip_policy)],
          ['half-open policy', policy(fmt, c.half_open_policy)],
          ['auto transition', c.auto_transition ? 'on' : 'off'],
        ];
        configList.replaceChildren();
        for (const [k, value] of rows) configList.append(el('dt', null, k), el('dd', null, value));
      }
      if (card.rec) card.update(card.rec);
    };

    card.setHistory = (history) => {
      // Points that arrived live while the history was on its way stay.
      const last = history.samples.length ? history.samples[history.samples.length - 1].t : -Infinity;
      const lastEvent = history.events.length ? history.events[history.events.length - 1].t : -Infinity;
      card.samples = history.samples.concat(card.samples.filter((s) => s.t > last));
      card.events = history.events.concat(card.events.filter((e) => e.t > lastEvent));
      if (typeof history.created_at === 'number') card.createdAt = history.created_at;
      card.historyLoaded = true;
      card.draw();
    };

    // A delta row for this breaker: a point where a value changed.
    card.point = (rec, t) => {
      if (card.createdAt !== null && rec.created_at !== card.createdAt) {
        // Another breaker under the same name: a new timeline.
        card.samples = [];
        card.events = [];
      }
      card.createdAt = rec.created_at;
      const p = { t, state: rec.state, failure_rate: rec.failure_rate, slow_call_rate: rec.slow_call_rate };
      const last = card.samples[card.samples.length - 1];
      if (last && last.state === p.state && last.failure_rate === p.failure_rate &&
          last.slow_call_rate === p.slow_call_rate) return;
      card.samples.push(p);
    };

    card.event = (e) => { card.events.push(e); };

    card.prune = () => {
      const horizon = ctx.serverNow() - ctx.historyMs() - 5000;
      while (card.samples.length > 1 && card.samples[1].t < horizon) card.samples.shift();
      while (card.events.length && card.events[0].t < horizon) card.events.shift();
    };

    card.load = () => {
      ctx.fetchJson(ctx.breakerUrl(name)).then((view) => { if (view) card.setView(view); });
      ctx.fetchJson(ctx.breakerUrl(name, 'history')).then((h) => { if (h) card.setHistory(h); });
    };

    card.focus = () => title.focus();
    card.closeButton = closeButton;

    // ---- the timeline: state band, failure rate, threshold, events ------

    card.draw = () => {
      card.prune();
      const historyMs = ctx.historyMs();
      const width = Math.max(240, Math.round(chart.getBoundingClientRect().width) || 480);
      chart.setAttribute('viewBox', '0 0 ' + width + ' ' + CHART_H);
      chart.setAttribute('width', width);
      const now = ctx.serverNow();
      const t0 = now - historyMs;
      // The timeline starts when the breaker was created, not before.
      const created = card.createdAt !== null ? card.createdAt : (card.rec ? card.rec.created_at : t0);
      const start = Math.max(t0, created);
      const x = (t) => Math.max(0, Math.min(width, ((t - t0) / historyMs) * width));
      const top = PAD_TOP + BAND_H + 6;
      const bottom = CHART_H - PAD_BOTTOM;
      const y = (rate) => bottom - Math.max(0, Math.min(1, rate)) * (bottom - top);
      const nodes = [];

      for (const rate of [0, 0.5, 1]) {
        nodes.push(svg('line', { class: 'grid', x1: x(start), x2: width, y1: y(rate), y2: y(rate) }));
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
      if (start > t0) {
        const cx = x(start);
        nodes.push(svg('rect', { class: 'before', x: 0, y: PAD_TOP, width: cx, height: bottom - PAD_TOP }));
        nodes.push(svg('line', { class: 'created', x1: cx, x2: cx, y1: PAD_TOP - 2, y2: bottom }));
        const label = svg('text', { class: 'tick', x: Math.max(2, cx - 3), y: top + 10, 'text-anchor': 'end' });
        label.textContent = 'created';
        nodes.push(label);
      }
      for (const [rate, text] of [[1, '100%'], [0.5, '50%']]) {
        const label = svg('text', { class: 'tick', x: x(start) + 3, y: y(rate) + 11 });
        label.textContent = text;
        nodes.push(label);
      }

      // State band: each sample and change holds until the next one.
      const points = [];
      for (const s of card.samples) points.push({ t: Math.max(s.t, start), state: s.state });
      for (const e of card.events) if (e.to && e.t >= start) points.push({ t: e.t, state: e.to });
      if (!points.length && card.rec) points.push({ t: Math.max(card.rec.state_since, start), state: card.rec.state });
      points.sort((a, b) => a.t - b.t);
      const segments = [];
      for (const p of points) {
        const last = segments[segments.length - 1];
        if (last && last.state === p.state) continue;
        if (last) last.end = p.t;
        segments.push({ state: p.state, start: p.t, end: now });
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
      const bandLabel = svg('text', { class: 'tick', x: x(start), y: PAD_TOP - 4 });
      bandLabel.textContent = 'state';
      nodes.push(bandLabel);

      if (card.rec) {
        const ty = y(card.rec.failure_rate_threshold);
        nodes.push(svg('line', { class: 'threshold', x1: x(start), x2: width, y1: ty, y2: ty }));
      }

      // Rates as steps: a value holds until the next point.
      const visible = card.samples.filter((s, i) => {
        const next = card.samples[i + 1];
        return !next || next.t >= t0;
      });
      if (visible.length) {
        const stepLine = (key) => {
          const out = [];
          visible.forEach((s, i) => {
            const from = x(Math.max(s.t, start));
            const to = x(i + 1 < visible.length ? visible[i + 1].t : now);
            out.push(from.toFixed(1) + ',' + y(s[key]).toFixed(1), to.toFixed(1) + ',' + y(s[key]).toFixed(1));
          });
          return out;
        };
        const line = stepLine('failure_rate');
        const first = line[0].split(',')[0];
        const area = [first + ',' + bottom].concat(line, [x(now).toFixed(1) + ',' + bottom]);
        nodes.push(svg('polygon', { class: 'rate-area', points: area.join(' ') }));
        nodes.push(svg('polyline', { class: 'rate', points: line.join(' ') }));
        if (visible.some((s) => s.slow_call_rate > 0)) {
          nodes.push(svg('polyline', { class: 'slow', points: stepLine('slow_call_rate').join(' ') }));
        }
        const last = visible[visible.length - 1];
        nodes.push(svg('circle', { class: 'rate-dot', cx: x(now), cy: y(last.failure_rate), r: 2.5 }));
      }

      for (const e of card.events) {
        if (e.t < start) continue;
        const ex = x(e.t);
        if (e.kind === 'operator') {
          const mark = svg('path', {
            class: 'op-mark' + (String(e.action).startsWith('fleet_') ? ' fleet' : ''),
            d: 'M' + (ex - 4) + ',' + (PAD_TOP - 9) + ' L' + (ex + 4) + ',' + (PAD_TOP - 9) + ' L' + ex + ',' + (PAD_TOP - 2) + ' Z',
          });
          const tip = svg('title');
          tip.textContent = 'operator: ' + fmt.actionLabel(e.action);
          mark.append(tip);
          nodes.push(mark);
        } else if (e.kind === 'state_changed' && e.to) {
          nodes.push(svg('line', { class: 'change s-' + e.to, x1: ex, x2: ex, y1: PAD_TOP, y2: bottom }));
        }
      }
      chart.replaceChildren(...nodes);

      // What the picture says, for screen readers.
      const rates = visible.map((s) => s.failure_rate);
      const peak = rates.length ? Math.max(...rates) : 0;
      const rec = card.rec;
      chart.setAttribute('aria-label', name + ': ' + (rec ? fmt.stateLabel(rec.state) + ' for ' +
        fmt.ago(now - rec.state_since) + '; failure rate now ' + fmt.pct(rec.failure_rate) : '') +
        ', peak ' + fmt.pct(peak) + ' over the ' + (start > t0 ? fmt.ago(now - start) + ' since it was created'
          : 'last ' + fmt.ago(historyMs)) + '; ' + Math.max(0, segments.length - 1) + ' state changes');
    };

    applyControls();
    return card;
  }

  return { create, format };
})();
