// Portal's service map. Everything it shows comes through the user's own
// credentials: list, then watch, of each kind, streamed with fetch. The
// large kinds are listed from /ui/api/list, which answers from the
// server's caches in the slim form below (after the same authorization
// check the API makes), the others from the API; every kind is watched
// through the API. The DOM is updated per event, one card at a time; text
// from the cluster is only ever set with textContent, never parsed as
// markup.
'use strict';

const $ = (id) => document.getElementById(id);
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
};

let token = sessionStorage.getItem('portal-token') || '';
let scope = new URLSearchParams(location.search).get('namespace') || '';

function headers() {
  const h = { Accept: 'application/json' };
  if (token) h.Authorization = 'Bearer ' + token;
  return h;
}

async function api(path, signal) {
  const r = await fetch(path, { headers: headers(), signal, cache: 'no-store' });
  if (!r.ok) {
    let msg = r.status + ' ' + r.statusText;
    try { const b = await r.json(); if (b.message) msg = b.message; } catch (e) { /* not JSON */ }
    const err = new Error(msg);
    err.status = r.status;
    throw err;
  }
  return r.json();
}

// ---- state: slim copies of the objects, keyed "ns/name" ----

const S = {
  namespaces: new Map(), // name -> {name}
  services: new Map(),   // key -> {ns,name,type,selector,ports,clusterIP,externalName}
  pods: new Map(),       // key -> {ns,name,labels,node,phase,ready,ip}
  slices: new Map(),     // key -> {ns,name,service,ready,total}
  nodes: new Map(),      // name -> {name,ready}
  ingresses: new Map(),  // key -> {ns,name,backends:[{service,port}]}
  status: new Map(),     // service key -> {status, why}
  rates: new Map(),      // service key -> per second: {conn, refused} where a node's proxy counts, {req, err5xx} where an Ingress controller does
  byPair: new Map(),     // ns -> Map("k=v" -> Set(pod key))
};

const keyOf = (ns, name) => ns + '/' + name;

// slimmers make of each API object what the map keeps of it. For pods,
// endpointslices and services, /ui/api/list answers in the same shape.
const slimmers = {
  namespaces: (o) => ({ name: o.metadata.name }),
  services: (o) => ({
    ns: o.metadata.namespace, name: o.metadata.name,
    type: o.spec.type || 'ClusterIP', selector: o.spec.selector || null,
    clusterIP: o.spec.clusterIP || '', externalName: o.spec.externalName || '',
    ports: (o.spec.ports || []).map((p) => (p.name ? p.name + ':' : '') + p.port + '/' + (p.protocol || 'TCP')),
  }),
  pods: (o) => {
    const conds = (o.status && o.status.conditions) || [];
    const ready = conds.some((c) => c.type === 'Ready' && c.status === 'True');
    return {
      ns: o.metadata.namespace, name: o.metadata.name, labels: o.metadata.labels || {},
      node: o.spec.nodeName || '', phase: (o.status && o.status.phase) || 'Pending', ready,
      ip: (o.status && o.status.podIP) || '',
    };
  },
  endpointslices: (o) => {
    const eps = o.endpoints || [];
    return {
      ns: o.metadata.namespace, name: o.metadata.name,
      service: (o.metadata.labels || {})['kubernetes.io/service-name'] || '',
      total: eps.length,
      ready: eps.filter((e) => !e.conditions || e.conditions.ready !== false).length,
    };
  },
  nodes: (o) => ({
    name: o.metadata.name,
    ready: ((o.status && o.status.conditions) || []).some((c) => c.type === 'Ready' && c.status === 'True'),
  }),
  ingresses: (o) => {
    const backends = [];
    const add = (b) => { if (b && b.service) backends.push({ service: b.service.name, port: b.service.port ? (b.service.port.name || String(b.service.port.number)) : '' }); };
    add(o.spec.defaultBackend);
    for (const rule of o.spec.rules || []) {
      for (const p of (rule.http && rule.http.paths) || []) add(p.backend);
    }
    return { ns: o.metadata.namespace, name: o.metadata.name, backends };
  },
};

