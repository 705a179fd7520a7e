// The interlock dashboard: the live stream, the table (sort, filter,
// search), the cards, the operator controls. No framework, no build step,
// no CDN; card.js (loaded first) draws one breaker's card.
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
  // Sorting by state puts what needs attention first.
  const SEVERITY = { open: 0, half_open: 1, forced_open: 2, metrics_only: 3, disabled: 4, closed: 5 };
  const ACTION_LABELS = {
    force_open: 'force open',
    disable: 'disable',
    metrics_only: 'metrics only',
    reset: 'reset',
    fleet_trip: 'fleet-wide trip',
    fleet_close: 'fleet-wide close',
  };
  const MAX_ACTIVITY = 100;
  // Above this many breakers the table is the default view.
  const TABLE_ABOVE = 20;
  // The cards view shows at most this many (the first in the table's order).
  const MAX_CARDS = 24;

  // The API lives next to the page, whatever the mount point, with or
  // without a trailing slash.
  const base = location.pathname.endsWith('/') ? location.pathname : location.pathname + '/';
  const breakerUrl = (name, suffix) =>
    base + 'breakers/' + encodeURIComponent(name) + (suffix ? '/' + suffix : '');

  // Times come in milliseconds of the server's clock; only differences
  // with the server's "now" are shown.
  let clock = { server: 0, local: performance.now() };
  const serverNow = () => clock.server + (performance.now() - clock.local);
  const sync = (now) => {
    if (typeof now === 'number') clock = { server: now, local: performance.now() };
  };

  const $ = (id) => document.getElementById(id);

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  const fmt = window.InterlockCard.format(serverNow, STATES, ACTION_LABELS);

  // ---- what the page knows ----------------------------------------------

  let historyMs = 5 * 60 * 1000;
  let controls = false;
  let coordinated = false;
  let fleetControls = false;
  let received = false;
  let columns = null;
  let sharedColumns = null;
  // name -> { rec, tr, cells }
  const breakers = new Map();
  let chosenView = null; // 'table' | 'cards' once the operator picked one
  let sort = { key: 'state', dir: 1 };
  let filter = null; // a state, or null for all
  let query = '';
  let detail = null; // { name, card }
  const cardViews = new Map(); // name -> card, in the cards view
  let currentRow = null; // the row button that takes Tab (roving tabindex)

  // What the page received, for diagnostics (and the browser test).
  const stats = {
    connects: 0, inits: 0, firstInitBytes: 0, lastInitBytes: 0, messages: 0, bytes: 0, byEvent: {},
  };
  window.interlockStats = stats;
  const encoder = new TextEncoder();

  const ctx = {
    fmt,
    serverNow,
    historyMs: () => historyMs,
    controls: () => controls,
    fleetControls: () => fleetControls,
    coordinated: () => coordinated,
    breakerUrl,
    act: (name, action, button) => act(name, action, button),
    fleetAct: (name, action, version, button) => fleetAct(name, action, version, button),
    fetchJson(url) {
      return fetch(url, { headers: { Accept: 'application/json' } })
        .then((r) => (r.ok ? r.json() : null))
        .catch(() => null);
    },
  };

  function toRec(row) {
    const rec = {};
    columns.forEach((c, i) => { rec[c] = row[i]; });
    if (Array.isArray(rec.shared)) {
      const s = {};
      sharedColumns.forEach((c, i) => { s[c] = rec.shared[i]; });
      rec.shared = s;
    }
    rec.degraded = !!rec.degraded;
    return rec;
  }

  // ---- the table ------------------------------------------------------------

  const COLS = [
    { key: 'name', label: 'Name', first: 1, value: (r) => r.name },
    { key: 'state', label: 'State', first: 1, value: (r) => SEVERITY[r.state] },
    { key: 'failure_rate', label: 'Failure rate', first: -1, num: true, value: (r) => (r.calls ? r.failure_rate : -1) },
    { key: 'slow_call_rate', label: 'Slow rate', first: -1, num: true, value: (r) => (r.calls ? r.slow_call_rate : -1) },
    { key: 'calls', label: 'Calls', first: -1, num: true, value: (r) => r.calls },
    { key: 'state_since', label: 'State since', first: 1, value: (r) => r.state_since },
    { key: 'retry_at', label: 'Retry in', first: 1, value: (r) => (r.retry_at === null ? Infinity : r.retry_at) },
    { key: 'fleet_state', label: 'Fleet state', fleet: true, first: 1, value: (r) => (r.shared ? SEVERITY[r.shared.state] : 9) },
    { key: 'fleet_version', label: 'Fleet version', fleet: true, first: -1, num: true, value: (r) => (r.shared ? r.shared.version : -1) },
    { key: 'fleet_opened', label: 'Opened at', fleet: true, first: -1, value: (r) => (r.shared && r.shared.state !== 'closed' ? r.shared.opened_at : -1) },
    { key: 'fleet_probes', label: 'Probes left', fleet: true, first: -1, num: true, value: (r) => (r.shared && r.shared.state === 'half_open' ? r.shared.probes_remaining : -1) },
  ];
  const activeCols = () => COLS.filter((c) => !c.fleet || coordinated);

  function buildHead() {
    const head = $('head');
    head.replaceChildren();
    for (const col of activeCols()) {
      const th = el('th');
      th.scope = 'col';
      th.dataset.key = col.key;
      if (col.num) th.className = 'num';
      if (col.fleet) th.classList.add('fleet-col');
      const button = el('button', 'sort', col.label);
      button.type = 'button';
      button.dataset.sort = col.key;
      button.append(el('span', 'arrow'));
      button.querySelector('.arrow').setAttribute('aria-hidden', 'true');
      button.addEventListener('click', () => {
        sort = sort.key === col.key ? { key: col.key, dir: -sort.dir } : { key: col.key, dir: col.first };
        render();
      });
      th.append(button);
      head.append(th);
    }
    markSort();
  }

  function markSort() {
    for (const th of $('head').children) {
      const active = th.dataset.key === sort.key;
      if (active) th.setAttribute('aria-sort', sort.dir > 0 ? 'ascending' : 'descending');
      else th.removeAttribute('aria-sort');
      th.querySelector('.arrow').textContent = active ? (sort.dir > 0 ? ' ▲' : ' ▼') : '';
    }
  }

  function makeRow(name) {
    const tr = el('tr');
    tr.dataset.breaker = name;
    const cells = {};
    for (const col of COLS) {
      const td = el(col.key === 'name' ? 'th' : 'td');
      if (col.key === 'name') td.scope = 'row';
      if (col.num) td.className = 'num';
      if (col.fleet) td.classList.add('fleet-col');
      cells[col.key] = td;
      tr.append(td);
    }
    const open = el('button', 'open', name);
    open.type = 'button';
    open.tabIndex = -1;
    open.setAttribute('aria-expanded', 'false');
    open.setAttribute('aria-controls', 'detail');
    open.title = 'Open the card of ' + name;
    open.addEventListener('click', () => toggleDetail(name));
    open.addEventListener('focus', () => setCurrentRow(open));
    cells.name.append(open);
    cells.open = open;
    return { rec: null, tr, cells };
  }

  function setCurrentRow(button) {
    if (currentRow === button) return;
    if (currentRow) currentRow.tabIndex = -1;
    currentRow = button;
    if (button) button.tabIndex = 0;
  }

  function setText(node, text) {
    if (node.textContent !== text) node.textContent = text;
  }

  function fillRow(entry) {
    const { rec, tr, cells } = entry;
    tr.dataset.state = rec.state;
    const badge = cells.state.firstChild;
    if (!badge || badge.dataset.state !== rec.state) cells.state.replaceChildren(fmt.badge(rec.state));
    setText(cells.failure_rate, rec.calls ? fmt.pct(rec.failure_rate) : '–');
    cells.failure_rate.classList.toggle('hot', !!(rec.calls && rec.failure_rate >= rec.failure_rate_threshold));
    setText(cells.slow_call_rate, rec.calls ? fmt.pct(rec.slow_call_rate) : '–');
    setText(cells.calls, String(rec.calls));
    cells.calls.title = rec.failed_calls + ' failed, ' + rec.slow_calls + ' slow';
    const s = rec.shared;
    const fleetBadge = cells.fleet_state.firstChild;
    if (!s) setText(cells.fleet_state, '–');
    else if (!fleetBadge || fleetBadge.dataset.state !== s.state) cells.fleet_state.replaceChildren(fmt.badge(s.state));
    setText(cells.fleet_version, s ? 'v' + s.version : '–');
    setText(cells.fleet_opened, s && s.state !== 'closed' ? fmt.storageTime(s.opened_at) : '–');
    setText(cells.fleet_probes, s && s.state === 'half_open'
      ? s.probes_remaining + ' / ' + s.probes_permitted : '–');
    tr.classList.toggle('degraded', rec.degraded);
    tickRow(entry);
  }

  // The cells that move with the clock.
  function tickRow(entry) {
    const { rec, cells } = entry;
    const now = serverNow();
    setText(cells.state_since, fmt.ago(now - rec.state_since) + ' ago');
    cells.state_since.title = 'since ' + fmt.clockTime(rec.state_since);
    setText(cells.retry_at, rec.retry_at === null ? '–' : fmt.secs(Math.max(0, rec.retry_at - now) / 1000));
  }

  function matches(rec) {
    if (filter && rec.state !== filter) return false;
    return !query || rec.name.toLowerCase().includes(query);
  }

  function ordered() {
    const col = COLS.find((c) => c.key === sort.key) || COLS[0];
    const list = [];
    for (const entry of breakers.values()) if (matches(entry.rec)) list.push(entry);
    list.sort((a, b) => {
      const va = col.value(a.rec);
      const vb = col.value(b.rec);
      const c = typeof va === 'string' ? va.localeCompare(vb) : (va < vb ? -1 : va > vb ? 1 : 0);
      return c * sort.dir || a.rec.name.localeCompare(b.rec.name);
    });
    return list;
  }

  let renderQueued = false;
  function scheduleRender() {
    if (renderQueued) return;
    renderQueued = true;
    requestAnimationFrame(() => { renderQueued = false; render(); });
  }

  function currentView() {
    return chosenView || (breakers.size > TABLE_ABOVE ? 'table' : 'cards');
  }

  function render() {
    const list = ordered();
    const view = currentView();
    $('table-wrap').hidden = view !== 'table';
    $('cards').hidden = view !== 'cards';
    $('view-table').setAttribute('aria-pressed', String(view === 'table'));
    $('view-cards').setAttribute('aria-pressed', String(view === 'cards'));
    if (view === 'table') {
      const focused = document.activeElement;
      const trs = list.map((e) => e.tr);
      const rows = $('rows');
      const same = rows.children.length === trs.length && trs.every((tr, i) => rows.children[i] === tr);
      if (!same) rows.replaceChildren(...trs);
      if (focused && focused !== document.activeElement && focused.isConnected) focused.focus();
      if (!currentRow || !currentRow.isConnected) setCurrentRow(trs.length ? list[0].cells.open : null);
      $('table').setAttribute('aria-rowcount', String(list.length + 1));
      $('no-match').hidden = list.length > 0 || breakers.size === 0;
    } else {
      renderCards(list);
    }
    markSort();
    filters();
    const shown = $('shown');
    const text = list.length === breakers.size
      ? 'Showing all ' + breakers.size
      : 'Showing ' + list.length + ' of ' + breakers.size;
    setText(shown, view === 'cards' && list.length > MAX_CARDS
      ? text + ' (cards for the first ' + MAX_CARDS + ')' : text);
    summary();
  }

  function renderCards(list) {
    const grid = $('cards');
    const wanted = list.slice(0, MAX_CARDS);
    const names = new Set(wanted.map((e) => e.rec.name));
    for (const [name, card] of cardViews) {
      if (!names.has(name)) { card.root.remove(); cardViews.delete(name); }
    }
    const nodes = wanted.map((entry) => {
      let card = cardViews.get(entry.rec.name);
      if (!card) {
        card = window.InterlockCard.create(ctx, entry.rec.name, { compact: true });
        cardViews.set(entry.rec.name, card);
        card.update(entry.rec);
        card.load();
      }
      return card.root;
    });
    const same = grid.children.length === nodes.length && nodes.every((n, i) => grid.children[i] === n);
    if (!same) grid.replaceChildren(...nodes);
    $('no-match').hidden = list.length > 0 || breakers.size === 0;
    drawCards();
  }

  // ---- filters, search, view -------------------------------------------------

  function filters() {
    const counts = {};
    for (const entry of breakers.values()) counts[entry.rec.state] = (counts[entry.rec.state] || 0) + 1;
    const box = $('filters');
    const want = [[null, 'All', breakers.size]];
    for (const state of Object.keys(STATES)) {
      if (counts[state] || filter === state) want.push([state, STATES[state].toLowerCase(), counts[state] || 0]);
    }
    const key = want.map((w) => w.join(':')).join('|') + '#' + filter;
    if (box.dataset.key === key) return;
    box.dataset.key = key;
    const focusedState = document.activeElement && document.activeElement.parentNode === box
      ? document.activeElement.dataset.state : undefined;
    box.replaceChildren();
    for (const [state, label, count] of want) {
      const button = el('button', 'filter' + (state ? ' s-' + state : ''));
      button.type = 'button';
      button.dataset.state = state || 'all';
      button.setAttribute('aria-pressed', String(filter === state));
      button.append(el('span', null, label), el('span', 'count', String(count)));
      button.addEventListener('click', () => {
        filter = state;
        render();
      });
      box.append(button);
      if (focusedState === button.dataset.state) button.focus();
    }
  }

  let searchTimer = null;
  $('search').addEventListener('input', () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      query = $('search').value.trim().toLowerCase();
      render();
    }, 80);
  });
  $('view-table').addEventListener('click', () => { chosenView = 'table'; render(); });
  $('view-cards').addEventListener('click', () => { chosenView = 'cards'; render(); });

  // Arrow keys move between rows; Tab leaves the table (one tab stop).
  $('rows').addEventListener('keydown', (event) => {
    const buttons = [...$('rows').querySelectorAll('button.open')];
    const i = buttons.indexOf(document.activeElement);
    if (i < 0) return;
    const page = Math.max(1, Math.floor($('table-wrap').clientHeight / 36) - 1);
    const target = {
      ArrowDown: i + 1, ArrowUp: i - 1, Home: 0, End: buttons.length - 1,
      PageDown: i + page, PageUp: i - page,
    }[event.key];
    if (target === undefined) return;
    event.preventDefault();
    const next = buttons[Math.max(0, Math.min(buttons.length - 1, target))];
    next.focus();
    next.scrollIntoView({ block: 'nearest' });
  });

  // ---- the card opened from the table ---------------------------------------

  function toggleDetail(name) {
    if (detail && detail.name === name) closeDetail();
    else openDetail(name);
  }

  function openDetail(name) {
    const entry = breakers.get(name);
    if (!entry) return;
    if (detail) closeDetail(false);
    const card = window.InterlockCard.create(ctx, name, { onClose: () => closeDetail() });
    detail = { name, card };
    const aside = $('detail');
    aside.replaceChildren(card.root);
    aside.hidden = false;
    entry.cells.open.setAttribute('aria-expanded', 'true');
    entry.tr.classList.add('selected');
    card.update(entry.rec);
    card.load();
    card.draw();
    card.focus();
  }

  function closeDetail(restoreFocus = true) {
    if (!detail) return;
    const entry = breakers.get(detail.name);
    $('detail').hidden = true;
    $('detail').replaceChildren();
    detail = null;
    if (entry) {
      entry.cells.open.setAttribute('aria-expanded', 'false');
      entry.tr.classList.remove('selected');
      if (restoreFocus) { setCurrentRow(entry.cells.open); entry.cells.open.focus(); }
    }
  }

  $('detail').addEventListener('keydown', (event) => {
    if (event.key === 'Escape') { event.preventDefault(); closeDetail(); }
  });

  // Every card on the page (the opened one and the cards view).
  function* allCards() {
    if (detail) yield detail.card;
    yield* cardViews.values();
  }

  function drawCards() {
    for (const card of allCards()) { card.tick(); card.draw(); }
  }

  // ---- header: summary, connection, notices -------------------------------------

  function summary() {
    const counts = {};
    for (const entry of breakers.values()) counts[entry.rec.state] = (counts[entry.rec.state] || 0) + 1;
    const box = $('summary');
    const parts = [breakers.size + (breakers.size === 1 ? ' breaker' : ' breakers')];
    for (const state of ['open', 'half_open', 'forced_open']) {
      if (counts[state]) parts.push(counts[state] + ' ' + STATES[state].toLowerCase());
    }
    const text = parts.join(' · ');
    if (box.textContent !== text) box.textContent = text;
    $('empty').hidden = !received || breakers.size > 0;
    $('board').hidden = !received || breakers.size === 0;
    $('connecting').hidden = received;
  }

  function connection(status, text) {
    $('conn').dataset.status = status;
    setText($('conn-text'), text);
  }

  let noticeTimer = null;
  function notice(text, kind) {
    const n = $('notice');
    n.textContent = text;
    n.dataset.kind = kind || '';
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(() => { n.textContent = ''; }, 8000);
  }

  function applyControls() {
    const operator = $('operator');
    operator.dataset.controls = controls ? 'on' : 'off';
    $('token').hidden = !controls;
    operator.querySelector('label').textContent = controls
      ? 'Operator token' : 'Read-only: no operator token is configured on the server';
    $('fleet-note').hidden = !coordinated;
    $('table').classList.toggle('with-fleet', coordinated);
  }

  function token() {
    const value = $('token').value.trim();
    if (!value) {
      notice('Enter the operator token first: nothing was sent', 'error');
      $('token').focus();
    }
    return value;
  }

  async function post(url, value) {
    return fetch(url, {
      method: 'POST',
      headers: { Authorization: 'Bearer ' + value, Accept: 'application/json' },
    });
  }

  async function act(name, action, button) {
    const value = token();
    if (!value) return;
    button.disabled = true;
    try {
      const response = await post(breakerUrl(name, action.path), value);
      if (response.ok) {
        const view = await response.json();
        applyView(name, view);
        notice(action.label + ' on this instance: ' + name, 'ok');
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

  async function fleetAct(name, action, version, button) {
    const value = token();
    if (!value) return;
    button.disabled = true;
    try {
      const url = breakerUrl(name, 'fleet/' + action.path) + '?version=' + encodeURIComponent(version);
      const response = await post(url, value);
      const body = await response.json().catch(() => ({}));
      if (body.breaker) applyView(name, body.breaker);
      if (response.status === 200) {
        notice(action.label + ' ' + name + ': ' + body.message, body.applied ? 'ok' : '');
      } else if (response.status === 401) {
        notice('Wrong operator token: nothing changed', 'error');
      } else if (response.status === 409) {
        notice(name + ': ' + body.message, 'error');
      } else {
        notice(action.label + ' ' + name + ' failed (' + response.status + '): ' + (body.error || ''), 'error');
      }
    } catch (err) {
      notice(action.label + ' failed: ' + err.message, 'error');
    } finally {
      button.disabled = false;
    }
  }

  // A breaker's full view (an action's answer): what the row shows of it.
  function applyView(name, view) {
    const entry = breakers.get(name);
    if (!entry || !view) return;
    Object.assign(entry.rec, {
      state: view.state,
      state_since: view.state_since,
      shared: view.shared || null,
      degraded: !!view.is_degraded,
    });
    fillRow(entry);
    for (const card of allCards()) {
      if (card.name === name) { card.setView(view); card.update(entry.rec); card.draw(); }
    }
    scheduleRender();
  }

  // ---- the activity log -------------------------------------------------------

  function describe(e) {
    switch (e.kind) {
      case 'state_changed': return fmt.stateLabel(e.from) + ' → ' + fmt.stateLabel(e.to);
      case 'operator': return 'operator: ' + fmt.actionLabel(e.action) +
        ' (' + fmt.stateLabel(e.from) + ' → ' + fmt.stateLabel(e.to) + ')' + (e.detail ? ' · ' + e.detail : '');
      case 'reset': return 'reset';
      case 'storage_degraded': return 'storage degraded: ' + (e.detail || '');
      case 'storage_recovered': return 'storage recovered';
      case 'removed': return 'removed from the registry';
      default: return String(e.kind).replace(/_/g, ' ');
    }
  }

  function logEntry(e) {
    const li = el('li', 'k-' + e.kind);
    if (e.to) li.dataset.to = e.to;
    if (e.action) li.dataset.action = e.action;
    li.append(
      el('time', null, fmt.clockTime(e.t)),
      el('span', 'name', e.breaker),
      el('span', 'what', describe(e)),
    );
    const list = $('activity');
    list.prepend(li);
    while (list.children.length > MAX_ACTIVITY) list.lastElementChild.remove();
  }

  // ---- the stream ---------------------------------------------------------------

  function upsert(rec) {
    let entry = breakers.get(rec.name);
    const fresh = !entry;
    if (fresh) {
      entry = makeRow(rec.name);
      breakers.set(rec.name, entry);
    }
    entry.rec = rec;
    fillRow(entry);
    return fresh;
  }

  function remove(name) {
    const entry = breakers.get(name);
    if (!entry) return;
    if (detail && detail.name === name) {
      closeDetail(false);
      notice(name + ' was removed from the registry', '');
    }
    const card = cardViews.get(name);
    if (card) { card.root.remove(); cardViews.delete(name); }
    if (currentRow === entry.cells.open) currentRow = null;
    entry.tr.remove();
    breakers.delete(name);
  }

  function onInit(data) {
    sync(data.now);
    historyMs = Math.max(1000, (data.history_secs || 300) * 1000);
    controls = !!data.controls;
    coordinated = !!data.coordinated;
    fleetControls = !!data.fleet_controls;
    columns = data.columns;
    sharedColumns = data.shared_columns;
    const names = new Set();
    for (const row of data.breakers || []) {
      const rec = toRec(row);
      names.add(rec.name);
      upsert(rec);
    }
    for (const name of [...breakers.keys()]) if (!names.has(name)) remove(name);
    received = true;
    buildHead();
    applyControls();
    $('activity').replaceChildren();
    for (const e of data.activity || []) logEntry(e);
    for (const card of allCards()) {
      const entry = breakers.get(card.name);
      if (entry) { card.update(entry.rec); card.load(); }
    }
    render();
  }

  function onDelta(data) {
    sync(data.now);
    let added = false;
    for (const row of data.changed || []) {
      const rec = toRec(row);
      added = upsert(rec) || added;
      for (const card of allCards()) {
        if (card.name !== rec.name) continue;
        card.point(rec, data.now);
        card.update(rec);
        if (!card.viewAt || performance.now() - card.viewAt > 2000) {
          card.viewAt = performance.now();
          ctx.fetchJson(breakerUrl(rec.name)).then((v) => { if (v) card.setView(v); });
        }
      }
    }
    if (added) summary();
    scheduleRender();
  }

  function onEvent(e) {
    sync(e.now);
    logEntry(e);
    if (e.kind === 'removed') {
      remove(e.breaker);
      scheduleRender();
      return;
    }
    const entry = breakers.get(e.breaker);
    if (!entry) return;
    if (e.to && e.kind === 'state_changed') {
      entry.rec.state = e.to;
      entry.rec.state_since = e.t;
      if (e.to !== 'open') entry.rec.retry_at = null;
      fillRow(entry);
    }
    for (const card of allCards()) {
      if (card.name !== e.breaker) continue;
      card.event(e);
      card.update(entry.rec);
      card.draw();
    }
    entry.tr.classList.remove('flash');
    void entry.tr.offsetWidth;
    entry.tr.classList.add('flash');
    scheduleRender();
  }

  function handler(fn, init) {
    return (message) => {
      const bytes = encoder.encode(message.data).length;
      stats.messages += 1;
      stats.bytes += bytes;
      stats.byEvent[message.type] = (stats.byEvent[message.type] || 0) + bytes;
      if (init) {
        stats.inits += 1;
        stats.lastInitBytes = bytes;
        if (stats.inits === 1) stats.firstInitBytes = bytes;
      }
      let data;
      try { data = JSON.parse(message.data); } catch (_) { return; }
      fn(data);
    };
  }

  let source = null;
  function connect() {
    if (source) return;
    stats.connects += 1;
    connection('connecting', received ? 'reconnecting…' : 'connecting…');
    source = new EventSource(base + 'events');
    source.addEventListener('open', () => connection('live', 'live'));
    source.addEventListener('error', () => connection('down', 'reconnecting…'));
    source.addEventListener('init', handler((d) => { connection('live', 'live'); onInit(d); }, true));
    source.addEventListener('delta', handler(onDelta));
    source.addEventListener('event', handler(onEvent));
  }

  function disconnect() {
    if (!source) return;
    source.close();
    source = null;
  }

  // A tab in the background costs nothing: no stream, no timers. Back in
  // front, it reconnects and starts from a fresh snapshot.
  let ticker = null;
  function start() {
    connect();
    if (!ticker) ticker = setInterval(tick, 1000);
  }
  function stop() {
    disconnect();
    clearInterval(ticker);
    ticker = null;
    connection('paused', 'paused while the tab is hidden');
  }
  document.addEventListener('visibilitychange', () => (document.hidden ? stop() : start()));
  window.addEventListener('pagehide', disconnect);
  window.addEventListener('pageshow', (event) => { if (event.persisted && !document.hidden) start(); });

  function tick() {
    if ($('table-wrap').hidden === false) {
      for (const tr of $('rows').children) {
        const entry = breakers.get(tr.dataset.breaker);
        if (entry) tickRow(entry);
      }
    }
    drawCards();
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
    for (const s of box.querySelectorAll('.swatch')) s.setAttribute('aria-hidden', 'true');
  }

  legend();
  summary();
  if (document.hidden) connection('paused', 'paused while the tab is hidden');
  else start();
  window.addEventListener('resize', () => requestAnimationFrame(drawCards));
})();
