// Tessera dashboard: keeps one row per node and replaces only the rows the server says changed.
// The server streams `state` (everything) once, then `patch` events (changed nodes, removed
// nodes, the summary's changed entries: the others stay as they were); see dashboard/server.py.
// No framework and no build step: plain DOM.
"use strict";

const rows = new Map();          // node name -> its row element
const nodesByName = new Map();   // node name -> its JSON (for the detail panel)
let summary = null;
let received = 0;                // server time (epoch s) of the last summary
let receivedAt = 0;              // our clock then

const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"})[c]);

function colour(pod) {
  // Names that differ in one character (train-0, train-1) land far apart on the hue circle.
  let h = 0;
  for (let i = 0; i < pod.length; i++) h = (h * 31 + pod.charCodeAt(i)) >>> 0;
  return `hsl(${Math.round((h * 137.508) % 360)} 60% ${48 + (h % 3) * 8}%)`;
}

const GiB = 1024 ** 3;
function bytes(n) { return n >= GiB ? `${(n / GiB).toFixed(n % GiB ? 1 : 0)} GiB` : `${Math.round(n / 1024 ** 2)} MiB`; }
function gpus(percent) { return (percent / 100).toFixed(percent % 100 ? 2 : 0); }
function duration(s) {
  s = Math.max(0, Math.round(s));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor(s / 60) % 60).padStart(2, "0")}m`;
}
function elapsed() { return received ? (Date.now() - receivedAt) / 1000 : 0; }
function serverNow() { return received + elapsed(); }
function since(t) { return t === null ? "—" : duration(serverNow() - t); }
function left(s) { return s > 0 ? `in ${duration(s)}` : "expiring…"; }
function owners(list) { return list.length ? list.join(" or ") : "—"; }
// One item per line, each unbroken: `gpu-core=50` or `labels app=x` never split at its hyphens.
function lines(items) { return items.length ? items.map((i) => `<div class="nw">${esc(i)}</div>`).join("") : "—"; }

// --- the GPU map -----------------------------------------------------------------------------
// Who holds a share: the pod, and the ResourceClaim it holds it through (DRA), if any.
function holder(s) {
  const [ns, name] = (s.pod || s.claim).split("/");
  if (!s.claim) return `${name} (${ns})`;
  const claim = s.claim.split("/")[1];
  return s.pod ? `${name} (${ns}) via claim ${claim}` : `claim ${claim} (${ns}), reserved for no pod`;
}

function gpuCell(node, g) {
  const cls = ["gpu"];
  if (!g.healthy) cls.push("unhealthy");
  else if (g.fragmented) cls.push("frag");
  if (g.nvlink !== null) cls.push(`nv${g.nvlink % 4}`);
  const lines = [`${node.name} GPU ${g.minor}${g.memory ? " · " + bytes(g.memory) : ""}`];
  if (!g.healthy) lines.push(`unhealthy: ${g.problem}`);
  let fills = "", memory = "";
  // Pods placed onto a Reservation last: next to what the Reservation still holds.
  for (const s of [...g.shares].sort((a, b) => Boolean(a.reservation) - Boolean(b.reservation))) {
    const onto = s.reservation ? ` · on Reservation ${s.reservation}` : "";
    lines.push(`${holder(s)}: gpu-core ${s.core}%, gpu-memory ${bytes(s.memory)} (${s.ratio}%)${onto}${s.partition ? ` · partition ${s.partition}` : ""}`);
    const consumed = s.reservation ? ` consumed" data-reservation="${esc(s.reservation)}` : "";
    const claim = s.claim ? ` claim" data-claim="${esc(s.claim)}` : "";
    const who = s.pod || s.claim;
    fills += `<div class="fill${consumed}${claim}" data-pod="${esc(s.pod)}" style="width:${Math.min(100, s.core)}%;background:${colour(who)}"></div>`;
    memory += `<div style="width:${Math.min(100, s.ratio)}%;background:${colour(who)}"></div>`;
  }
  for (const r of g.reserved) {
    lines.push(`reserved by ${r.reservation} for ${owners(r.owners)}: gpu-core ${r.core}%, gpu-memory ${bytes(r.memory)} (${r.ratio}%)`);
    fills += `<div class="fill reserved" data-reservation="${esc(r.reservation)}" style="width:${Math.min(100, r.core)}%"></div>`;
    memory += `<div class="reserved" style="width:${Math.min(100, r.ratio)}%"></div>`;
  }
  if (memory) fills += `<div class="mem" title="gpu-memory">${memory}</div>`;
  if (g.healthy && g.fragmented) lines.push(`${g.fragmented}% idle that no pending pod fits`);
  const xid = g.healthy ? "" : `<span class="xid">${esc(g.problem)}</span>`;
  return `<div class="${cls.join(" ")}" data-gpu="${esc(node.name)}/${g.minor}" data-healthy="${g.healthy}" title="${esc(lines.join("\n"))}">${fills}<span class="label">${g.minor}</span>${xid}</div>`;
}

function nicCell(n) {
  const used = n.shares.reduce((a, s) => a + s.vfs, 0);
  const who = n.shares.map((s) => s.pod).join(", ");
  const kept = n.reserved.map((r) => `reserved by ${r.reservation}${r.vfs ? ` (${r.vfs} VF)` : ""}`).join(", ");
  const cls = ["nic", n.healthy ? "" : "unhealthy", kept ? "reserved" : ""].filter(Boolean).join(" ");
  const vfs = n.vfs ? ` · VF ${used}/${n.vfs}` : "";
  const title = `RDMA ${n.minor}${who ? ": " + who : ""}${kept ? "; " + kept : ""}${n.healthy ? "" : " — " + n.problem}`;
  return `<span class="${cls}" data-rdma="${n.minor}" title="${esc(title)}">rdma ${n.minor}${vfs}</span>`;
}

function rowHTML(node) {
  const groups = node.groups.map((g) =>
    `<div class="switch" title="${esc(g.pcie ? "PCIe " + g.pcie : "no topology")}">${g.gpus.map((x) => gpuCell(node, x)).join("")}${g.rdma.map(nicCell).join("")}</div>`).join("");
  const nv = node.nvlink.length ? `<small>NVLink ${node.nvlink.map((g) => g.length > 2 ? `${g[0]}–${g[g.length - 1]}` : g.join(",")).join(" · ")}</small>` : "";
  const body = groups || `<span class="hint">no GPU or RDMA device</span>`;
  return `<div class="node" data-node="${esc(node.name)}"><div class="node-name" title="${esc(node.name)}">${esc(node.name)}${nv}</div><div class="switches">${body}</div></div>`;
}

function applyNodes(nodes, removed, full) {
  const map = $("map");
  if (full) {
    rows.clear(); nodesByName.clear();
    map.innerHTML = nodes.map(rowHTML).join("");
    for (const el of map.children) rows.set(el.dataset.node, el);
    for (const n of nodes) nodesByName.set(n.name, n);
    return;
  }
  for (const name of removed) { rows.get(name)?.remove(); rows.delete(name); nodesByName.delete(name); }
  for (const node of nodes) {
    const tmp = document.createElement("template");
    tmp.innerHTML = rowHTML(node);
    const el = tmp.content.firstElementChild;
    const old = rows.get(node.name);
    if (old) old.replaceWith(el);
    else {
      const after = [...rows.keys()].filter((k) => k > node.name).sort()[0];
      map.insertBefore(el, after ? rows.get(after) : null);
    }
    rows.set(node.name, el);
    nodesByName.set(node.name, node);
  }
}

function showDetail(key) {
  const [nodeName, minor] = [key.slice(0, key.lastIndexOf("/")), Number(key.slice(key.lastIndexOf("/") + 1))];
  const node = nodesByName.get(nodeName);
  const gpu = node && node.groups.flatMap((g) => g.gpus).find((g) => g.minor === minor);
  const panel = $("detail");
  if (!gpu) { panel.hidden = true; return; }
  const group = node.groups.find((g) => g.gpus.includes(gpu));
  const pods = gpu.shares.map((s) => {
    const [ns, name] = (s.pod || s.claim).split("/");
    const hints = [
      s.reservation ? `on Reservation ${esc(s.reservation)}` : "",
      s.claim ? (s.pod ? `via claim ${esc(s.claim.split("/")[1])}` : "claim, reserved for no pod") : "",
      s.partition ? `partition ${esc(s.partition)}` : "",
    ].filter(Boolean).map((h) => ` <small class="hint">${h}</small>`).join("");
    return `<tr${s.claim ? ` data-claim="${esc(s.claim)}"` : ""}><td>${esc(name)}${hints}</td><td>${esc(ns)}</td><td>${s.core}%</td><td>${bytes(s.memory)}</td></tr>`;
  });
  const kept = gpu.reserved.map((r) => `<tr class="reserved-row"><td>reserved: ${esc(r.reservation)}
    <small class="hint">for ${esc(owners(r.owners))}</small></td><td>—</td><td>${r.core}%</td><td>${bytes(r.memory)}</td></tr>`);
  const rowsHTML = [...pods, ...kept].join("") || `<tr><td colspan="4">no pod holds it</td></tr>`;
  panel.innerHTML = `<h3>${esc(nodeName)} · GPU ${gpu.minor}</h3>
    <div>${gpu.healthy ? "healthy" : `<b style="color:var(--bad)">unhealthy: ${esc(gpu.problem)}</b>`}
    · PCIe ${esc(group.pcie || "—")}${gpu.nvlink !== null ? ` · NVLink group ${gpu.nvlink}` : ""}${gpu.memory ? " · " + bytes(gpu.memory) : ""}</div>
    <table><tr><td><b>pod</b></td><td><b>namespace</b></td><td><b>gpu-core</b></td><td><b>gpu-memory</b></td></tr>${rowsHTML}</table>`;
  panel.hidden = false;
  panel.dataset.gpu = key;
}

// --- the summary pages -------------------------------------------------------------------------
function renderTotals(t) {
  const stat = (v, label, id) => `<div class="stat" id="${id}"><b>${v}</b><span>${label}</span></div>`;
  $("totals").innerHTML = [
    stat(`${t.gpus}`, `GPUs (${t.unhealthyGpus} unhealthy)`, "total-gpus"),
    stat(gpus(t.allocated), "GPUs allocated", "total-allocated"),
    stat(gpus(t.reserved), "GPUs reserved", "total-reserved"),
    stat(gpus(t.idle), "GPUs idle", "total-idle"),
    stat(gpus(t.fragmented), "GPUs fragmented", "total-fragmented"),
  ].join("");
}

function renderPending(s) {
  $("pending-count").textContent = s.pendingTotal ? `(${s.pendingTotal})` : "";
  const body = s.pending.map((p) => {
    const steps = p.steps.length
      ? p.steps.map((st) => `<div class="step"><span class="stage ${st.stage}">${st.stage}</span>${esc(st.plugin ? st.plugin + ": " : "")}${esc(st.text)}</div>`).join("")
      : "";
    const last = p.message ? `<div class="step last">last attempt: ${esc(p.message)}</div>` : "";
    const tags = [p.gang && `gang ${p.gang}`, p.quota && `quota ${p.quota}`].filter(Boolean).join(" · ");
    return `<tr data-pod="${esc(p.pod)}"><td class="age" data-age="${p.age}">${duration(p.age + elapsed())}</td>
      <td>${esc(p.pod)}${tags ? `<br><small>${esc(tags)}</small>` : ""}</td><td>${esc(p.asks)}</td>
      <td>${esc(p.queue || "—")}${p.attempts ? ` (${p.attempts} tries)` : ""}</td><td><div class="chain">${steps}${last || (steps ? "" : "not tried yet")}</div></td></tr>`;
  }).join("");
  const more = s.pendingTotal > s.pending.length ? `<tr><td colspan="5">… and ${s.pendingTotal - s.pending.length} more</td></tr>` : "";
  $("pending").innerHTML = body + more || `<tr><td colspan="5">no pod is pending</td></tr>`;
}

function renderGangs(s) {
  $("gangs").innerHTML = s.gangs.map((g) => `<tr data-gang="${esc(g.name)}"><td>${esc(g.name)}</td>
    <td>${g.minMember ?? "—"} needed</td><td>${g.bound} bound / ${g.waiting} waiting</td>
    <td class="age" data-age="${g.waiting ? g.waitingSeconds : ""}">${g.waiting ? duration(g.waitingSeconds + elapsed()) : "—"}</td>
    <td>${esc(g.phase || "—")}</td></tr>`).join("") || `<tr><td colspan="5">no gang</td></tr>`;
}

function quotaBar(r) {
  const max = r.max || Math.max(r.min || 0, r.used || 0, r.runtime || 0, 1);
  const pct = (v) => `${Math.min(100, (100 * v) / max)}%`;
  const used = r.used ?? 0;
  const min = r.min ?? 0;
  let inner = `<div class="used" style="width:${pct(Math.min(used, min))}"></div>`;
  if (used > min) inner += `<div class="borrowed" style="left:${pct(min)};width:calc(${pct(used)} - ${pct(min)})"></div>`;
  if (r.runtime !== null) inner += `<div class="runtime" style="width:${pct(r.runtime)}"></div>`;
  if (r.min !== null) inner += `<div class="min" style="left:${pct(min)}"></div>`;
  return `<div class="bar">${inner}</div>`;
}

function renderQuotas(s) {
  $("quotas").innerHTML = s.quotas.map((q) => {
    const res = q.resources.map((r) => `<div class="res"><span>${esc(r.name)}</span>
      <span>used ${r.text.used ?? "—"} · min ${r.text.min ?? "—"} · max ${r.text.max ?? "—"} · runtime ${r.text.runtime ?? "—"}</span>${quotaBar(r)}</div>`).join("");
    const problems = q.problems.map((p) => `<div class="problems">${esc(p)}</div>`).join("");
    return `<div class="quota" data-quota="${esc(q.name)}" style="margin-left:${q.depth * 24}px"><b>${esc(q.name)}</b>${q.isParent ? " <small>(parent)</small>" : ""}${res}${problems}</div>`;
  }).join("") || `<p class="hint">no ElasticQuota</p>`;
}

function phase(p) { return `<span class="phase ${esc(p)}">${esc(p)}</span>`; }
function conditionChips(conditions) {
  return conditions.map((c) => `<span class="cond ${c.status}" title="${esc([c.reason, c.message].filter(Boolean).join(": "))}">${esc(c.type)}</span>`).join("");
}

function renderReservations(s) {
  $("reservations-count").textContent = s.reservationsTotal ? `(${s.reservationsTotal})` : "";
  const body = s.reservations.map((r) => {
    const expires = r.expires === null ? (["Succeeded", "Failed", "Invalid"].includes(r.phase) ? "—" : "never")
      : left(r.expires - serverNow());
    const holds = r.holds ? `${lines(r.holds.split(" "))}${r.devices ? `<small>${esc(r.devices)}</small>` : ""}` : "—";
    const why = r.reason ? `<div class="${r.phase === "Invalid" || r.phase === "Failed" ? "error" : ""}">${esc(r.reason)}</div>` : "";
    return `<tr data-reservation="${esc(r.name)}"><td>${esc(r.name || "(no name)")}</td><td>${phase(r.phase)}</td>
      <td>${esc(r.node || "—")}</td><td>${holds}</td><td>${lines(r.owners)}</td><td>${lines(r.currentOwners)}</td>
      <td class="ttl" data-expires="${r.expires ?? ""}" title="${esc(r.expiresAt)}">${expires}</td>
      <td>${why}<div class="conds">${conditionChips(r.conditions)}</div></td></tr>`;
  }).join("");
  const more = s.reservationsTotal > s.reservations.length ? `<tr><td colspan="8">… and ${s.reservationsTotal - s.reservations.length} older ended ones</td></tr>` : "";
  $("reservations").innerHTML = body + more || `<tr><td colspan="8">no Reservation</td></tr>`;
}

function renderMigrations(s) {
  $("migrations-count").textContent = s.migrationsTotal ? `(${s.migrationsTotal})` : "";
  const body = s.migrations.map((m) => {
    const to = m.to ? `${esc(m.to)}${m.toPlanned ? " <small>(planned)</small>" : ""}` : "—";
    const rsv = m.reservation ? `${esc(m.reservation)}${m.reservationPhase ? `<br>${phase(m.reservationPhase)}` : ""}` : "—";
    const said = [m.step && m.step !== m.reason ? m.step : "", m.reason].filter(Boolean).join(" · ");
    const cls = ["Failed", "Invalid", "Aborted"].includes(m.phase) ? "error" : "";
    return `<tr data-migration="${esc(m.name)}"><td>${phase(m.phase)}${m.paused ? "<br><small>paused</small>" : ""}</td>
      <td>${esc(m.name || "(no name)")}<br><small>${esc(m.mode)}</small></td><td>${esc(m.pod || "—")}</td>
      <td class="route">${esc(m.from || "—")} → ${to}</td><td>${rsv}</td>
      <td>${said ? `<b>${esc(said)}</b>` : ""}${m.message ? `<div class="${cls}">${esc(m.message)}</div>` : ""}
        ${m.why ? `<div class="hint">why: ${esc(m.why)}</div>` : ""}<div class="conds">${conditionChips(m.conditions)}</div></td>
      <td class="age" data-created="${m.created ?? ""}">${since(m.created)}</td></tr>`;
  }).join("");
  const more = s.migrationsTotal > s.migrations.length ? `<tr><td colspan="7">… and ${s.migrationsTotal - s.migrations.length} older ended ones</td></tr>` : "";
  $("migrations").innerHTML = body + more || `<tr><td colspan="7">no PodMigrationJob</td></tr>`;
}

function renderHealth(h) {
  const el = $("health");
  if (!h) { el.innerHTML = `<p class="hint">The dashboard was not given the scheduler's metrics (--scheduler-metrics).</p>`; return; }
  const stat = (v, label, id) => `<div class="stat" id="${id}"><b>${v}</b><span>${label}</span></div>`;
  const queues = Object.entries(h.queues).map(([q, n]) => stat(n, `pending: ${q}`, `queue-${q}`));
  el.innerHTML = [
    stat(h.podsPerSecond === null ? "—" : h.podsPerSecond.toFixed(1), "pods bound / s", "pods-per-second"),
    stat(h.p99CycleSeconds === null ? "—" : `${(h.p99CycleSeconds * 1000).toFixed(1)} ms`, "p99 scheduling cycle", "p99-cycle"),
    stat(h.boundTotal, "pods bound since start", "bound-total"),
    ...queues,
  ].join("");
}

