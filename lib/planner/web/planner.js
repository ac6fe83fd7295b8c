// The capacity planner in the browser: the generic formulas of lib.planner.counts, lib.planner.cache and lib.planner.serving, line for
// line, and a small form. Family quirks are not here: lib.planner.cli.planner_html embeds the presets' normalised
// descriptions (lib.planner.cli.normalised), read once in Python. tests/test_planner_node.py runs these functions
// under Node against lib.sizing.
// tests/browser/test_planner.py fills the form in Chromium and compares every output with lib.sizing.
// Units: GB = 1e9 bytes, GiB = 2^30 bytes (lib/constants.py); bytes per element as lib.constants.BYTES_PER_DTYPE.
(function () {
  "use strict";
  const GB = 1e9, GiB = 2 ** 30, KiB = 2 ** 10;

  function planner(BYTES_PER_DTYPE) {
    function bytesPerElement(dtype) {
      if (!(dtype in BYTES_PER_DTYPE)) throw new Error("unknown dtype " + dtype);
      return BYTES_PER_DTYPE[dtype];
    }
    // lib.planner.config.ModelConfig.is_moe_layer
    function isMoeLayer(c, i) {
      if (!(c.n_routed_experts > 0)) return false;
      if (c.moe_layers) return c.moe_layers[i];
      return i >= c.first_dense_layers && i % c.moe_layer_freq === 0;
    }
    // lib.planner.config.ModelConfig.windows: each layer's window (null: full attention)
    function windows(c) {
      if (c.layer_windows && c.layer_windows.length === c.n_layers) return c.layer_windows;
      return Array(c.n_layers).fill(c.sliding_window || null);
    }
    function linear(dIn, dOut, bias) { return dIn * dOut + (bias ? dOut : 0); }
    function ffnParams(c, dff) {
      return (c.gated ? 2 : 1) * linear(c.d_model, dff, c.mlp_bias) + linear(dff, c.d_model, c.mlp_bias);
    }
    // lib.planner.counts.attention_parameters: [one layer, of which key/value projections]
    function attentionParams(c) {
      const d = c.d_model, h = c.n_heads;
      if (c.kv_lora_rank) {
        const qk = c.qk_nope_head_dim + c.qk_rope_head_dim;
        const q = c.q_lora_rank ? d * c.q_lora_rank + c.q_lora_rank + c.q_lora_rank * h * qk : d * h * qk;
        const kvDown = d * (c.kv_lora_rank + c.qk_rope_head_dim);
        const kvUp = c.kv_lora_rank * h * (c.qk_nope_head_dim + c.v_head_dim);
        return [q + kvDown + c.kv_lora_rank + kvUp + h * c.v_head_dim * d, 0];
      }
      const w = h * c.head_dim, wkv = c.n_kv_heads * c.head_dim;
      const kv = 2 * linear(d, wkv, c.qkv_bias);
      const qkNorm = c.qk_norm === "head" ? 2 * c.head_dim : c.qk_norm === "projection" ? w + wkv : 0;
      return [linear(d, w, c.qkv_bias) + kv + linear(w, d, c.o_bias) + qkNorm, kv];
    }
    // lib.planner.counts._ffn_layer: [parameters, of which one token uses]
    function ffnLayer(c, i) {
      if (!isMoeLayer(c, i)) { const n = ffnParams(c, c.d_ff); return [n, n]; }
      const expert = ffnParams(c, c.moe_d_ff);
      let always = c.d_model * c.n_routed_experts;
      if (c.shared_d_ff) always += ffnParams(c, c.shared_d_ff) + (c.shared_gate ? c.d_model : 0);
      return [always + c.n_routed_experts * expert, always + c.n_experts_per_tok * expert];
    }
    // lib.planner.counts.parameter_count
    function parameterCount(c) {
      const d = c.d_model, norm = d * (c.norm_bias ? 2 : 1);
      const [attn, kv] = attentionParams(c);
      let ffn = 0, ffnActive = 0;
      for (let i = 0; i < c.n_layers; i++) { const [t, a] = ffnLayer(c, i); ffn += t; ffnActive += a; }
      const embedding = c.vocab_size * d + c.n_positions * d;
      const lmHead = c.tie_embeddings ? 0 : c.vocab_size * d;
      const norms = c.n_layers * c.norms_per_layer * norm + norm;
      const total = embedding + lmHead + c.n_layers * attn + ffn + norms;
      return { total: total, active: total - ffn + ffnActive, kvProjection: c.n_layers * kv };
    }
    // lib.planner.cache.kv_elements_per_token_layer x bytes
    function kvBytesPerTokenLayer(c, kvDtype) {
      const p = bytesPerElement(kvDtype);
      if (c.kv_lora_rank) return (c.kv_lora_rank + c.qk_rope_head_dim) * p;
      return 2 * c.n_kv_heads * c.head_dim * p;
    }
    // lib.planner.cache.model_kv_bytes_per_token (eq. kv-bytes; MLA: L (d_c + d_R) p)
    function kvBytesPerToken(c, kvDtype) { return c.n_layers * kvBytesPerTokenLayer(c, kvDtype); }
    function cachedTokens(context, window) { return window ? Math.min(context, window) : context; }
    // lib.planner.cache.cached_token_layers: sum over layers of min(n, w_i)
    function cachedTokenLayers(c, context) {
      return windows(c).reduce((s, w) => s + cachedTokens(context, w), 0);
    }
    // lib.planner.cache.model_kv_bytes_per_sequence
    function kvBytesPerSequence(c, context, kvDtype) {
      return kvBytesPerTokenLayer(c, kvDtype) * cachedTokenLayers(c, context);
    }
    // lib.planner.serving.valid_tp_degrees
    function validTpDegrees(h, hkv, maxDegree) {
      const out = [];
      for (let t = 1; t <= maxDegree; t++) if (h % t === 0 && (hkv % t === 0 || t % hkv === 0)) out.push(t);
      return out;
    }
    // lib.planner.serving._kv_share: [fraction of a token's cache on one GPU, key/value replication]
    function kvShare(c, t) {
      if (c.kv_lora_rank) return [1, t];
      const rep = Math.max(1, Math.floor(t / c.n_kv_heads));
      return [rep / t, rep];
    }
    // lib.planner.serving.tp_layout
    function tpLayout(c, t, dtype, kvDtype, replicateWeights) {
      const params = parameterCount(c), p = bytesPerElement(dtype);
      const [share, rep] = kvShare(c, t);
      const kvRep = c.kv_lora_rank ? 1 : rep;
      const w = replicateWeights ? params.total * p
        : (params.total - params.kvProjection + params.kvProjection * kvRep) * p / t;
      return { weightBytesPerGpu: w, kvBytesPerTokenPerGpu: kvBytesPerToken(c, kvDtype) * share };
    }
    // lib.planner.serving.plan_gpus with one pipeline stage (a fixed overhead per GPU)
    function planGpus(c, o) {
      const usable = o.memoryFraction * o.gpuMemoryBytes - o.overheadBytes;
      if (!(usable > 0)) throw new Error("nothing is left per GPU after the overhead");
      const kvSeq = kvBytesPerSequence(c, o.context, o.kvDtype);
      const kvTotal = kvSeq * o.users;
      const weights = parameterCount(c).total * bytesPerElement(o.dtype);
      const naive = Math.max(1, Math.ceil((weights + kvTotal) / o.gpuMemoryBytes));
      let best = null;
      for (const t of validTpDegrees(c.n_heads, c.n_kv_heads, o.maxTp || 64)) {
        const lay = tpLayout(c, t, o.dtype, o.kvDtype, o.replicateWeights);
        const room = usable - lay.weightBytesPerGpu, perSeq = kvSeq * kvShare(c, t)[0];
        if (room < perSeq) continue;
        const seqs = Math.floor(room / perSeq), replicas = Math.ceil(o.users / seqs);
        const plan = { gpus: replicas * t, tpDegree: t, replicas: replicas, sequencesPerReplica: seqs, naive: naive };
        if (best === null || plan.gpus < best.gpus) best = plan;
      }
      if (best === null) throw new Error("the model does not fit on any tensor-parallel group up to " + (o.maxTp || 64));
      return { plan: best, weightsBytes: weights, kvTotalBytes: kvTotal, cached: cachedTokenLayers(c, o.context) };
    }
    return { bytesPerElement, parameterCount, kvBytesPerToken, cachedTokens, cachedTokenLayers, kvBytesPerSequence,
      validTpDegrees, tpLayout, planGpus, windows };
  }

  const FIELDS = [
    ["n_layers", "layers L"], ["d_model", "d_model"], ["n_heads", "query heads h"], ["n_kv_heads", "key/value heads"],
    ["head_dim", "head_dim d_k"], ["d_ff", "d_ff"], ["vocab_size", "vocabulary n_vocab"],
    ["sliding_window", "sliding window (0: none)"], ["kv_lora_rank", "latent width d_c (0: not MLA)"],
  ];
  const WORKLOAD = [["context", "context (tokens)", 4096], ["users", "concurrent sequences", 1],
    ["gpu_memory", "GPU memory", 80], ["memory_fraction", "usable fraction", 0.9], ["overhead", "overhead per GPU (GB)", 0]];

  function fmt(x, digits) { return x.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits }); }

  function mount(root) {
    const data = JSON.parse(root.getAttribute("data-planner"));
    const P = planner(data.bytes_per_dtype);
    const presets = data.presets;
    let cfg = Object.assign({}, presets[Object.keys(presets)[0]]);
    const el = (tag, attrs, text) => {
      const e = document.createElement(tag);
      for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
      if (text !== undefined) e.textContent = text;
      return e;
    };
    const form = el("form", { class: "planner-form" });
    form.addEventListener("submit", (ev) => ev.preventDefault());
    const row = (label, input) => { const l = el("label", {}, label + " "); l.appendChild(input); form.appendChild(l); };
    const select = (name, options, value) => {
      const s = el("select", { name: name, id: "planner-" + name });
      for (const o of options) { const op = el("option", { value: o }, o); if (o === value) op.selected = true; s.appendChild(op); }
      return s;
    };
    row("model", select("preset", Object.keys(presets), Object.keys(presets)[0]));
    for (const [name, label] of FIELDS) row(label, el("input", { type: "number", name: name, id: "planner-" + name, min: 0 }));
    for (const [name, label, value] of WORKLOAD) {
      row(label, el("input", { type: "number", name: name, id: "planner-" + name, value: value, step: "any", min: 0 }));
    }
    row("unit", select("gpu_unit", ["GB", "GiB"], "GB"));
    const dtypes = Object.keys(data.bytes_per_dtype);
    row("weights", select("dtype", dtypes, "bf16"));
    row("cache", select("kv_dtype", dtypes, "bf16"));
    root.appendChild(form);
    const out = el("table", { class: "planner-out" });
    root.appendChild(out);
    const OUT = [["params_total", "parameters (total)"], ["params_active", "parameters (active per token)"],
      ["weights", "weights"], ["kv_token", "KV cache per token"], ["kv_total", "KV cache, all sequences"],
      ["total", "weights + cache"], ["naive", "naive GPU count"], ["gpus", "GPUs (serving rules)"],
      ["layout", "layout"], ["error", "problem"]];
    const cells = {};
    for (const [key, label] of OUT) {
      const tr = el("tr"); tr.appendChild(el("th", {}, label));
      const td = el("td", { id: "planner-out-" + key }); tr.appendChild(td); out.appendChild(tr); cells[key] = td;
    }
    const input = (name) => form.querySelector("[name=" + name + "]");
    function loadPreset() {
      cfg = Object.assign({}, presets[input("preset").value]);
      for (const [name] of FIELDS) input(name).value = cfg[name] || 0;
    }
    function set(key, text, value) {
      cells[key].textContent = text;
      if (value === undefined) cells[key].removeAttribute("data-value"); else cells[key].setAttribute("data-value", String(value));
    }
    const bytesText = (b) => fmt(b, 0) + " B = " + fmt(b / GB, 2) + " GB = " + fmt(b / GiB, 2) + " GiB";
    function update() {
      for (const key in cells) set(key, "");
      try {
        const c = Object.assign({}, cfg);
        for (const [name] of FIELDS) {
          const v = Number(input(name).value);
          if (!Number.isInteger(v) || v < 0) throw new Error(name + " must be a whole number, got " + input(name).value);
          c[name] = v;
        }
        for (const name of ["n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff", "vocab_size"]) {
          if (c[name] < 1) throw new Error(name + " must be positive");
        }
        if (c.n_heads % c.n_kv_heads) throw new Error(c.n_heads + " query heads are not divisible by " + c.n_kv_heads + " key/value heads");
        c.sliding_window = c.sliding_window || null;
        for (const key of ["layer_windows", "moe_layers"]) {
          if (c[key] && c[key].length !== c.n_layers) {
            throw new Error("this preset's layers differ (" + key + " has " + c[key].length + " entries): keep its " +
              c[key].length + " layers");
          }
        }
        // a per-layer pattern keeps its shape: its windowed layers take the window entered (0: none)
        if (c.layer_windows) c.layer_windows = c.layer_windows.map((w) => (w ? c.sliding_window : null));
        c.kv_lora_rank = c.kv_lora_rank || null;
        if (c.kv_lora_rank && !c.qk_rope_head_dim) throw new Error("latent attention needs the preset's rotary width");
        const num = (name) => Number(input(name).value);
        const o = {
          context: num("context"), users: num("users"), memoryFraction: num("memory_fraction"),
          gpuMemoryBytes: Math.round(num("gpu_memory") * (input("gpu_unit").value === "GiB" ? GiB : GB)),
          overheadBytes: num("overhead") * GB, dtype: input("dtype").value, kvDtype: input("kv_dtype").value,
        };
        if (!Number.isInteger(o.context) || o.context < 1) throw new Error("context must be a positive whole number");
        if (!Number.isInteger(o.users) || o.users < 1) throw new Error("users must be a positive whole number");
        if (!(o.memoryFraction > 0 && o.memoryFraction <= 1)) throw new Error("usable fraction must be in (0, 1]");
        if (!(o.gpuMemoryBytes > 0)) throw new Error("GPU memory must be positive");
        if (!(o.overheadBytes >= 0)) throw new Error("overhead must not be negative");
        const p = P.parameterCount(c);
        set("params_total", fmt(p.total, 0), p.total);
        set("params_active", fmt(p.active, 0), p.active);
        const kvTok = P.kvBytesPerToken(c, o.kvDtype);
        set("kv_token", fmt(kvTok, 0) + " B = " + fmt(kvTok / KiB, 2) + " KiB", kvTok);
        const r = P.planGpus(c, o);
        set("weights", bytesText(r.weightsBytes), r.weightsBytes);
        set("kv_total", bytesText(r.kvTotalBytes) + " (" + r.cached + " token-layers cached per sequence)", r.kvTotalBytes);
        set("total", bytesText(r.weightsBytes + r.kvTotalBytes), r.weightsBytes + r.kvTotalBytes);
        set("naive", String(r.plan.naive), r.plan.naive);
        set("gpus", String(r.plan.gpus), r.plan.gpus);
        set("layout", r.plan.replicas + " replica(s) x tensor-parallel " + r.plan.tpDegree + ", " +
          r.plan.sequencesPerReplica + " sequences per replica", r.plan.tpDegree);
      } catch (err) {
        set("error", String(err.message || err));
      }
    }
    input("preset").addEventListener("change", () => { loadPreset(); update(); });
    form.addEventListener("input", update);
    form.addEventListener("change", update);
    loadPreset();
    update();
    root.planner = P;
  }

  if (typeof module !== "undefined" && module.exports) { module.exports = planner; return; }  // Node (tests)
  window.transformerPlanner = planner;
  document.querySelectorAll("[data-planner]").forEach((root) => { if (!root.planner) mount(root); });
})();