const kinds = [
  { name: 'namespaces', path: '/api/v1/namespaces', cluster: true, store: S.namespaces },
  { name: 'nodes', path: '/api/v1/nodes', cluster: true, store: S.nodes },
  { name: 'services', path: '/api/v1/services', group: '/api/v1', store: S.services, slim: true },
  { name: 'endpointslices', path: '/apis/discovery.k8s.io/v1/endpointslices', group: '/apis/discovery.k8s.io/v1', store: S.slices, slim: true },
  { name: 'pods', path: '/api/v1/pods', group: '/api/v1', store: S.pods, slim: true },
  { name: 'ingresses', path: '/apis/networking.k8s.io/v1/ingresses', group: '/apis/networking.k8s.io/v1', store: S.ingresses },
];

function kindPath(k) {
  if (k.cluster) return k.name === 'namespaces' && scope ? null : k.path;
  return scope ? k.group + '/namespaces/' + encodeURIComponent(scope) + '/' + k.name : k.path;
}

// ---- pods by label, so a Service finds its pods without a full scan ----

function indexPod(p, add) {
  let m = S.byPair.get(p.ns);
  if (!m) { m = new Map(); S.byPair.set(p.ns, m); }
  const key = keyOf(p.ns, p.name);
  for (const [k, v] of Object.entries(p.labels)) {
    const pair = k + '=' + v;
    let set = m.get(pair);
    if (add) {
      if (!set) { set = new Set(); m.set(pair, set); }
      set.add(key);
    } else if (set) {
      set.delete(key);
      if (!set.size) m.delete(pair);
    }
  }
}

function selects(sel, labels) {
  for (const [k, v] of Object.entries(sel)) if (labels[k] !== v) return false;
  return true;
}

function podsOf(svc) {
  const sel = svc.selector;
  if (!sel || !Object.keys(sel).length) return [];
  const m = S.byPair.get(svc.ns);
  if (!m) return [];
  let narrow = null;
  for (const [k, v] of Object.entries(sel)) {
    const set = m.get(k + '=' + v);
    if (!set) return [];
    if (!narrow || set.size < narrow.size) narrow = set;
  }
  const out = [];
  for (const key of narrow) {
    const p = S.pods.get(key);
    if (p && selects(sel, p.labels)) out.push(p);
  }
  return out;
}

function servicesSelecting(pod) {
  const out = [];
  for (const s of servicesIn(pod.ns)) if (s.selector && Object.keys(s.selector).length && selects(s.selector, pod.labels)) out.push(s);
  return out;
}

// slicesBySvc finds a Service's EndpointSlices without a scan of all.
const slicesBySvc = new Map(); // service key -> Map(slice key -> slice)
function sliceOf(sl) {
  const k = keyOf(sl.ns, sl.service);
  if (!slicesBySvc.has(k)) slicesBySvc.set(k, new Map());
  return slicesBySvc.get(k);
}

const svcByNs = new Map(); // ns -> Set(service key)
function servicesIn(ns) {
  const out = [];
  for (const k of svcByNs.get(ns) || []) { const s = S.services.get(k); if (s) out.push(s); }
  return out;
}

// ---- applying list items and watch events ----

let initialised = false; // before the first full render, events only fill S

function objKey(kind, o) {
  return kind === 'namespaces' || kind === 'nodes' ? o.name : keyOf(o.ns, o.name);
}

function apply(kind, type, raw) {
  applySlim(kind, type, slimmers[kind](raw));
}

