// Sparse mixture-of-experts MLP with a gated shared expert (Qwen3-Next; the top-k softmax router of Shazeer et al.
// 2017, "Outrageously Large Neural Networks", and the always-on shared expert of DeepSeekMoE, Dai et al. 2024):
//   p      = softmax(router x)                          [E], f32
//   chosen = top_k(p)   (ties: the lower expert id first)
//   w_i    = p_i, or p_i / sum_{chosen} p_j when norm_topk_prob
//   out    = sum_{i in chosen} w_i * expert_i(x)  +  sigmoid(shared_expert_gate x) * shared_expert(x)
// Every expert and the shared expert is a SwiGLU MLP (model/swiglu_mlp.h).
//
// A step of T tokens (a prefill, or one token of each of T sequences in batched decode: MoE has no state) groups
// the tokens by expert, so each chosen expert's weights are read once per step and run as one matmul over its
// tokens; an expert no token chose is not touched. Within a token the contributions are added shared expert first,
// then experts in ascending id.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "common/error.h"
#include "model/linear.h"
#include "model/scratch_arena.h"
#include "model/swiglu_mlp.h"
#include "runtime/thread_pool.h"

namespace mi::model {

struct MoeDims {
  int hidden = 0;               // H
  int experts = 0;              // E
  int top_k = 0;                // experts per token
  int expert_intermediate = 0;  // I of each routed expert
  int shared_intermediate = 0;  // I of the shared expert; 0: no shared expert
  bool norm_topk_prob = true;   // renormalise the chosen probabilities to sum to 1
};

// Weight views into the checkpoint (one tensor per expert, so the routed experts are arrays of E pointers).
template <class W>
struct MoeWeights {
  const W* router = nullptr;              // [E, H]                    mlp.gate.weight
  const W* const* gate_proj = nullptr;    // E x [I, H]                mlp.experts.{e}.gate_proj.weight
  const W* const* up_proj = nullptr;      // E x [I, H]
  const W* const* down_proj = nullptr;    // E x [H, I]
  const W* shared_gate_proj = nullptr;    // [Is, H]                   mlp.shared_expert.gate_proj.weight
  const W* shared_up_proj = nullptr;      // [Is, H]
  const W* shared_down_proj = nullptr;    // [H, Is]
  const W* shared_expert_gate = nullptr;  // [1, H]; null: the shared expert is added unscaled
};

template <Numerics N>
struct MoeScratch {
  float* logits = nullptr;       // [T, E]  router logits, then probabilities
  int* ids = nullptr;            // [T, top_k] chosen experts per token
  float* weights = nullptr;      // [T, top_k] their weights
  int* offsets = nullptr;        // [E + 1] start of each expert's entries in `order`
  int* order = nullptr;          // [T * top_k] entries (token * top_k + slot), grouped by expert, tokens ascending
  float* xe = nullptr;           // [T, H] the rows of x one expert runs on
  float* ye = nullptr;           // [T, H] that expert's output (also the shared expert's)
  float* shared_logit = nullptr; // [T]    shared_expert_gate x
  MlpScratch<N> mlp;             // M = T, intermediate = max(I, Is)
};

// The buffers MoeScratch takes, in order, for up to `max_tokens` tokens; plan and take must agree.
template <Numerics N>
void plan_moe_scratch(ScratchPlan& plan, const MoeDims& d, int max_tokens) {
  const std::size_t T = std::size_t(max_tokens), H = std::size_t(d.hidden), E = std::size_t(d.experts);
  const std::size_t k = std::size_t(d.top_k), I = std::size_t(std::max(d.expert_intermediate, d.shared_intermediate));
  plan.add<float>(T * E).add<int>(T * k).add<float>(T * k).add<int>(E + 1).add<int>(T * k);
  plan.add<float>(T * H).add<float>(T * H).add<float>(T);
  plan.add<float>(T * I).add<float>(T * I).add<float>(T * I);
  if constexpr (N == Numerics::fast) {
    plan.add<MatmulInput<N>>(T * H);
    plan.add<MatmulInput<N>>(T * I);
  }
}

template <Numerics N>
MoeScratch<N> take_moe_scratch(ScratchArena& arena, const MoeDims& d, int max_tokens) {
  const std::size_t T = std::size_t(max_tokens), H = std::size_t(d.hidden), E = std::size_t(d.experts);
  const std::size_t k = std::size_t(d.top_k), I = std::size_t(std::max(d.expert_intermediate, d.shared_intermediate));
  MoeScratch<N> s;
  s.logits = arena.take<float>(T * E);
  s.ids = arena.take<int>(T * k);
  s.weights = arena.take<float>(T * k);
  s.offsets = arena.take<int>(E + 1);
  s.order = arena.take<int>(T * k);
  s.xe = arena.take<float>(T * H);
  s.ye = arena.take<float>(T * H);
  s.shared_logit = arena.take<float>(T);
  s.mlp.gate = arena.take<float>(T * I);
  s.mlp.up = arena.take<float>(T * I);
  s.mlp.act = arena.take<float>(T * I);
  if constexpr (N == Numerics::fast) {
    s.mlp.x_rounded = arena.take<MatmulInput<N>>(T * H);
    s.mlp.act_rounded = arena.take<MatmulInput<N>>(T * I);
  }
  return s;
}

// The same buffers for precise numerics (an engine takes the fast scratch once and runs both modes).
inline MoeScratch<Numerics::precise> without_rounding(const MoeScratch<Numerics::fast>& s) {
  MoeScratch<Numerics::precise> p;
  p.logits = s.logits;
  p.ids = s.ids;
  p.weights = s.weights;
  p.offsets = s.offsets;
  p.order = s.order;
  p.xe = s.xe;
  p.ye = s.ye;
  p.shared_logit = s.shared_logit;
  p.mlp.gate = s.mlp.gate;
  p.mlp.up = s.mlp.up;
  p.mlp.act = s.mlp.act;
  p.mlp.x_rounded = nullptr;
  p.mlp.act_rounded = nullptr;
  return p;
}

// Routing of T tokens from their router logits [T, E] (overwritten with the softmax probabilities):
//   ids [T, top_k] the chosen experts, highest probability first (ties: lower id first); weights [T, top_k].
template <class K>
void route_top_k(float* logits, int T, int E, int top_k, bool norm_topk_prob, int* ids, float* weights) {
  if (E <= 0 || top_k <= 0 || top_k > E) fail("moe: top_k (", top_k, ") must be in [1, experts = ", E, "]");
  for (int t = 0; t < T; ++t) {
    float* p = logits + std::size_t(t) * E;
    K::softmax(p, E);
    int* id = ids + std::size_t(t) * top_k;
    float* w = weights + std::size_t(t) * top_k;
    float sum = 0.0f;
    for (int j = 0; j < top_k; ++j) {
      // Selection by repeated scan (top_k is small): strict > keeps the lowest id among equal probabilities.
      int best = -1;
      for (int e = 0; e < E; ++e) {
        bool taken = false;
        for (int i = 0; i < j; ++i) taken = taken || id[i] == e;
        if (!taken && (best < 0 || p[e] > p[best])) best = e;
      }
      id[j] = best;
      w[j] = p[best];
      sum += p[best];
    }
    if (norm_topk_prob)
      for (int j = 0; j < top_k; ++j) w[j] /= sum;
  }
}

//   x [T, H] f32 (already normalised), out [T, H] f32 (not aliasing x); T <= the max_tokens the scratch was taken for.
template <class K, Numerics N, class W>
void moe_mlp(runtime::ThreadPool& pool, const MoeDims& d, const MoeWeights<W>& w, const float* x, int T, float* out,
             const MoeScratch<N>& s) {
  const int H = d.hidden, E = d.experts, k = d.top_k;
  const std::size_t uH = std::size_t(H);
  if (T <= 0) return;

  // Router (and the shared expert's gate) on the same matmul input as the experts: bf16-rounded x in fast mode.
  const MatmulInput<N>* xin = matmul_input<K, N>(pool, x, std::size_t(T) * uH, s.mlp.x_rounded);
  linear<K>(pool, w.router, E, H, xin, T, s.logits);
  const bool gated_shared = d.shared_intermediate > 0 && w.shared_expert_gate != nullptr;
  if (gated_shared) linear<K>(pool, w.shared_expert_gate, 1, H, xin, T, s.shared_logit);
  route_top_k<K>(s.logits, T, E, k, d.norm_topk_prob, s.ids, s.weights);

  // Group (token, slot) entries by expert: counting sort, tokens ascending within an expert.
  std::fill(s.offsets, s.offsets + E + 1, 0);
  for (int i = 0; i < T * k; ++i) ++s.offsets[s.ids[i] + 1];
  for (int e = 0; e < E; ++e) s.offsets[e + 1] += s.offsets[e];
  // offsets[e] serves as expert e's fill cursor (entries in ascending order, so tokens stay ascending); afterwards
  // it points at expert e + 1's start, and shifting the array by one restores the starts.
  for (int i = 0; i < T * k; ++i) s.order[s.offsets[s.ids[i]]++] = i;
  for (int e = E; e > 0; --e) s.offsets[e] = s.offsets[e - 1];
  s.offsets[0] = 0;

  // Shared expert first: it initialises out.
  if (d.shared_intermediate > 0) {
    swiglu_mlp<K, N>(pool, w.shared_gate_proj, w.shared_up_proj, w.shared_down_proj, H, d.shared_intermediate, x, T,
                     s.ye, s.mlp);
    for (int t = 0; t < T; ++t) {
      const float scale = gated_shared ? 1.0f / (1.0f + std::exp(-s.shared_logit[t])) : 1.0f;
      const float* y = s.ye + std::size_t(t) * uH;
      float* o = out + std::size_t(t) * uH;
      for (int i = 0; i < H; ++i) o[i] = scale * y[i];
    }
  } else {
    std::memset(out, 0, sizeof(float) * std::size_t(T) * uH);
  }

  // Routed experts, each once over the tokens that chose it.
  for (int e = 0; e < E; ++e) {
    const int begin = s.offsets[e], n = s.offsets[e + 1] - begin;
    if (n == 0) continue;
    for (int r = 0; r < n; ++r)
      std::memcpy(s.xe + std::size_t(r) * uH, x + std::size_t(s.order[begin + r] / k) * uH, sizeof(float) * uH);
    swiglu_mlp<K, N>(pool, w.gate_proj[e], w.up_proj[e], w.down_proj[e], H, d.expert_intermediate, s.xe, n, s.ye,
                     s.mlp);
    for (int r = 0; r < n; ++r) {
      const int entry = s.order[begin + r];
      K::axpy(s.weights[entry], s.ye + std::size_t(r) * uH, out + std::size_t(entry / k) * uH, H);
    }
  }
}

}  // namespace mi::model