// `s` is the whole summary (full) or the entries that changed; only their sections are redrawn.
function applySummary(s, full) {
  summary = full ? s : {...summary, ...s};
  if ("now" in s) { received = s.now; receivedAt = Date.now(); }
  const has = (...keys) => full || keys.some((k) => k in s);
  if (has("totals")) renderTotals(summary.totals);
  if (has("pending", "pendingTotal")) renderPending(summary);
  if (has("gangs")) renderGangs(summary);
  if (has("quotas")) renderQuotas(summary);
  if (has("reservations", "reservationsTotal")) renderReservations(summary);
  if (has("migrations", "migrationsTotal")) renderMigrations(summary);
  if (has("health")) renderHealth(summary.health);
  if (has("problems")) $("problems").innerHTML = summary.problems.map((p) => `<div>${esc(p)}</div>`).join("");
}

function apply(doc, full) {
  applyNodes(doc.nodes, doc.removed, full);
  applySummary(doc.summary, full);
  const panel = $("detail");
  if (!panel.hidden && panel.dataset.gpu) showDetail(panel.dataset.gpu);
  document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
}

// --- pages, live stream ---------------------------------------------------------------------------
function showPage() {
  const page = (location.hash || "#map").slice(1);
  for (const el of document.querySelectorAll(".page")) el.hidden = el.id !== `page-${page}`;
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.page === page);
}