function applySlim(kind, type, o) {
  const k = kinds.find((x) => x.name === kind);
  const key = objKey(kind, o);
  const old = k.store.get(key);
  if (type === 'DELETED') k.store.delete(key); else k.store.set(key, o);
  switch (kind) {
    case 'pods':
      if (old) indexPod(old, false);
      if (type !== 'DELETED') indexPod(o, true);
      if (initialised) {
        for (const s of servicesSelecting(o)) dirtySvc(keyOf(s.ns, s.name), true);
        if (old) for (const s of servicesSelecting(old)) dirtySvc(keyOf(s.ns, s.name), true);
        dirtyNs.add(o.ns);
        dirtyNodes = true;
      }
      break;
    case 'services': {
      let set = svcByNs.get(o.ns);
      if (!set) { set = new Set(); svcByNs.set(o.ns, set); }
      if (type === 'DELETED') { set.delete(key); S.status.delete(key); } else set.add(key);
      if (initialised) { dirtySvc(key, type !== 'DELETED'); dirtyNs.add(o.ns); }
      break;
    }
    case 'endpointslices':
      if (old) sliceOf(old).delete(key);
      if (type !== 'DELETED') sliceOf(o).set(key, o);
      if (initialised && o.service) dirtySvc(keyOf(o.ns, o.service), true);
      break;
    case 'ingresses':
      if (initialised) {
        dirtyNs.add(o.ns);
        for (const b of o.backends.concat(old ? old.backends : [])) dirtySvc(keyOf(o.ns, b.service), true);
      }
      break;
    case 'nodes':
      if (initialised) dirtyNodes = true;
      break;
    case 'namespaces':
      if (initialised) dirtyNs.add(o.name);
      break;
  }
  scheduleRender();
}

// PAGE bounds the objects of one list response: big enough that ten
// thousand pods are a few round trips, small enough that no response is
// more than a few MB to hold while it is parsed.
const PAGE = 2000;

const listTimings = {}; // kind -> [ms fetching and parsing, ms applying], for bench/ui

// slimList fetches a kind whole, in its slim form, from /ui/api/list.
async function slimList(k, signal) {
  const q = '/ui/api/list?kind=' + k.name + (scope ? '&namespace=' + encodeURIComponent(scope) : '');
  const reply = await api(q, signal);
  return { rv: reply.resourceVersion, items: reply.items };
}

// list fetches every object of a kind: slim ones whole, others in pages
// (see PAGE). A slim list the server cannot give (its caches not synced)
// is made from the API instead; one the user may not make is not.
async function list(k, path, signal) {
  const tm = listTimings[k.name] = [0, 0];
  if (k.slim) {
    const a = performance.now();
    let reply = null;
    try {
      reply = await slimList(k, signal);
    } catch (e) {
      if (e.status === 401 || e.status === 403 || signal.aborted) throw e;
    }
    if (reply) {
      const b = performance.now();
      for (const o of reply.items) applySlim(k.name, 'ADDED', o);
      tm[0] += b - a;
      tm[1] += performance.now() - b;
      return reply.rv;
    }
  }
  let cont = '';
  let rv = '';
  do {
    const q = '?limit=' + PAGE + (cont ? '&continue=' + encodeURIComponent(cont) : '');
    const a = performance.now();
    const page = await api(path + q, signal);
    const b = performance.now();
    for (const item of page.items || []) apply(k.name, 'ADDED', item);
    tm[0] += b - a;
    tm[1] += performance.now() - b;
    rv = page.metadata.resourceVersion;
    cont = page.metadata.continue || '';
  } while (cont);
  return rv;
}

// watch follows a kind from rv until the page stops it, re-listing when
// the server says rv is too old.
async function watch(k, path, rv, signal) {
  for (;;) {
    try {
      const r = await fetch(path + '?watch=1&allowWatchBookmarks=true&resourceVersion=' + encodeURIComponent(rv),
        { headers: headers(), signal, cache: 'no-store' });
      if (!r.ok) throw Object.assign(new Error(r.status + ' ' + r.statusText), { status: r.status });
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (!line.trim()) continue;
          const ev = JSON.parse(line);
          if (ev.type === 'ERROR') {
            if (ev.object && ev.object.code === 410) { rv = await relist(k, path, signal); }
            continue;
          }
          rv = ev.object.metadata.resourceVersion;
          if (ev.type !== 'BOOKMARK') apply(k.name, ev.type, ev.object);
        }
      }
    } catch (e) {
      if (signal.aborted) return;
      if (e.status === 401) { logout('Your token is no longer accepted; log in again.'); return; }
      await new Promise((res) => setTimeout(res, 1000));
      if (e.status === 410) rv = await relist(k, path, signal).catch(() => rv);
    }
  }
}

