// The capacity planner in the browser: the generic formulas of lib.planner.counts, lib.planner.cache,
// lib.planner.serving and, for a training step, lib.planner.training and lib.planner.train_cli, line for line,
// and a small form. Family quirks are not here: lib.planner.cli.planner_html embeds the presets' normalised
// descriptions (lib.planner.cli.normalised), read once in Python; the same functions run under Node and in a
// browser against the Python planner, number for number. The form starts from the command line's defaults
// (lib.planner.cli.serving_web_data: H100-80GB at the total vLLM divides up, vLLM's activation peak and non-torch
// memory, max_num_seqs, the sliding-window reservation) and gives the command line's plan and verdict.
// Units: GB = 1e9 bytes, GiB = 2^30 bytes (lib/constants.py); bytes per element as lib.constants.BYTES_PER_DTYPE.
(function () {
  "use strict";
  const GB = 1e9, GiB = 2 ** 30, KiB = 2 ** 10;

  // BYTES_PER_DTYPE: lib.constants.BYTES_PER_DTYPE; SERVING: lib.planner.cli.serving_web_data() (presets, vLLM's
  // defaults and figures), needed by the serving plan only
  function planner(BYTES_PER_DTYPE, SERVING) {
    const SV = SERVING || {};
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
      return { total: total, active: total - ffn + ffnActive, kvProjection: c.n_layers * kv,
        attention: c.n_layers * attn, ffn: ffn };
    }
    // lib.planner.counts.layer_parameters: attention, feed-forward block and norms of layer i
    function layerParams(c, i) {
      return attentionParams(c)[0] + ffnLayer(c, i)[0] + c.norms_per_layer * c.d_model * (c.norm_bias ? 2 : 1);
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
    // lib.planner.quant.for_dtype's layouts (--dtype fp8, int8, int4): bytes per parameter of a d x d matrix with
    // its scales (Quantisation.tensor_bytes((d, d)) / d^2); null for a 16- or 32-bit dtype
    function quantRate(dtype, d) {
      const n = d * d;
      if (dtype === "fp8") return (n + 4) / n;  // fp8, one fp32 scale per matrix
      if (dtype === "int8") return (n + d * 4) / n;  // int8, one fp32 scale per output row
      if (dtype === "int4") return (n * 4 / 8 + d * Math.ceil(d / 128) * (2 + 4 / 8)) / n;  // AWQ: groups of 128
      return null;
    }
    // lib.planner.serving._search with one pipeline stage over the hand-read description (_plan, _stage_loads):
    // o.overhead(t) the bytes subtracted per GPU (default o.overheadBytes), o.tokensFor(w) the tokens a layer of
    // window w holds per sequence (default min(context, w)), o.seqCap the engine's max_num_seqs (null: none),
    // o.layerRate the bytes per decoder-layer parameter of quantised matrices (o.weightsBytes the whole model's)
    function search(c, o) {
      const p = bytesPerElement(o.dtype), pLayer = o.layerRate == null ? p : o.layerRate;
      const params = parameterCount(c);
      const weights = o.weightsBytes == null ? params.total * p : o.weightsBytes;
      const kvSeq = kvBytesPerSequence(c, o.context, o.kvDtype);
      const kvTotal = kvSeq * o.users;
      const naive = Math.max(1, Math.ceil((weights + kvTotal) / o.gpuMemoryBytes));
      const overhead = o.overhead || (() => o.overheadBytes);
      const tokensFor = o.tokensFor || ((w) => cachedTokens(o.context, w));
      const [, kvLayer] = attentionParams(c), norm = c.d_model * (c.norm_bias ? 2 : 1);
      const norms = c.norms_per_layer * norm * c.n_layers;
      let layers = 0;
      for (let i = 0; i < c.n_layers; i++) layers += layerParams(c, i);
      const embed = c.vocab_size * c.d_model + c.n_positions * c.d_model, head = c.vocab_size * c.d_model;
      const tokens = windows(c).reduce((s, w) => s + tokensFor(w), 0);
      const perLayerKv = kvBytesPerTokenLayer(c, o.kvDtype);
      const loads = (t) => {
        const [share, rep] = kvShare(c, t), kvRep = c.kv_lora_rank ? 1 : rep;
        let n = (layers + c.n_layers * kvLayer * (kvRep - 1) - norms) * pLayer + norms * p;
        n += embed * p;
        n += (norm + (c.tie_embeddings ? 0 : head)) * p;
        return [o.replicateWeights ? n : n / t, perLayerKv * share * tokens];
      };
      const best = bestPlan(o, validTpDegrees(c.n_heads, c.n_kv_heads, o.maxTp || 64), loads, overhead, naive);
      return { plan: best, weightsBytes: weights, kvTotalBytes: kvTotal, cached: cachedTokenLayers(c, o.context) };
    }
    // lib.planner.serving._search's choice for one pipeline stage: the fewest GPUs over the degrees, loads(t) the
    // [weight bytes, cache bytes per sequence] on one GPU of a group of t, overhead(t) the bytes subtracted
    function bestPlan(o, degrees, loads, overhead, naive) {
      let best = null;
      for (const t of degrees) {
        const [w, kv] = loads(t);
        const over = overhead(t), room = o.memoryFraction * o.gpuMemoryBytes - over - w;
        if (room < kv || kv <= 0) continue;
        const cacheSeqs = Math.floor(room / kv);
        if (!cacheSeqs) continue;
        const seqs = o.seqCap == null ? cacheSeqs : Math.min(cacheSeqs, o.seqCap);
        const replicas = Math.ceil(o.users / seqs), busiest = Math.ceil(o.users / replicas);
        const plan = { gpus: replicas * t, tpDegree: t, replicas: replicas, sequencesPerReplica: seqs, naive: naive,
          usableBytesPerGpu: o.memoryFraction * o.gpuMemoryBytes - over, weightBytesPerGpu: w,
          kvBytesPerGpu: busiest * kv, overheadBytesPerGpu: over, cacheSequencesPerReplica: cacheSeqs,
          maxNumSeqs: o.seqCap == null ? null : o.seqCap,
          waitingUsers: Math.max(0, o.users - Math.ceil(o.users / cacheSeqs) * seqs),
          spareBytesPerGpu: room - busiest * kv, kvBytesPerSequencePerGpu: kv };
        if (best === null || plan.gpus < best.gpus) best = plan;
      }
      if (best === null) throw new Error("the model does not fit on any tensor-parallel group up to " + (o.maxTp || 64));
      return best;
    }
    // lib.planner.serving.plan_gpus with one pipeline stage (a fixed overhead per GPU)
    function planGpus(c, o) {
      if (!(o.memoryFraction * o.gpuMemoryBytes - o.overheadBytes > 0)) throw new Error("nothing is left per GPU after the overhead");
      return search(c, Object.assign({}, o, { overhead: null, tokensFor: null, seqCap: null }));
    }

    // ---- vLLM's accounting (lib.planner.serving), as the command line plans by default ----
    // lib.planner.serving.vllm_batch_defaults, server entry: [max_num_batched_tokens, max_num_seqs]
    function batchDefaults(totalBytes, name) {
      const big = totalBytes >= SV.big_gpu_bytes && !String(name || "").toLowerCase().includes(SV.excluded_from_big);
      return (big ? SV.batch_defaults_big : SV.batch_defaults_small).slice();
    }
    // lib.planner.serving.reserved_tokens: what one sequence reserves in a layer of window w
    function reservedTokens(context, w, batched, block) {
      if (!w) return context;
      return (Math.ceil(Math.min(w - 1 + batched, context) / block) + 1) * block;
    }
    // lib.planner.serving.non_torch_bytes
    function nonTorchBytes(gpusInGroup) { return gpusInGroup === 1 ? SV.non_torch_alone : SV.non_torch_parallel; }
    // lib.planner.serving.activation_peak_bytes on the last (here the only) pipeline stage
    function activationPeak(c, tokens, sequences, dtype, tp, band, maxModelLen) {
      if (!(band in SV.bands)) throw new Error("unknown vLLM band " + band);
      const p = bytesPerElement(dtype);
      let attn;
      if (c.kv_lora_rank) {
        const qk = c.qk_nope_head_dim + c.qk_rope_head_dim;
        attn = c.n_heads * (qk + c.qk_nope_head_dim + 2 * c.v_head_dim) + c.kv_lora_rank;
      } else {
        attn = (2 * c.n_heads + 2 * c.n_kv_heads) * c.head_dim;
      }
      let widest = attn / tp;
      for (let i = 0; i < c.n_layers; i++) {
        if (isMoeLayer(c, i)) {
          const n = c.moe_d_ff / tp;
          widest = Math.max(widest, c.n_experts_per_tok * (Math.max(2 * n, c.d_model) + n) + 3 * c.shared_d_ff / tp);
        } else {
          widest = Math.max(widest, 3 * c.d_ff / tp);
        }
      }
      const tFwd = band === "v0" && maxModelLen != null && maxModelLen <= 32768 ? Math.max(tokens, maxModelLen) : tokens;
      const forward = tFwd * (2 * c.d_model + widest) * p;
      const s = Math.min(sequences, tokens);
      if (band === "0.12") return Math.max(forward, tokens * c.d_model * p + SV.sampler_bytes_per_logit * s * c.vocab_size);
      return forward + 4 * s * c.vocab_size;
    }
    // lib.planner.serving.sequence_range and fit_verdict, on the plan as the report rounds it (whole bytes)
    function fitVerdict(plan, errorBytes) {
      const err = errorBytes == null ? SV.model_error_bytes : errorBytes;
      const spare = Math.ceil(plan.spareBytesPerGpu), kv = Math.ceil(plan.kvBytesPerSequencePerGpu);
      const room = spare + Math.ceil(plan.kvBytesPerGpu);
      const lo = kv > 0 ? Math.max(0, Math.floor((room - err) / kv)) : plan.cacheSequencesPerReplica;
      const hi = kv > 0 ? Math.floor((room + err) / kv) : plan.cacheSequencesPerReplica;
      let text = "fits with " + fmt(spare / GiB, 2) + " GiB to spare per GPU";
      if (spare < err) text += ": within the model's error";
      if (lo !== hi) text += "; the cache holds " + fmt(lo, 0) + " to " + fmt(hi, 0) + " sequences per replica within " +
        (err / GiB).toFixed(2) + " GiB per GPU";
      return text;
    }
    // The engine's settings for the form's inputs f (lib.planner.serving.ServingAssumptions.vllm_defaults with the
    // command line's options): the GPU's total, max_num_batched_tokens, max_num_seqs, the band, the block size
    function engineSettings(f) {
      const total = f.gpu ? SV.gpus[f.gpu] : f.gpuMemoryBytes;
      if (f.gpu && total === undefined) throw new Error("unknown GPU preset " + f.gpu);
      if (!(total > 0)) throw new Error("GPU memory must be positive");
      const [defTokens, defSeqs] = batchDefaults(total, f.gpu || "");
      const e = { gpu: f.gpu || null, gpuMemoryBytes: total, band: f.band || SV.default_band,
        maxNumBatchedTokens: f.maxNumBatchedTokens || defTokens, maxNumSeqs: f.maxNumSeqs || defSeqs,
        blockSize: f.blockSize || SV.block_size, estimate: f.overheadBytes == null };
      if (!e.estimate && !(f.memoryFraction * total - f.overheadBytes > 0)) {
        throw new Error("nothing is left per GPU after the overhead");
      }
      return e;
    }
    // What the report says beside the plan: the activation peak, non-torch memory, verdict and max_num_seqs line
    function finishPlan(r, e, act) {
      const plan = r.plan;
      r.engine = e;
      r.activationBytes = e.estimate ? act(1) : null;
      r.activationBytesPerGpu = e.estimate ? act(plan.tpDegree) : null;
      r.nonTorchBytes = e.estimate ? nonTorchBytes(plan.tpDegree) : null;
      r.weightsBytes = Math.ceil(r.weightsBytes);
      r.verdict = e.estimate ? fitVerdict(plan) : null;
      r.limit = e.estimate && plan.cacheSequencesPerReplica > plan.maxNumSeqs
        ? "one replica's cache holds " + fmt(plan.cacheSequencesPerReplica, 0) + " sequences but vLLM runs at most" +
          " max_num_seqs = " + fmt(plan.maxNumSeqs, 0) + " at once: the plan counts " + fmt(plan.maxNumSeqs, 0) +
          " per replica" + (plan.waitingUsers ? "; on the fewer replicas the cache alone would call for, " +
          fmt(plan.waitingUsers, 0) + " users would wait" : "")
        : null;
      return r;
    }
    // The command line's plan (lib.planner.cli.report's serving.tensor_parallel, verdict and limit). f: context,
    // users, gpu (a preset name, or null with gpuMemoryBytes), memoryFraction, dtype, kvDtype, overheadBytes (null:
    // vLLM's estimate of activations and non-torch memory, as without --overhead), band, maxNumSeqs and
    // maxNumBatchedTokens (0 or null: vLLM's for the card), blockSize. A model the engine read: engineServingPlan.
    function servingPlan(c, f) {
      if (c.reader === "transformers") return engineServingPlan(c, f);
      const e = engineSettings(f);
      const rate = quantRate(f.dtype, c.d_model), base = rate === null ? f.dtype : "bf16";
      const params = parameterCount(c);
      let weights = null;
      if (rate !== null) {
        const matrices = params.attention + params.ffn;
        weights = (params.total - matrices) * bytesPerElement(base) + matrices * rate;
      }
      const act = (t) => activationPeak(c, e.maxNumBatchedTokens, e.maxNumSeqs, base, t, e.band, f.context);
      const o = { context: f.context, users: f.users, gpuMemoryBytes: e.gpuMemoryBytes,
        memoryFraction: f.memoryFraction, dtype: base, kvDtype: f.kvDtype, layerRate: rate, weightsBytes: weights,
        maxTp: f.maxTp, overhead: e.estimate ? (t) => act(t) + nonTorchBytes(t) : () => f.overheadBytes,
        tokensFor: e.estimate ? (w) => reservedTokens(f.context, w, e.maxNumBatchedTokens, e.blockSize) : null,
        seqCap: e.estimate ? e.maxNumSeqs : null };
      return finishPlan(search(c, o), e, act);
    }
    // lib.planner.serving.engine_plan with one pipeline stage and engine_activation_peak_bytes, on normalised()'s
    // per-layer keys of a model the engine read (every parameter at dtype: a quantised checkpoint's stored layout
    // and --dtype fp8/int8/int4 are the command line's)
    function engineServingPlan(c, f) {
      if (quantRate(f.dtype, 1) !== null) {
        throw new Error(f.dtype + " weights of a model read by transformers: run python -m lib.sizing CONFIG --dtype " +
          f.dtype + ", which counts each stored matrix and its scales");
      }
      const e = engineSettings(f), p = bytesPerElement(f.dtype), pKv = bytesPerElement(f.kvDtype);
      const L = c.n_layers, tokensFor = e.estimate
        ? (w) => reservedTokens(f.context, w, e.maxNumBatchedTokens, e.blockSize) : (w) => cachedTokens(f.context, w);
      let perSeq = 0;
      for (let i = 0; i < L; i++) {
        perSeq += c.layer_kv_elements[i] * tokensFor(c.windows[i]) + c.layer_state_elements[i] - c.layer_conv_channels[i];
      }
      const weights = c.parameters.total * p, total = weights + f.users * perSeq * pKv;
      const naive = Math.max(1, Math.ceil(total / e.gpuMemoryBytes));
      const widest = Math.max(...c.layer_widest);
      const act = (t) => {
        const forward = (e.band === "v0" && f.context <= 32768 ? Math.max(e.maxNumBatchedTokens, f.context)
          : e.maxNumBatchedTokens) * (2 * c.d_model + widest / t) * p;
        const s = Math.min(e.maxNumSeqs, e.maxNumBatchedTokens);
        if (e.band === "0.12") {
          return Math.max(forward, e.maxNumBatchedTokens * c.d_model * p + SV.sampler_bytes_per_logit * s * c.vocab_size);
        }
        return forward + 4 * s * c.vocab_size;
      };
      const loads = (t) => {
        const rep = (i) => (c.latent ? 1 : Math.max(1, Math.floor(t / Math.max(c.layer_kv_heads[i] || c.n_kv_heads, 1))));
        let n = 0, kv = 0, state = 0;
        for (let i = 0; i < L; i++) n += c.layer_params[i] + c.layer_kv_projection[i] * (rep(i) - 1);
        n += c.first_params;
        n += c.last_params;
        for (let i = 0; i < L; i++) kv += c.layer_kv_elements[i] * tokensFor(c.windows[i]) * (c.latent ? 1.0 : rep(i) / t);
        kv *= pKv;
        for (let i = 0; i < L; i++) state += c.layer_state_elements[i] - c.layer_conv_channels[i];
        return [n * p / t, kv + state * pKv / t];
      };
      const o = { users: f.users, gpuMemoryBytes: e.gpuMemoryBytes, memoryFraction: f.memoryFraction, maxTp: f.maxTp,
        seqCap: e.estimate ? e.maxNumSeqs : null };
      const degrees = c.n_heads ? validTpDegrees(c.n_heads, c.n_kv_heads, f.maxTp || 64) : [1];
      const plan = bestPlan(o, degrees, loads, e.estimate ? (t) => act(t) + nonTorchBytes(t) : () => f.overheadBytes,
        naive);
      return finishPlan({ plan: plan, weightsBytes: weights, kvTotalBytes: f.users * perSeq * pKv, cached: null }, e, act);
    }

    // A model only transformers reads (normalised()'s reader "transformers"): its per-layer keys, as
    // lib.planner.engine.kv_bytes_per_token, kv_bytes_per_sequence and state_bytes_per_sequence
    function engineCache(c, context, kvDtype) {
      const p = bytesPerElement(kvDtype);
      let perToken = 0, seq = 0, state = 0;
      for (let i = 0; i < c.n_layers; i++) {
        perToken += c.layer_kv_elements[i];
        seq += c.layer_kv_elements[i] * cachedTokens(context, c.windows[i]);
        state += c.layer_state_elements[i];
      }
      return { perToken: perToken * p, perSequence: seq * p, state: state * p };
    }
    // Each layer's kind in one line: "42 layers: 21 window 4096, 21 full". The description's own line
    // (normalised()'s "layers") first, else its per-layer labels ("layer_kinds") counted, else the windows.
    function layerKinds(c) {
      if (typeof c.layers === "string" && c.layers) return c.layers;
      const given = c.layer_kinds;
      if (typeof given === "string" && given) return given;
      const labels = Array.isArray(given) && given.length === c.n_layers ? given.map(String)
        : windows(c).map((w) => (w ? "window " + w : (c.kv_lora_rank ? "latent" : "full")));
      const counts = new Map();
      for (const k of labels) counts.set(k, (counts.get(k) || 0) + 1);
      return c.n_layers + " layers: " + Array.from(counts, ([k, n]) => n + " " + k).join(", ");
    }

    // ---- one training step (lib.planner.training, lib.planner.train_cli) ----
    const LLAMA_STYLE = ["llama", "mistral", "qwen2", "qwen3"];
    // lib.planner.training.RECIPES: [weights, gradients, optimizer] bytes per parameter
    const RECIPES = { "adamw": [2, 2, 12], "adamw-fp32": [4, 4, 8], "sgd": [2, 2, 8],
      "adamw8bit": [2, 2, 4 + 2 + 8 / 256] };
    const ACT_BYTES = { bf16: 2, fp16: 2, fp32: 4 };
    const QUANTIZED_BASE = { fp8: 1, int8: 1, int4: 0.5 };
    const LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"];
    // lib.planner.training.llama_shape, from the normalised description
    function llamaShape(c) {
      if (!LLAMA_STYLE.includes(c.model_type)) {
        throw new Error("the training mode here covers the Llama-style families (" + LLAMA_STYLE.join(", ") +
          "); for " + c.model_type + " run python -m lib.sizing CONFIG --train, which counts its activations");
      }
      return { d: c.d_model, h: c.n_heads, hk: c.n_kv_heads, hd: c.head_dim, dff: c.d_ff, L: c.n_layers,
        V: c.vocab_size, qkNorm: c.qk_norm === "head", qkvBias: !!c.qkv_bias, tied: !!c.tie_embeddings };
    }
    // LlamaShape.layer_parameters, parameters, matmul_parameters
    function llamaParameters(s) {
      const q = s.h * s.hd, kv = s.hk * s.hd;
      const perLayerMatmul = s.d * (q + 2 * kv) + q * s.d + 3 * s.d * s.dff;
      const layer = perLayerMatmul + 2 * s.d + (s.qkvBias ? q + 2 * kv : 0) + (s.qkNorm ? 2 * s.hd : 0);
      return { total: s.L * layer + s.V * s.d * (s.tied ? 1 : 2) + s.d, matmul: s.L * perLayerMatmul + s.V * s.d };
    }
    // lib.planner.training.llama_layer_bytes (total) for full training or LoRA on targets (a Set; null: none);
    // first: the first layer of a LoRA model, whose input needs no gradient
    function llamaLayerParts(s, b, n, p, attention, lora, first) {
      if (attention !== "eager" && attention !== "flash") throw new Error("attention must be eager or flash");
      const t = b * n, trained = (name) => (lora ? lora.has(name) : true), xGrad = !(lora && first);
      const norm = (rows, width, gradIn) => (gradIn ? rows * (4 * width + 4 + (lora ? 0 : p * width)) : 0);
      const qG = xGrad || trained("q_proj"), kG = xGrad || trained("k_proj"), vG = xGrad || trained("v_proj");
      const parts = { attnNorm: norm(t, s.d, xGrad),
        qkvInput: (trained("q_proj") || trained("k_proj") || trained("v_proj")) ? p * t * s.d : 0 };
      if (s.qkNorm) parts.qkNorms = norm(t * s.h, s.hd, qG) + norm(t * s.hk, s.hd, kG);
      const scoresG = qG || kG;
      let outG;
      if (attention === "eager") {
        parts.qkv = p * t * s.hd * s.h * ((kG ? 1 : 0) + (qG ? 1 : 0) + (scoresG ? 1 : 0));
        parts.softmax = scoresG ? 4 * b * s.h * n * n : 0;
        parts.probs = p < 4 && vG ? p * b * s.h * n * n : 0;
        outG = scoresG || vG;
        parts.oInput = trained("o_proj") ? p * t * s.h * s.hd : 0;
      } else {
        outG = qG || kG || vG;
        parts.qkv = outG ? p * t * s.hd * (s.h + 2 * s.hk) : 0;
        parts.lse = outG ? 4 * b * s.h * n : 0;
        parts.oInput = (outG || trained("o_proj")) ? p * t * s.h * s.hd : 0;
      }
      const hG = xGrad || outG || trained("o_proj");
      parts.mlpNorm = norm(t, s.d, hG);
      parts.gateUpInput = (trained("gate_proj") || trained("up_proj")) ? p * t * s.d : 0;
      const gateG = hG || trained("gate_proj"), upG = hG || trained("up_proj");
      parts.swiglu = p * t * s.dff * ((gateG ? 1 : 0) + (upG ? 1 : 0) + (gateG ? 1 : 0) + (trained("down_proj") ? 1 : 0));
      if (lora) parts.loraIntermediates = p * t * lora.rank * lora.size;
      parts.total = Object.values(parts).reduce((a, x) => a + x, 0);
      return parts;
    }
    function llamaLayerBytes(s, b, n, p, attention, lora, first) {
      return llamaLayerParts(s, b, n, p, attention, lora || null, !!first).total;
    }
    // lib.planner.training.checkpointed_layers: which layers keep only their input
    function checkpointedSet(spec, L) {
      if (spec === "none") return new Set();
      if (spec === "full") return new Set(Array.from({ length: L }, (_, i) => i));
      const m = /^every:([0-9]+)$/.exec(spec);
      if (m && Number(m[1]) >= 1) {
        const k = Number(m[1]), out = new Set();
        for (let i = 0; i < L; i += k) out.add(i);
        return out;
      }
      throw new Error("checkpointing must be none, full or every:K with K a positive integer, got " + spec);
    }
    function checkpointedLayers(spec, L) { return checkpointedSet(spec, L).size; }
    // lib.planner.training.llama_activation_bytes: what is kept when the backward pass starts
    function llamaActivationBytes(s, b, n, p, attention, spec, lora) {
      lora = lora || null;
      const ck = checkpointedSet(spec, s.L), t = b * n;
      const layer = llamaLayerBytes(s, b, n, p, attention, lora, false);
      const first = llamaLayerBytes(s, b, n, p, attention, lora, true);
      let layers = 0;
      for (let i = 0; i < s.L; i++) layers += ck.has(i) ? p * t * s.d : (i === 0 ? first : layer);
      const outside = (lora ? 0 : 8 * t) + 2 * p * n * s.hd + t * (4 * s.d + 4 + (lora ? 0 : p * s.d)) +
        (lora ? 0 : p * t * s.d) + 4 * t * s.V + (b === 1 ? 8 * (b * n + 1) : 8 * b * n) + 4;
      return { layers: layers, outside: outside, total: layers + outside, checkpointed: ck.size };
    }
    // lib.planner.training.llama_peak_bytes (on a GPU: no CPU matmul buffer)
    function llamaPeakBytes(s, b, n, p, attention, spec, lora) {
      lora = lora || null;
      const ck = checkpointedSet(spec, s.L), t = b * n;
      const kept = llamaActivationBytes(s, b, n, p, attention, spec, lora).total;
      const lay = llamaLayerParts(s, b, n, p, attention, lora, false);
      const mask = attention === "eager" && ck.size ? p * b * n * n : 0;
      const alive = (lora ? 0 : 8 * t) + 2 * p * n * s.hd + 8 * n + mask, g = p * t * s.d;
      const mlp = lay.mlpNorm + lay.gateUpInput + lay.swiglu;
      const dAttn = attention === "eager"
        ? g + 8 * b * s.h * n * n - (mlp + lay.oInput + p * t * s.h * s.hd + lay.probs)
        : g + p * t * s.hd * (s.h + 2 * s.hk) - mlp;
      const delta = Math.max(dAttn, g + p * t * s.dff);
      const first = llamaLayerBytes(s, b, n, p, attention, lora, true);
      let below = 0, layersPeak = 0;
      for (let i = 0; i < s.L; i++) {
        const full = i === 0 ? first : lay.total, here = ck.has(i) ? p * t * s.d + full : full;
        layersPeak = Math.max(layersPeak, alive + below + here + delta);
        below += ck.has(i) ? p * t * s.d : full;
      }
      return Math.max(kept, kept + 8 * t * s.V, kept - 4 * t * s.V + 16 * t * s.d, layersPeak);
    }
    // lib.planner.training.nf4_tensor_bytes (double quantisation) and quantized_base_bytes
    function nf4TensorBytes(k) {
      const blocks = Math.ceil(k / 64);
      return Math.ceil(k / 2) + blocks + 4 * Math.ceil(blocks / 256) + 256 * 4 + 4 + 16 * 4;
    }
    function linearNumels(s) {
      const q = s.h * s.hd, kv = s.hk * s.hd;
      return [s.d * q, s.d * kv, s.d * kv, q * s.d, s.d * s.dff, s.d * s.dff, s.dff * s.d];
    }
    function quantizedBaseBytes(s, total, dtype) {
      const per = linearNumels(s), lin = s.L * per.reduce((a, k) => a + k, 0);
      const q = dtype === "int4" ? s.L * per.reduce((a, k) => a + nf4TensorBytes(k), 0) : lin;
      return q + 2 * (total - lin);
    }
    // lib.planner.training.shard_states: the ZeRO rule (its home is the Python function; tested against it)
    function shardStates(weights, gradients, optimizer, stage, dp, mp) {
      if (![0, 1, 2, 3].includes(stage)) throw new Error("ZeRO stage must be 0, 1, 2 or 3");
      return { weights: weights / (mp * (stage >= 3 ? dp : 1)), gradients: gradients / (mp * (stage >= 2 ? dp : 1)),
        optimizer: optimizer / (mp * (stage >= 1 ? dp : 1)) };
    }
    // lib.planner.training.lora_parameters
    function loraParameters(s, rank, targets) {
      const q = s.h * s.hd, kv = s.hk * s.hd;
      const shapes = { q_proj: s.d + q, k_proj: s.d + kv, v_proj: s.d + kv, o_proj: q + s.d,
        gate_proj: s.d + s.dff, up_proj: s.d + s.dff, down_proj: s.dff + s.d };
      const bad = targets.filter((t) => !LORA_TARGETS.includes(t));
      if (bad.length || !targets.length) throw new Error("LoRA targets must be among " + LORA_TARGETS.join(", "));
      return s.L * Array.from(new Set(targets)).reduce((acc, t) => acc + rank * shapes[t], 0);
    }
    // lib.planner.train_cli.training_report for a Llama-style description; o: dtype, context, microBatch,
    // optimizer, attention, checkpointing, zero, gpus, tp, pp, loraRank (0: none), loraTargets, tokens, mfu,
    // peakTflops
    function trainingPlan(c, o) {
      const dtype = o.dtype, rank = o.loraRank || 0;
      if (!(dtype in ACT_BYTES) && !(rank && dtype in QUANTIZED_BASE)) {
        throw new Error(dtype + " cannot be trained: use bf16, fp16 or fp32 (a frozen base in fp8, int8 or int4 needs a LoRA rank)");
      }
      for (const k of ["gpus", "tp", "pp", "microBatch", "context"]) {
        if (!Number.isInteger(o[k]) || o[k] < 1) throw new Error(k + " must be a positive whole number");
      }
      if (o.gpus % (o.tp * o.pp)) throw new Error(o.gpus + " GPUs are not a multiple of tp " + o.tp + " x pp " + o.pp);
      if (![0, 1, 2, 3].includes(o.zero)) throw new Error("ZeRO stage must be 0, 1, 2 or 3");
      if (o.zero > 1 && o.pp > 1) throw new Error("ZeRO stage " + o.zero + " with pipeline parallelism is not planned");
      const s = llamaShape(c), dp = o.gpus / (o.tp * o.pp), b = o.microBatch, n = o.context;
      if (s.h % o.tp) throw new Error("tp " + o.tp + " does not divide the model's " + s.h + " attention heads");
      const p = ACT_BYTES[dtype] || 2;
      let lora = null;
      if (rank) {
        lora = new Set(o.loraTargets);
        const bad = o.loraTargets.filter((t) => !LORA_TARGETS.includes(t));
        if (bad.length || !o.loraTargets.length) throw new Error("LoRA targets must be among " + LORA_TARGETS.join(", "));
        lora.rank = rank;
      }
      const ckCount = checkpointedLayers(o.checkpointing, s.L);
      const activation = llamaPeakBytes(s, b, n, p, o.attention, o.checkpointing, lora) / o.tp;
      const params = llamaParameters(s);
      const trainable = rank ? loraParameters(s, rank, o.loraTargets) : params.total;
      if (!(o.optimizer in { adamw: 1, adamw8bit: 1, sgd: 1 })) throw new Error("unknown optimizer " + o.optimizer);
      const recipe = o.optimizer === "adamw" ? (p === 2 ? "adamw" : "adamw-fp32") : o.optimizer;
      const [rw, rg, ro] = RECIPES[recipe];
      const baseW = rank ? (dtype in QUANTIZED_BASE ? quantizedBaseBytes(s, params.total, dtype)
        : params.total * ACT_BYTES[dtype]) : rw * trainable;
      const loraW = rank ? rw * trainable : 0;
      const shard = shardStates(baseW + loraW, rg * trainable, ro * trainable, o.zero, dp, o.tp * o.pp);
      const weights = shard.weights, grads = shard.gradients, opt = shard.optimizer;
      let attn = 12 * s.L * n * s.h * s.hd;
      if (o.attention === "flash") attn = Math.floor(attn / 2);
      let flopsToken = (rank ? 4 : 6) * params.matmul + (rank ? 6 * trainable : 0) + attn;
      if (ckCount) {  // lib.planner.training.recompute_flops_per_token
        const a = 4 * n * s.h * s.hd, layerMatmul = (params.matmul - s.V * s.d) / s.L;
        flopsToken += Math.trunc(ckCount * (2 * layerMatmul + (o.attention === "flash" ? Math.floor(a / 2) : a)));
      }
      const out = { weights: Math.ceil(weights), gradients: Math.ceil(grads), optimizer: Math.ceil(opt),
        activation: Math.ceil(activation), trainable: trainable, parameters: params.total, flopsPerToken: flopsToken,
        flopsPerStep: flopsToken * b * n * dp, dp: dp, checkpointed: ckCount, layers: s.L };
      out.total = out.weights + out.gradients + out.optimizer + out.activation;
      if (o.tokens) {
        if (!(o.mfu > 0 && o.mfu <= 1)) throw new Error("MFU must lie in (0, 1]");
        if (!(o.peakTflops > 0)) throw new Error("peak TFLOP/s must be positive");
        out.gpuHours = flopsToken * o.tokens / (o.peakTflops * 1e12 * o.mfu) / 3600;
      }
      return out;
    }

    // ---- time and throughput (lib.planner.speed), on speed.web_description's dtype-free description ----
    // lib.planner.speed.describe for unquantised weights (every parameter at dtype; fp8 multiplies at the fp8 peak)
    function speedModel(s, dtype, kvDtype) {
      const p = bytesPerElement(dtype), pkv = bytesPerElement(kvDtype);
      const weightBytes = s.total_params * p;
      const moe = s.moe.map(([e, k, n]) => [e, k, n * p]);
      let dense = weightBytes - moe.reduce((a, [e, , b]) => a + e * b, 0) - s.encoder_params * p;
      return { weightBytes: weightBytes, denseBytes: Math.max(dense, 0), moe: moe, linearFlops: s.linear_flops,
        headFlops: s.head_flops, attention: s.attention, kv: s.kv_elements.map(([n, w]) => [n * pkv, w]),
        stateBytes: s.state_elements * pkv, dModel: s.d_model, nLayers: s.n_layers,
        computeDtype: dtype === "fp8" ? "fp8" : "bf16", encoderFlops: 2 * s.encoder_params * s.source_tokens };
    }
    // lib.planner.speed.keys_sum: keys attended by n causal tokens of a layer with window w
    function keysSum(n, w) {
      if (n <= 0) return 0;
      if (!w || n <= w) return n * (n + 1) / 2;
      return w * (w + 1) / 2 + (n - w) * w;
    }
    // lib.planner.gpus.Roofline.peak x achievable
    function cardPeak(card, d) {
      const order = d === "fp4" ? ["fp4", "bf16"] : d === "fp8" ? ["fp8", "bf16"] : ["bf16"];
      for (const k of order) if (k in card.peak_flops) return card.peak_flops[k] * card.achievable;
      throw new Error("no matrix peak for " + d);
    }
    const moeFactor = (m, eff, v) => v * (m.moe.length ? eff.moe : 1);
    function weightsRead(m, tokens) {
      return m.denseBytes + m.moe.reduce((a, [e, k, b]) => a + e * (1 - (1 - k / e) ** tokens) * b, 0);
    }
    function comm(m, tp, tokens, link, eff) {
      if (tp <= 1) return 0;
      return 2 * m.nLayers * (eff.allreduce_seconds + 2 * (tp - 1) / tp * tokens * m.dModel * 2 / link);
    }
    function prefillFlops(m, n) {
      return n * m.linearFlops + m.headFlops + m.attention.reduce((a, [f, w]) => a + f * keysSum(n, w), 0) +
        m.encoderFlops;
    }
    // lib.planner.speed.prefill_seconds
    function prefillSeconds(m, n, card, tp, eff, alone) {
      const compute = prefillFlops(m, n) / (tp * cardPeak(card, m.computeDtype) * moeFactor(m, eff, eff.prefill));
      if (alone === false) return compute;
      const memory = weightsRead(m, n) / (tp * card.bandwidth * moeFactor(m, eff, eff.decode_bandwidth));
      return Math.max(compute, memory) + comm(m, tp, n, card.link_bandwidth, eff);
    }
    function meanKeys(nIn, nOut, w) { nOut = Math.max(nOut, 1); return (keysSum(nIn + nOut, w) - keysSum(nIn, w)) / nOut; }
    // lib.planner.speed.decode_step_seconds
    function decodeStep(m, batch, nIn, nOut, card, tp, eff) {
      const flops = batch * (m.linearFlops + m.headFlops +
        m.attention.reduce((a, [f, w]) => a + f * meanKeys(nIn, nOut, w), 0));
      const cache = m.kv.reduce((a, [b, w]) => a + b * meanKeys(nIn, nOut, w), 0) + m.stateBytes;
      const read = weightsRead(m, batch) + batch * cache;
      const compute = flops / (tp * cardPeak(card, m.computeDtype) * moeFactor(m, eff, eff.decode_compute));
      const memory = read / (tp * card.bandwidth * moeFactor(m, eff, eff.decode_bandwidth));
      const c = comm(m, tp, batch, card.link_bandwidth, eff);
      return { seconds: Math.max(compute, memory) + c, compute: compute, memory: memory, comm: c, flops: flops,
        bytes: read };
    }
    // lib.planner.speed.serve: one replica of tp GPUs serving batch requests of nIn + nOut tokens
    function serve(m, card, eff, tp, batch, nIn, nOut) {
      for (const [k, v] of [["batch", batch], ["input tokens", nIn], ["output tokens", nOut], ["tp", tp]]) {
        if (!Number.isInteger(v) || v < 1) throw new Error(k + " must be a positive whole number");
      }
      const prefill = prefillSeconds(m, nIn, card, tp, eff, true);
      const shared = prefillSeconds(m, nIn, card, tp, eff, false);
      const step = decodeStep(m, batch, nIn, nOut, card, tp, eff);
      const perToken = step.seconds + (batch - 1) * shared / nOut;
      return { prefillSeconds: prefill, decodeStepSeconds: step.seconds, secondsPerOutputToken: perToken,
        tokensPerSecondPerUser: 1 / perToken, tokensPerSecondPerReplica: batch * nOut / (prefill + nOut * perToken),
        bound: step.compute >= step.memory ? "compute" : "memory bandwidth" };
    }
    // lib.planner.speed.speed_section's default request: [input, output] tokens from the context
    function requestTokens(context, nIn, nOut) {
      if (!nOut) nOut = nIn ? Math.max(1, context - nIn) : Math.max(1, Math.min(256, Math.floor(context / 2)));
      if (!nIn) nIn = Math.max(1, context - nOut);
      if (nIn + nOut > context) throw new Error("prompt " + nIn + " + generated " + nOut + " tokens exceed the context " + context);
      return [nIn, nOut];
    }

    return { bytesPerElement, parameterCount, kvBytesPerToken, cachedTokens, cachedTokenLayers, kvBytesPerSequence,
      validTpDegrees, planGpus, search, quantRate, batchDefaults, reservedTokens, nonTorchBytes,
      activationPeak, fitVerdict, servingPlan, engineServingPlan, windows, engineCache, layerKinds, llamaShape, llamaParameters, llamaLayerBytes,
      checkpointedLayers, llamaActivationBytes, llamaPeakBytes, nf4TensorBytes, quantizedBaseBytes, shardStates,
      loraParameters, trainingPlan, speedModel, keysSum, prefillSeconds, decodeStep, serve, requestTokens };
  }

  const FIELDS = [
    ["n_layers", "layers L"], ["d_model", "d_model"], ["n_heads", "query heads h"], ["n_kv_heads", "key/value heads"],
    ["head_dim", "head_dim d_k"], ["d_ff", "d_ff"], ["vocab_size", "vocabulary n_vocab"],
    ["sliding_window", "sliding window (0: none)"], ["kv_lora_rank", "latent width d_c (0: not MLA)"],
  ];
  // the workload and the engine, defaults as the command line's (lib.planner.cli.serving_web_data): [name, label, key]
  const WORKLOAD = [["context", "context (tokens)", "context"], ["users", "users (sequences at once)", "users"],
    ["memory_fraction", "gpu_memory_utilization", "gpu_memory_utilization"]];

  // the training step's inputs: [name, label, default]; the context above is the sequence length
  const TRAIN_NUMBERS = [["micro_batch", "micro-batch (sequences per GPU)", 1], ["gpus", "GPUs", 1],
    ["tp", "tensor parallel", 1], ["pp", "pipeline parallel", 1], ["lora_rank", "LoRA rank (0: full training)", 0],
    ["tokens", "training tokens (0: no time)", 0], ["mfu", "MFU", 0.4], ["peak_tflops", "peak TFLOP/s per GPU", 989]];
  const TRAIN_CHOICES = [["train_dtype", "weights and activations", ["bf16", "fp16", "fp32", "fp8", "int8", "int4"], "bf16"],
    ["optimizer", "optimizer", ["adamw", "adamw8bit", "sgd"], "adamw"], ["attention", "attention", ["flash", "eager"], "flash"],
    ["zero", "ZeRO stage", ["0", "1", "2", "3"], "0"]];
  const TRAIN_TEXT = [["checkpointing", "checkpointing (none, full, every:K)", "none"],
    ["lora_targets", "LoRA targets", "q_proj,v_proj"]];

  function fmt(x, digits) { return x.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits }); }

  function mount(root) {
    const data = JSON.parse(root.getAttribute("data-planner"));
    const SV = data.serving;
    const P = planner(data.bytes_per_dtype, SV);
    const presets = data.presets;
    // what the form opens on (planner_html's start): a preset, users and context, else the first preset and the
    // command line's defaults; data.training false leaves out the training form
    const start = data.start || {};
    const first = start.preset in presets ? start.preset : Object.keys(presets)[0];
    const withTraining = data.training !== false;
    let cfg = Object.assign({}, presets[first]);
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
    row("model", select("preset", Object.keys(presets), first));
    for (const [name, label] of FIELDS) row(label, el("input", { type: "number", name: name, id: "planner-" + name, min: 0 }));
    for (const [name, label, key] of WORKLOAD) {
      const value = key in start ? start[key] : SV[key];
      row(label, el("input", { type: "number", name: name, id: "planner-" + name, value: value, step: "any", min: 0 }));
    }
    // the GPU: a preset (the total vLLM divides up, as --gpu) or a size entered (as --gpu-memory)
    row("GPU", select("gpu", Object.keys(SV.gpus).concat(["custom"]), SV.default_gpu));
    row("GPU memory (custom)", el("input", { type: "number", name: "gpu_memory", id: "planner-gpu_memory", step: "any",
      min: 0 }));
    row("unit", select("gpu_unit", ["GiB", "GB"], "GiB"));
    row("fixed overhead per GPU, GiB (empty: vLLM's estimate)", el("input", { type: "number", name: "overhead",
      id: "planner-overhead", value: "", step: "any", min: 0 }));
    row("vLLM release", select("vllm_version", Object.keys(SV.bands), SV.default_band));
    row("max_num_seqs (0: vLLM's for the GPU)", el("input", { type: "number", name: "max_num_seqs",
      id: "planner-max_num_seqs", value: 0, step: 1, min: 0 }));
    row("max_num_batched_tokens (0: vLLM's for the GPU)", el("input", { type: "number",
      name: "max_num_batched_tokens", id: "planner-max_num_batched_tokens", value: 0, step: 1, min: 0 }));
    const dtypes = Object.keys(data.bytes_per_dtype);
    row("weights", select("dtype", dtypes, "bf16"));
    row("cache", select("kv_dtype", dtypes, "bf16"));
    root.appendChild(form);
    const out = el("table", { class: "planner-out" });
    root.appendChild(out);
    const OUT = [["params_total", "parameters (total)"], ["params_active", "parameters (active per token)"],
      ["weights", "weights"], ["kv_token", "KV cache per token"], ["kv_total", "KV cache, all sequences"],
      ["total", "weights + cache"], ["naive", "naive GPU count"], ["gpus", "GPUs (serving rules)"],
      ["layout", "layout"], ["overhead", "overhead per GPU"], ["concurrency", "sequences at once"],
      ["verdict", "verdict"], ["layer_kinds", "layers"], ["error", "problem"]];
    const cells = {};
    for (const [key, label] of OUT) {
      const tr = el("tr"); tr.appendChild(el("th", {}, label));
      const td = el("td", { id: "planner-out-" + key }); tr.appendChild(td); out.appendChild(tr); cells[key] = td;
    }
    // time and throughput (ids planner-speed-*): the plan above on a card's data-sheet roofline
    const speedData = data.speed || null;
    const sform = el("form", { class: "planner-form" });
    sform.addEventListener("submit", (ev) => ev.preventDefault());
    const srow = (label, inp) => { const l = el("label", {}, label + " "); l.appendChild(inp); sform.appendChild(l); };
    const SOUT = [["prefill", "prefill per request"], ["step", "decode step"], ["token", "time per output token"],
      ["user", "tokens/s per user"], ["gpu", "output tokens/s per GPU"], ["assumed", "assumed"], ["error", "problem"]];
    if (speedData) {
      root.appendChild(el("h4", {}, "Time and throughput (roofline x assumed efficiencies)"));
      const cards = Object.keys(speedData.cards);
      const sel = select("speed_card", cards, cards.includes("H100-80GB") ? "H100-80GB" : cards[0]);
      sel.id = "planner-speed-card"; sel.name = "speed-card"; srow("GPU (data sheet)", sel);
      srow("prompt tokens (0: context - generated)", el("input", { type: "number", name: "speed-input_tokens",
        id: "planner-speed-input_tokens", value: 0, step: 1, min: 0 }));
      srow("generated tokens (0: min(256, context / 2))", el("input", { type: "number", name: "speed-output_tokens",
        id: "planner-speed-output_tokens", value: 0, step: 1, min: 0 }));
      root.appendChild(sform);
      const sout = el("table", { class: "planner-out" });
      root.appendChild(sout);
      for (const [key, label] of SOUT) {
        const tr = el("tr"); tr.appendChild(el("th", {}, label));
        const td = el("td", { id: "planner-out-speed-" + key }); tr.appendChild(td); sout.appendChild(tr);
        cells["speed_" + key] = td;
      }
    }
    // the training step: a second form and table (ids planner-train-*), the same preset and context
    const tform = el("form", { class: "planner-form" });
    if (withTraining) root.appendChild(el("h4", {}, "One training step (per GPU)"));
    tform.addEventListener("submit", (ev) => ev.preventDefault());
    const trow = (label, inp) => { const l = el("label", {}, label + " "); l.appendChild(inp); tform.appendChild(l); };
    for (const [name, label, options, value] of TRAIN_CHOICES) {
      const s = select(name, options, value); s.id = "planner-train-" + name; s.name = "train-" + name; trow(label, s);
    }
    for (const [name, label, value] of TRAIN_NUMBERS) {
      trow(label, el("input", { type: "number", name: "train-" + name, id: "planner-train-" + name, value: value,
        step: "any", min: 0 }));
    }
    for (const [name, label, value] of TRAIN_TEXT) {
      trow(label, el("input", { type: "text", name: "train-" + name, id: "planner-train-" + name, value: value }));
    }
    const tout = el("table", { class: "planner-out" });
    if (withTraining) { root.appendChild(tform); root.appendChild(tout); }
    const TOUT = [["weights", "weights"], ["gradients", "gradients"], ["optimizer", "optimizer states"],
      ["activation", "activations"], ["total", "total per GPU"], ["trainable", "trained parameters"],
      ["flops_token", "FLOPs per token"], ["flops_step", "FLOPs per step"], ["gpu_hours", "GPU-hours"],
      ["error", "problem"]];
    for (const [key, label] of TOUT) {
      const tr = el("tr"); tr.appendChild(el("th", {}, label));
      const td = el("td", { id: "planner-out-train-" + key }); tr.appendChild(td); tout.appendChild(tr);
      cells["train_" + key] = td;
    }
    const input = (name) => form.querySelector("[name=" + name + "]");
    const tinput = (name) => tform.querySelector("[name=train-" + name + "]");
    // a GPU preset shows its total in the memory field (read only); "custom" takes the size entered
    function loadGpu() {
      const name = input("gpu").value, custom = name === "custom";
      input("gpu_memory").disabled = !custom;
      if (!custom) {
        input("gpu_memory").value = (SV.gpus[name] / (input("gpu_unit").value === "GiB" ? GiB : GB)).toFixed(2);
        const card = sform.querySelector("[name=speed-card]");
        if (card && Array.from(card.options).some((op) => op.value === name)) card.value = name;
      }
    }
    function loadPreset() {
      cfg = Object.assign({}, presets[input("preset").value]);
      for (const [name] of FIELDS) input(name).value = cfg[name] || 0;
      const engine = cfg.reader === "transformers";  // its shape is per layer: the fields above do not apply
      for (const [name] of FIELDS) input(name).disabled = engine;
    }
    // the workload and engine inputs of the form, checked (lib.planner.serving's settings; see servingPlan)
    function workload() {
      const num = (name) => Number(input(name).value);
      const custom = input("gpu").value === "custom", overheadText = input("overhead").value.trim();
      const f = {
        context: num("context"), users: num("users"), memoryFraction: num("memory_fraction"),
        gpu: custom ? null : input("gpu").value,
        gpuMemoryBytes: custom ? Math.round(num("gpu_memory") * (input("gpu_unit").value === "GiB" ? GiB : GB)) : null,
        overheadBytes: overheadText === "" ? null : Number(overheadText) * GiB, dtype: input("dtype").value,
        kvDtype: input("kv_dtype").value, band: input("vllm_version").value, maxNumSeqs: num("max_num_seqs"),
        maxNumBatchedTokens: num("max_num_batched_tokens"),
      };
      if (!Number.isInteger(f.context) || f.context < 1) throw new Error("context must be a positive whole number");
      if (!Number.isInteger(f.users) || f.users < 1) throw new Error("users must be a positive whole number");
      if (!(f.memoryFraction > 0 && f.memoryFraction <= 1)) throw new Error("gpu_memory_utilization must be in (0, 1]");
      if (custom && !(f.gpuMemoryBytes > 0)) throw new Error("GPU memory must be positive");
      if (f.overheadBytes !== null && !(f.overheadBytes >= 0)) throw new Error("overhead must not be negative");
      for (const k of ["maxNumSeqs", "maxNumBatchedTokens"]) {
        if (!Number.isInteger(f[k]) || f[k] < 0) throw new Error("max_num_seqs and max_num_batched_tokens must be whole numbers");
      }
      return f;
    }
    // the serving plan's rows (lib.planner.cli.report's tensor-parallel plan, verdict and max_num_seqs line)
    function showPlan(r) {
      const e = r.engine;
      set("naive", String(r.plan.naive), r.plan.naive);
      set("gpus", String(r.plan.gpus), r.plan.gpus);
      set("layout", r.plan.replicas + " replica(s) x tensor-parallel " + r.plan.tpDegree + ", " +
        r.plan.sequencesPerReplica + " sequences per replica; per GPU: weights " +
        fmt(r.plan.weightBytesPerGpu / GiB, 2) + " GiB, cache " + fmt(r.plan.kvBytesPerGpu / GiB, 2) + " GiB of " +
        fmt(e.gpuMemoryBytes / GiB, 2) + " GiB" + (e.gpu ? " (" + e.gpu + ")" : ""), r.plan.tpDegree);
      const gib = (b) => fmt(b / GiB, 2) + " GiB";
      set("overhead", e.estimate ? gib(r.plan.overheadBytesPerGpu) + " = activation peak " +
        gib(r.activationBytesPerGpu) + " + non-torch " + gib(r.nonTorchBytes) + " (" + SV.bands[e.band] +
        "; max_num_batched_tokens " + e.maxNumBatchedTokens + ", max_num_seqs " + e.maxNumSeqs + ")"
        : gib(r.plan.overheadBytesPerGpu) + " (given: replaces the activation and non-torch estimates)",
      r.plan.overheadBytesPerGpu);
      set("concurrency", r.limit || (fmt(r.plan.sequencesPerReplica, 0) + " per replica" + (e.estimate ?
        " (max_num_seqs " + fmt(e.maxNumSeqs, 0) + ")" : "")), r.plan.sequencesPerReplica);
      set("verdict", r.verdict || "none with a fixed overhead (the model's error is that of vLLM's estimate)",
        e.estimate ? Math.ceil(r.plan.spareBytesPerGpu) : undefined);
    }
    // a model read by transformers: parameters, cache and the serving plan from its per-layer description
    function updateEngine() {
      const f = workload();
      const total = cfg.parameters.total, active = cfg.parameters.active_per_token;
      set("params_total", fmt(total, 0), total);
      set("params_active", fmt(active, 0), active);
      const k = P.engineCache(cfg, f.context, f.kvDtype);
      set("kv_token", fmt(k.perToken, 0) + " B = " + fmt(k.perToken / KiB, 2) + " KiB", k.perToken);
      const kvTotal = f.users * (k.perSequence + k.state);
      set("kv_total", bytesText(kvTotal) + (k.state ? " (recurrent state included)" : ""), kvTotal);
      const r = P.servingPlan(cfg, f), weights = r.weightsBytes;
      set("weights", bytesText(weights) + " (every parameter at " + f.dtype + "; a quantised checkpoint as stored:" +
        " python -m lib.sizing CONFIG)", weights);
      set("total", bytesText(weights + kvTotal), weights + kvTotal);
      showPlan(r);
      return { tp: r.plan.tpDegree, replicas: r.plan.replicas, gpus: r.plan.gpus, edited: false };
    }
    function set(key, text, value) {
      cells[key].textContent = text;
      if (value === undefined) cells[key].removeAttribute("data-value"); else cells[key].setAttribute("data-value", String(value));
    }
    const bytesText = (b) => fmt(b, 0) + " B = " + fmt(b / GB, 2) + " GB = " + fmt(b / GiB, 2) + " GiB";
    function updateHand() {
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
      const f = workload();
      const p = P.parameterCount(c);
      set("params_total", fmt(p.total, 0), p.total);
      set("params_active", fmt(p.active, 0), p.active);
      const kvTok = P.kvBytesPerToken(c, f.kvDtype);
      set("kv_token", fmt(kvTok, 0) + " B = " + fmt(kvTok / KiB, 2) + " KiB", kvTok);
      const r = P.servingPlan(c, f);
      set("weights", bytesText(r.weightsBytes), r.weightsBytes);
      set("kv_total", bytesText(r.kvTotalBytes) + " (" + r.cached + " token-layers cached per sequence)", r.kvTotalBytes);
      set("total", bytesText(r.weightsBytes + r.kvTotalBytes), r.weightsBytes + r.kvTotalBytes);
      showPlan(r);
      const edited = FIELDS.some(([name]) => (c[name] || 0) !== (presets[input("preset").value][name] || 0));
      return { tp: r.plan.tpDegree, replicas: r.plan.replicas, gpus: r.plan.gpus, edited: edited };
    }
    // time and throughput of the plan (a model read by transformers: one replica of one GPU holding every user)
    function updateSpeed(plan) {
      if (!speedData) return;
      try {
        if (plan && plan.edited) {
          throw new Error("time and throughput are computed for the preset's own shape: reload the preset");
        }
        const desc = speedData.models[input("preset").value];
        const card = speedData.cards[sform.querySelector("[name=speed-card]").value];
        const context = Number(input("context").value), users = Number(input("users").value);
        const nums = ["input_tokens", "output_tokens"].map((k) => Number(sform.querySelector("[name=speed-" + k + "]").value));
        for (const v of nums) if (!Number.isInteger(v) || v < 0) throw new Error("tokens must be whole numbers");
        const [nIn, nOut] = P.requestTokens(context, nums[0], nums[1]);
        const layout = plan || { tp: 1, replicas: 1, gpus: 1 };
        const batch = Math.ceil(users / layout.replicas);
        const m = P.speedModel(desc, input("dtype").value, input("kv_dtype").value);
        const sv = P.serve(m, card, speedData.efficiency, layout.tp, batch, nIn, nOut);
        const ms = (x) => (x < 1 ? fmt(x * 1e3, 1) + " ms" : fmt(x, 2) + " s");
        set("speed_prefill", ms(sv.prefillSeconds) + " (about the time to the first token)", sv.prefillSeconds);
        set("speed_step", ms(sv.decodeStepSeconds) + " (" + sv.bound + "-bound, " + batch + " at once)",
          sv.decodeStepSeconds);
        set("speed_token", ms(sv.secondsPerOutputToken) + " (with the others' prefills)", sv.secondsPerOutputToken);
        set("speed_user", fmt(sv.tokensPerSecondPerUser, 1), sv.tokensPerSecondPerUser);
        const perGpu = layout.replicas * sv.tokensPerSecondPerReplica / layout.gpus;
        set("speed_gpu", fmt(perGpu, 0), perGpu);
        const e = speedData.efficiency;
        set("speed_assumed", nIn + " prompt + " + nOut + " generated tokens per request; tensor-parallel " + layout.tp +
          (plan ? "" : " (one GPU assumed)") + "; prefill " + Math.round(e.prefill * 100) + "% of the achievable peak, decode " +
          Math.round(e.decode_bandwidth * 100) + "% of bandwidth or " + Math.round(e.decode_compute * 100) +
          "% of the peak" + (m.moe.length ? ", x" + e.moe + " for experts" : ""));
      } catch (err) {
        set("speed_error", String(err.message || err));
      }
    }
    function update() {
      for (const key in cells) set(key, "");
      let plan = null, planned = false;
      try {
        plan = cfg.reader === "transformers" ? updateEngine() : updateHand();
        planned = true;
      } catch (err) {
        set("error", String(err.message || err));
      }
      if (planned) updateSpeed(plan); else if (speedData) set("speed_error", "no plan to time");
      try {
        set("layer_kinds", P.layerKinds(cfg));
      } catch (err) {
        set("layer_kinds", "");
      }
      if (withTraining) updateTraining();
    }
    function updateTraining() {
      try {
        const c = Object.assign({}, cfg);
        for (const [name] of FIELDS) c[name] = Number(input(name).value);
        const num = (name) => Number(tinput(name).value);
        const o = {
          dtype: tinput("train_dtype").value, context: Number(input("context").value), microBatch: num("micro_batch"),
          optimizer: tinput("optimizer").value, attention: tinput("attention").value,
          checkpointing: tinput("checkpointing").value.trim(), zero: num("zero"), gpus: num("gpus"), tp: num("tp"),
          pp: num("pp"), loraRank: num("lora_rank"), loraTargets: tinput("lora_targets").value.split(",")
            .map((t) => t.trim()).filter((t) => t), tokens: num("tokens"), mfu: num("mfu"),
          peakTflops: num("peak_tflops"),
        };
        if (!Number.isInteger(o.loraRank) || o.loraRank < 0) throw new Error("LoRA rank must be a whole number");
        if (!(o.tokens >= 0)) throw new Error("training tokens must not be negative");
        const t = P.trainingPlan(c, o);
        set("train_weights", bytesText(t.weights), t.weights);
        set("train_gradients", bytesText(t.gradients), t.gradients);
        set("train_optimizer", bytesText(t.optimizer), t.optimizer);
        set("train_activation", bytesText(t.activation) + (t.checkpointed ? " (" + t.checkpointed + " of " +
          t.layers + " layers checkpointed)" : ""), t.activation);
        set("train_total", bytesText(t.total), t.total);
        set("train_trainable", fmt(t.trainable, 0) + " of " + fmt(t.parameters, 0), t.trainable);
        set("train_flops_token", t.flopsPerToken.toExponential(4), t.flopsPerToken);
        set("train_flops_step", t.flopsPerStep.toExponential(4) + " (" + t.dp + " data-parallel)", t.flopsPerStep);
        if (t.gpuHours !== undefined) set("train_gpu_hours", fmt(t.gpuHours, 0), t.gpuHours);
      } catch (err) {
        set("train_error", String(err.message || err));
      }
    }
    input("preset").addEventListener("change", () => { loadPreset(); update(); });
    input("gpu").addEventListener("change", () => { loadGpu(); update(); });
    input("gpu_unit").addEventListener("change", () => { if (input("gpu").value !== "custom") loadGpu(); update(); });
    form.addEventListener("input", update);
    form.addEventListener("change", update);
    tform.addEventListener("input", update);
    tform.addEventListener("change", update);
    sform.addEventListener("input", update);
    sform.addEventListener("change", update);
    loadPreset();
    loadGpu();
    update();
    root.planner = P;
  }

  if (typeof module !== "undefined" && module.exports) { module.exports = planner; return; }  // Node
  window.transformerPlanner = planner;
  document.querySelectorAll("[data-planner]").forEach((root) => { if (!root.planner) mount(root); });
})();