function connect() {
  const live = $("live");
  const events = new EventSource("/api/events");
  events.addEventListener("state", (e) => {
    apply(JSON.parse(e.data), true);
    live.textContent = "live"; live.className = "live on";
    // When the first full map has been painted (ms since navigation): the benchmark reads it.
    requestAnimationFrame(() => setTimeout(() => { window.tesseraFirstPaintMs ??= performance.now(); }));
  });
  events.addEventListener("patch", (e) => apply(JSON.parse(e.data), false));
  events.onerror = () => { live.textContent = "reconnecting…"; live.className = "live off"; };
}

$("map").addEventListener("click", (e) => {
  const cell = e.target.closest(".gpu");
  if (cell) showDetail(cell.dataset.gpu); else $("detail").hidden = true;
});
setInterval(() => {
  for (const el of document.querySelectorAll("td.age[data-age]")) {
    if (el.dataset.age !== "") el.textContent = duration(Number(el.dataset.age) + elapsed());
  }
  for (const el of document.querySelectorAll("td.age[data-created]")) {
    if (el.dataset.created !== "") el.textContent = since(Number(el.dataset.created));
  }
  for (const el of document.querySelectorAll("td.ttl[data-expires]")) {
    if (el.dataset.expires !== "") el.textContent = left(Number(el.dataset.expires) - serverNow());
  }
}, 1000);
window.addEventListener("hashchange", showPage);
showPage();
connect();