// relist replaces a kind's objects with a fresh list, deleting the ones
// that went while the watch was away.
async function relist(k, path, signal) {
  const before = new Map(k.store);
  const seen = new Set();
  if (k.slim) {
    const reply = await slimList(k, signal);
    for (const o of reply.items) {
      applySlim(k.name, 'MODIFIED', o);
      seen.add(objKey(k.name, o));
    }
    for (const [key, o] of before) if (!seen.has(key)) removeSlim(k, key, o);
    return reply.rv;
  }
  let cont = '';
  let rv = '';
  do {
    const page = await api(path + '?limit=' + PAGE + (cont ? '&continue=' + encodeURIComponent(cont) : ''), signal);
    for (const item of page.items || []) {
      apply(k.name, 'MODIFIED', item);
      seen.add(objKey(k.name, slimmers[k.name](item)));
    }
    rv = page.metadata.resourceVersion;
    cont = page.metadata.continue || '';
  } while (cont);
  for (const [key, o] of before) if (!seen.has(key)) removeSlim(k, key, o);
  return rv;
}

function removeSlim(k, key, o) {
  k.store.delete(key);
  if (k.name === 'pods') indexPod(o, false);
  if (k.name === 'endpointslices') sliceOf(o).delete(key);
  if (k.name === 'services') { (svcByNs.get(o.ns) || new Set()).delete(key); S.status.delete(key); dirtySvc(key, false); dirtyNs.add(o.ns); }
  scheduleRender();
}

// ---- rendering: only what changed, once per animation frame ----

const dirty = new Set(); // service keys whose card must be redrawn
const dirtyNs = new Set(); // namespaces whose header or ingresses changed
let dirtyNodes = false;
let renderQueued = false;
const cards = new Map(); // service key -> card element
const sections = new Map(); // ns -> {root, note, ingresses, services}

function dirtySvc(key, judge) {
  dirty.add(key);
  if (judge) queueStatus(key);
}

function scheduleRender() {
  if (!initialised || renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(render);
}

function render() {
  renderQueued = false;
  if (dirtyNodes) { renderNodes(); dirtyNodes = false; }
  for (const ns of dirtyNs) renderNamespace(ns);
  dirtyNs.clear();
  for (const key of dirty) renderCard(key);
  dirty.clear();
  renderSummary();
}

// insertSorted puts child among parent's children ordered by data-sort.
function insertSorted(parent, child) {
  const name = child.dataset.sort;
  for (const c of parent.children) {
    if (c.dataset.sort > name) { parent.insertBefore(child, c); return; }
  }
  parent.appendChild(child);
}

function section(ns) {
  let s = sections.get(ns);
  if (s) return s;
  const root = el('section', 'ns');
  root.dataset.sort = ns;
  root.dataset.ns = ns;
  const h = el('h2');
  h.append('namespace ', el('span', 'ns-name', ns));
  const note = el('span', 'ns-note');
  s = { root, note, ingresses: el('div', 'ingresses'), services: el('div', 'services') };
  root.append(h, note, s.ingresses, s.services);
  insertSorted($('map'), root);
  sections.set(ns, s);
  return s;
}

function renderNamespace(ns) {
  const svcs = servicesIn(ns);
  const ings = [...S.ingresses.values()].filter((i) => i.ns === ns);
  let s = sections.get(ns);
  if (!svcs.length && !ings.length && !S.namespaces.has(ns)) {
    if (s) { s.root.remove(); sections.delete(ns); }
    return;
  }
  s = section(ns);
  const selected = new Set();
  for (const svc of svcs) for (const p of podsOf(svc)) selected.add(p.name);
  let total = 0;
  for (const p of S.pods.values()) if (p.ns === ns) total++;
  const unselected = total - selected.size;
  s.root.classList.toggle('empty', !svcs.length && !ings.length && !total);
  s.note.textContent = svcs.length + ' services, ' + total + ' pods' + (unselected ? ', ' + unselected + ' behind no Service' : '');
  s.ingresses.replaceChildren(...ings.sort((a, b) => (a.name < b.name ? -1 : 1)).map(ingressCard));
}

function ingressCard(ing) {
  const c = el('div', 'ing');
  c.append(el('div', 'name', 'ingress ' + ing.name));
  for (const b of ing.backends) c.append(el('div', 'meta', '→ ' + b.service + (b.port ? ':' + b.port : '')));
  c.addEventListener('click', () => explain(ing.ns, 'ingress/' + ing.name, c));
  return c;
}

function renderCard(key) {
  const svc = S.services.get(key);
  let c = cards.get(key);
  if (!svc) { if (c) { c.remove(); cards.delete(key); } return; }
  if (!c) {
    c = newCard(svc);
    insertSorted(section(svc.ns).services, c);
    cards.set(key, c);
  }
  fillCard(c, svc);
}

function newCard(svc) {
  const c = el('div', 'svc');
  c.dataset.sort = svc.name;
  c.dataset.key = keyOf(svc.ns, svc.name);
  c.append(el('div', 'name'), el('div', 'meta'), el('div', 'why'), el('div', 'rate'), el('div', 'pods'));
  c.addEventListener('click', () => explain(svc.ns, 'svc/' + svc.name, c));
  return c;
}

function fillCard(c, svc) {
  const key = keyOf(svc.ns, svc.name);
  const st = S.status.get(key);
  c.dataset.status = st ? st.status : 'unknown';
  c.dataset.name = svc.name;
  const [name, meta, why, rate, pods] = c.children;
  name.textContent = svc.name;
  let ready = 0;
  let total = 0;
  for (const sl of (slicesBySvc.get(key) || new Map()).values()) { ready += sl.ready; total += sl.total; }
  const addr = svc.type === 'ExternalName' ? svc.externalName : svc.clusterIP;
  meta.textContent = svc.type + ' ' + addr + ' ' + svc.ports.join(' ') + ' · endpoints ' + ready + '/' + total;
  why.textContent = st ? st.why : '';
  const r = S.rates.get(key);
  rate.textContent = r ? rateText(r) : '';
  rate.className = 'rate' + (r && (r.refused > 0 || r.err5xx > 0) ? ' errors' : '');
  // The numbers, for tests and tools that read the page.
  for (const f of ['conn', 'refused', 'req', 'err5xx']) {
    if (r && r[f] !== undefined) c.dataset[f] = r[f]; else delete c.dataset[f];
  }
  const dots = podsOf(svc).map((p) => {
    const d = el('span', 'pod' + (p.ready ? ' ready' : p.phase === 'Pending' ? ' pending' : ''));
    d.title = p.name + ' on ' + (p.node || 'no node') + ' · ' + p.phase + (p.ready ? ' · ready' : ' · not ready');
    d.addEventListener('click', (e) => { e.stopPropagation(); explain(p.ns, 'pod/' + p.name, d); });
    return d;
  });
  pods.replaceChildren(...dots);
}

function renderNodes() {
  const counts = new Map();
  for (const p of S.pods.values()) if (p.node) counts.set(p.node, (counts.get(p.node) || 0) + 1);
  const chips = [...S.nodes.values()].sort((a, b) => (a.name < b.name ? -1 : 1)).map((n) => {
    const c = el('span', 'node' + (n.ready ? '' : ' notready'), n.name + ' · ' + (counts.get(n.name) || 0) + ' pods');
    c.title = n.ready ? 'Ready' : 'not Ready';
    return c;
  });
  $('node-list').replaceChildren(...chips);
}

function renderSummary() {
  const n = { ok: 0, warning: 0, broken: 0 };
  for (const st of S.status.values()) if (st.status in n) n[st.status]++;
  $('summary').textContent = S.services.size + ' services, ' + S.pods.size + ' pods, ' + S.nodes.size +
    ' nodes · ' + n.ok + ' ok, ' + n.warning + ' warning, ' + n.broken + ' broken';
}

// renderAll draws the map once after the first lists, into detached
// elements, so the browser lays it out once.
function renderAll() {
  const map = $('map');
  map.replaceChildren();
  sections.clear();
  cards.clear();
  const names = new Set([...S.namespaces.keys(), ...svcByNs.keys()]);
  for (const ns of [...names].sort()) {
    renderNamespace(ns);
    const s = sections.get(ns);
    if (!s) continue;
    const frag = document.createDocumentFragment();
    for (const svc of servicesIn(ns).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const c = newCard(svc);
      fillCard(c, svc);
      cards.set(c.dataset.key, c);
      frag.append(c);
    }
    s.services.append(frag);
  }
  renderNodes();
  renderSummary();
  // Verdicts that came before this drew; they are in the cards already.
  dirty.clear();
  dirtyNs.clear();
}

// ---- verdicts from /ui/api/status ----

const statusQueue = new Map(); // ns -> Set(service name)
let statusTimer = 0;
const deniedNoted = new Set();

function queueStatus(key) {
  const i = key.indexOf('/');
  const ns = key.slice(0, i);
  if (!statusQueue.has(ns)) statusQueue.set(ns, new Set());
  statusQueue.get(ns).add(key.slice(i + 1));
  if (!statusTimer) statusTimer = setTimeout(flushStatus, 100);
}

function flushStatus() {
  statusTimer = 0;
  const batch = new Map(statusQueue);
  statusQueue.clear();
  for (const [ns, names] of batch) {
    judge(ns, [...names]);
    // The server's caches may see a change a moment after this page's
    // watch did; judge once more a little later so the late view wins.
    setTimeout(() => judge(ns, [...names]), 1000);
  }
}

// judge asks the server for the verdict on names in ns (all when empty).
async function judge(ns, names) {
  let q = '/ui/api/status?namespace=' + encodeURIComponent(ns);
  if (names.length && names.length <= 50) for (const n of names) q += '&service=' + encodeURIComponent(n);
  let reply;
  try {
    reply = await api(q);
  } catch (e) {
    notice('status-' + ns, 'Could not judge the Services of namespace ' + ns + ': ' + e.message);
    // 503: the server's caches are still filling (a busy server); ask again.
    if (e.status === 503 && running) setTimeout(() => judge(ns, names), 1000);
    return;
  }
  clearNotice('status-' + ns);
  if (reply.denied && reply.denied.length) {
    notice('denied-' + ns, 'In namespace ' + ns + ' you may not list ' + reply.denied.join(', ') +
      '; Services were judged without them' + (reply.denied.some((d) => d === 'pods' || d === 'endpointslices') ? ' (shown grey: unknown).' : '.'));
  }
  for (const st of reply.services) {
    const key = keyOf(ns, st.name);
    const bad = (st.steps || []).find((s) => s.status !== 'ok');
    S.status.set(key, { status: st.status, why: bad ? bad.name + ': ' + bad.message : '' });
    dirty.add(key);
  }
  scheduleRender();
}

// ---- request and error rates from /ui/api/traffic ----

// The node proxies' counters only ever grow, until a proxy rewrites a
// Service's rules; two samples a few seconds apart give a rate. Polling on
// a timer, not per watch event, keeps the cost on the nodes fixed.
const trafficEvery = 5000;
let lastTraffic = null; // {at, services}
let trafficTimer = 0;

function fmtRate(x) {
  return x >= 10 ? String(Math.round(x)) : x.toFixed(1);
}

function rateText(r) {
  const parts = [];
  if (r.conn !== undefined) parts.push(fmtRate(r.conn) + ' conn/s', fmtRate(r.refused) + ' refused/s');
  if (r.req !== undefined) parts.push('ingress ' + fmtRate(r.req) + ' req/s', fmtRate(r.err5xx) + ' 5xx/s');
  return parts.join(' · ');
}

// rates returns the per-second rates between two samples of counters
// (objects of key -> counts), for the fields named; a count that went
// down is a proxy that rewrote the rules, or a restarted controller: no
// rate for this interval rather than a wrong one.
function rates(prev, cur, dt, fields, into, names) {
  for (const [key, c] of Object.entries(cur)) {
    const p = prev[key];
    if (!p || fields.some((f) => c[f] < p[f])) continue;
    if (!into.has(key)) into.set(key, {});
    const r = into.get(key);
    fields.forEach((f, i) => { r[names[i]] = (c[f] - p[f]) / dt; });
  }
}

async function pollTraffic(signal) {
  let reply;
  try {
    reply = await api('/ui/api/traffic' + (scope ? '?namespace=' + encodeURIComponent(scope) : ''), signal);
  } catch (e) {
    if (signal.aborted) return;
    if (e.status === 403) {
      notice('traffic', 'No request rates: ' + e.message);
      return; // asking again will not help
    }
    notice('traffic', 'Could not read the request rates: ' + e.message);
    trafficTimer = setTimeout(() => pollTraffic(signal), trafficEvery);
    return;
  }
  if (signal.aborted) return;
  if (reply.problems && reply.problems.length) notice('traffic', 'Request rates leave out ' + reply.problems.join('; '));
  else clearNotice('traffic');
  const now = performance.now();
  const prev = lastTraffic;
  lastTraffic = { at: now, services: reply.services || {}, ingress: reply.ingress || {} };
  const next = new Map();
  if (prev) {
    const dt = (now - prev.at) / 1000;
    rates(prev.services, lastTraffic.services, dt, ['connections', 'refused'], next, ['conn', 'refused']);
    rates(prev.ingress, lastTraffic.ingress, dt, ['requests', 'errors'], next, ['req', 'err5xx']);
  }
  for (const key of new Set([...S.rates.keys(), ...next.keys()])) {
    if (next.has(key)) S.rates.set(key, next.get(key)); else S.rates.delete(key);
    dirty.add(key);
  }
  scheduleRender();
  showDetailRate();
  trafficTimer = setTimeout(() => pollTraffic(signal), trafficEvery);
}

// showDetailRate puts the rate of the Service in the explain panel, if any.
function showDetailRate() {
  const r = detailKey && S.rates.get(detailKey);
  $('detail-rate').textContent = r ? 'traffic: ' + rateText(r) + ' (summed over the nodes that count)' : '';
}

// ---- the explain panel ----

let selected = null;
let explainSeq = 0;
let detailKey = ''; // the Service shown in the panel, "ns/name"

async function explain(ns, target, elem) {
  if (selected) selected.classList.remove('selected');
  selected = elem;
  if (elem) elem.classList.add('selected');
  const seq = ++explainSeq;
  $('detail').hidden = false;
  $('detail-title').textContent = target + ' in ' + ns;
  $('detail-status').textContent = 'diagnosing…';
  $('detail-steps').replaceChildren();
  detailKey = target.startsWith('svc/') ? keyOf(ns, target.slice(4)) : '';
  showDetailRate();
  let rep;
  try {
    rep = await api('/ui/api/explain?namespace=' + encodeURIComponent(ns) + '&target=' + encodeURIComponent(target));
  } catch (e) {
    if (seq === explainSeq) $('detail-status').textContent = 'explain failed: ' + e.message;
    return;
  }
  if (seq !== explainSeq) return;
  $('detail-title').textContent = rep.target || target;
  $('detail-status').replaceChildren(badge(rep.status));
  $('detail-steps').replaceChildren(...(rep.steps || []).map((s) => {
    const li = el('li');
    li.append(badge(s.status), el('strong', '', s.name), document.createTextNode(' ' + (s.message || '')));
    for (const ev of s.evidence || []) li.append(el('div', 'evidence', ev));
    return li;
  }));
}

function badge(status) {
  return el('span', 'badge ' + (['ok', 'warning', 'broken'].includes(status) ? status : ''), status || 'unknown');
}

// ---- notices, login, start ----

const notices = new Map();
function notice(id, text) {
  let li = notices.get(id);
  if (!li) { li = el('li'); notices.set(id, li); $('notices').append(li); }
  li.textContent = text;
}
function clearNotice(id) {
  const li = notices.get(id);
  if (li) { li.remove(); notices.delete(id); }
}

let running = null; // AbortController of the lists and watches

function logout(msg) {
  if (running) running.abort();
  running = null;
  clearTimeout(trafficTimer);
  lastTraffic = null;
  token = '';
  sessionStorage.removeItem('portal-token');
  showLogin(msg || '');
}

function showLogin(msg) {
  $('app').hidden = true;
  $('detail').hidden = true;
  $('logout').hidden = true;
  $('scope-form').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = msg;
  $('summary').textContent = '';
}

async function start() {
  try {
    // Not the API: it closes the connection under an anonymous request
    // (see package ui), and the browser may fail the next request on it.
    await api('/ui/api/whoami');
  } catch (e) {
    showLogin(e.status === 401 ? (token ? 'That token was not accepted.' : '') : 'The API did not answer: ' + e.message);
    return;
  }
  $('login').hidden = true;
  $('app').hidden = false;
  $('logout').hidden = !token;
  $('scope-form').hidden = false;
  $('scope').value = scope;
  running = new AbortController();
  const signal = running.signal;
  const t0 = performance.now();
  // The server fills its caches on the first verdict asked; ask one now,
  // while the lists load, so that colouring the map does not wait for it.
  api('/ui/api/status?namespace=' + encodeURIComponent(scope || 'default') + '&service=kubernetes').catch(() => {});
  const rvs = await Promise.all(kinds.map(async (k) => {
    const path = kindPath(k);
    if (!path) return null;
    try {
      const rv = await list(k, path, signal);
      clearNotice('list-' + k.name);
      // Verdicts come from the server, not from these lists: ask for them
      // as soon as the Services are known rather than after every list.
      if (k.name === 'services') for (const ns of svcByNs.keys()) judge(ns, []);
      return rv;
    } catch (e) {
      if (e.status === 403) {
        notice('list-' + k.name, 'You may not list ' + k.name + (k.cluster || !scope ? (k.cluster ? '' : ' in all namespaces') : ' in namespace ' + scope) +
          ' (' + e.message + ')' + (!k.cluster && !scope ? '; choose a namespace above.' : ''));
      } else {
        notice('list-' + k.name, 'Listing ' + k.name + ' failed: ' + e.message);
      }
      return null;
    }
  }));
  if (scope) S.namespaces.set(scope, { name: scope });
  const t1 = performance.now();
  renderAll();
  // The load's two parts, for bench/ui: fetching the lists, drawing them.
  window.portalTimings = { listMs: Math.round(t1 - t0), renderMs: Math.round(performance.now() - t1), kinds: listTimings };
  initialised = true;
  kinds.forEach((k, i) => { if (rvs[i] !== null) watch(k, kindPath(k), rvs[i], signal); });
  pollTraffic(signal);
  document.body.dataset.loaded = 'true';
}

$('login-form').addEventListener('submit', (e) => {
  e.preventDefault();
  token = $('token').value.trim();
  $('token').value = '';
  sessionStorage.setItem('portal-token', token);
  start();
});
$('logout').addEventListener('click', () => logout(''));
$('detail-close').addEventListener('click', () => {
  $('detail').hidden = true;
  if (selected) selected.classList.remove('selected');
  selected = null;
  detailKey = '';
});
$('scope-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const u = new URL(location.href);
  const v = $('scope').value.trim();
  if (v) u.searchParams.set('namespace', v); else u.searchParams.delete('namespace');
  location.href = u.toString();
});

start();
