#include "generator/forward_steps.h"

#include <algorithm>

#include "common/error.h"

namespace mi::generator {
namespace {

// Matmul input of a step: `In` is MatmulInput<N> (f32 in precise numerics, bf16-rounded copies in fast).
const char* kHiddenIn = "const In* hin = mi::model::matmul_input<K, N>(pool_, h_, std::size_t(T) * kHidden, rounded<N>());\n";

std::vector<ScratchBuffer> make_buffers() {
  return {
      {"x_", "float", "T * kHidden", "[T, hidden] the residual stream"},
      {"h_", "float", "T * kHidden", "[T, hidden] normalised input of the mixer / MLP (and of the LM head)"},
      {"o_", "float", "T * kHidden", "[T, hidden] mixer / MLP output, added to x_"},
      {"q_raw_", "float", "T * kHeads * kHeadDim", "[T, heads * head_dim] queries before q_norm"},
      {"q_", "float", "T * kHeads * kHeadDim", "[T, heads * head_dim] queries (normalised, rotated)"},
      {"k_raw_", "float", "T * kKvHeads * kHeadDim", "[T, kv_heads * head_dim] keys before k_norm"},
      {"k_", "float", "T * kKvHeads * kHeadDim", "[T, kv_heads * head_dim] keys (normalised, rotated)"},
      {"v_", "float", "T * kKvHeads * kHeadDim", "[T, kv_heads * head_dim] values"},
      {"attn_", "float", "T * kHeads * kHeadDim", "[T, heads * head_dim] attention output"},
      {"scores_", "float", "mi::model::attention_scratch_floats(threads, max_context)",
       "attention scores: kAttentionQueryBlock padded rows of max_context per pool participant"},
      {"gate_", "float", "T * kIntermediate", "[T, intermediate] gate_proj output"},
      {"up_", "float", "T * kIntermediate", "[T, intermediate] up_proj output"},
      {"act_", "float", "T * kIntermediate", "[T, intermediate] silu(gate) * up"},
      {"qg_", "float", "T * 2 * kHeads * kHeadDim", "[T, heads * 2 * head_dim] q_proj output: per head query | gate"},
      {"attn_gate_", "float", "T * kHeads * kHeadDim", "[T, heads * head_dim] output gate logits"},
      {"mixed_", "float", "T * kConvDim", "[T, conv_dim] q | k | v of the linear layer, before the conv"},
      {"conv_", "float", "T * kConvDim", "[T, conv_dim] q | k | v after conv1d + SiLU (q, k then L2-normalised)"},
      {"z_", "float", "T * kValueWidth", "[T, v_heads * dv] output gate of the gated RMSNorm"},
      {"b_", "float", "T * kLinearValueHeads", "[T, v_heads] beta logits"},
      {"a_", "float", "T * kLinearValueHeads", "[T, v_heads] decay logits"},
      {"beta_", "float", "T * kLinearValueHeads", "[T, v_heads] beta = sigmoid(b)"},
      {"g_", "float", "T * kLinearValueHeads", "[T, v_heads] log decay g = -exp(A_log) softplus(a + dt_bias)"},
      {"core_", "float", "T * kValueWidth", "[T, v_heads * dv] delta-rule output, then gated-normalised"},
      {"qkvz_", "float", "T * (kConvDim + kValueWidth)", "[T, k_heads * (2 dk + 2 r dv)] in_proj_qkvz output (grouped per key head)"},
      {"ba_", "float", "T * 2 * kLinearValueHeads", "[T, k_heads * 2 r] in_proj_ba output (grouped per key head)"},
      {"delta_scratch_", "float", "mi::model::gated_delta_chunked_scratch_floats(kDelta, kDeltaChunk, threads)",
       "chunked delta rule: one chunk's L x L and L x d work per pool participant"},
      {"state_ptrs_", "float*", "max_batch", "[max_batch] the recurrent state of each row of a batched decode step"},
  };
}

std::vector<ForwardStep> make_steps() {
  std::vector<ForwardStep> s;
  // ---- norms, residual, dense MLP --------------------------------------------------------------------------------
  s.push_back({"input_norm", {"x_", "h_"},
               "mi::model::rms_norm_rows<K>(pool_, x_, w.input_layernorm.data(), h_, T, kHidden, kEps);\n", "", {}});
  s.push_back({"post_attention_norm", {"x_", "h_"},
               "mi::model::rms_norm_rows<K>(pool_, x_, w.post_attention_layernorm.data(), h_, T, kHidden, kEps);\n", "", {}});
  s.push_back({"residual_add", {"x_", "o_"}, "K::add(o_, x_, T * kHidden);\n", "", {}});
  s.push_back({"swiglu_mlp", {"h_", "o_", "gate_", "up_", "act_"},
               "mi::model::swiglu_mlp<K, N>(pool_, w.mlp_gate_proj, w.mlp_up_proj, w.mlp_down_proj, kHidden, kIntermediate, h_, T,\n"
               "                            o_, {gate_, up_, act_, rounded<N>(), rounded<N>()});  // x is consumed before act is rounded\n",
               "", {"kHidden", "kIntermediate"}});
  // ---- attention ---------------------------------------------------------------------------------------------------
  s.push_back({"qkv_proj", {"h_", "q_raw_", "k_raw_", "v_"},
               std::string(kHiddenIn) +
                   "mi::model::linear_parts<K>(pool_, kHidden, hin, T, mi::model::part(w.self_attn_q_proj, kHeads * kHeadDim, q_raw_),\n"
                   "                           mi::model::part(w.self_attn_k_proj, kKvHeads * kHeadDim, k_raw_),\n"
                   "                           mi::model::part(w.self_attn_v_proj, kKvHeads * kHeadDim, v_));\n",
               "", {"kHidden"}});
  s.push_back({"qk_norm", {"q_raw_", "q_", "k_raw_", "k_"},
               "mi::model::head_rms_norm<K>(pool_, q_raw_, w.self_attn_q_norm.data(), q_, T, kHeads, kHeadDim, kEps);\n"
               "mi::model::head_rms_norm<K>(pool_, k_raw_, w.self_attn_k_norm.data(), k_, T, kKvHeads, kHeadDim, kEps);\n",
               "", {}});
  const std::string rope_chunk =
      "mi::model::apply_rotary<K>(pool_, rotary_, q_, T, std::size_t(kHeads) * kHeadDim, kHeads, kHeadDim, start);\n"
      "mi::model::apply_rotary<K>(pool_, rotary_, k_, T, std::size_t(kKvHeads) * kHeadDim, kKvHeads, kHeadDim, start);\n";
  const std::string rope_batch =
      "mi::model::apply_rotary_at<K>(pool_, rotary_, q_, T, std::size_t(kHeads) * kHeadDim, kHeads, kHeadDim, positions);\n"
      "mi::model::apply_rotary_at<K>(pool_, rotary_, k_, T, std::size_t(kKvHeads) * kHeadDim, kKvHeads, kHeadDim, positions);\n";
  s.push_back({"rope", {"q_", "k_"}, rope_chunk, rope_batch, {}});
  // The rotary table holds kRotaryDim (partial_rotary_factor x head_dim): the same code rotates only those dims.
  s.push_back({"partial_rope", {"q_", "k_"}, rope_chunk, rope_batch, {}});
  ForwardStep attention{"attention", {"q_", "k_", "v_", "attn_", "scores_"},
                        "mi::model::store_kv<K, KvRow<N>>(pool_, cache_, seq, slot, start, T, k_, v_, kKvHeads, kHeadDim);\n"
                        "mi::model::causal_attention<K, KvRow<N>>(pool_, cache_, seq, slot, {kHeads, kKvHeads, kHeadDim}, q_, T, start, attn_, scores_);\n",
                        "for (int b = 0; b < T; ++b)\n"
                        "  mi::model::store_kv<K, KvRow<N>>(cache_, seqs[b], slot, positions[b], 1, k_ + std::size_t(b) * kKvHeads * kHeadDim,\n"
                        "                      v_ + std::size_t(b) * kKvHeads * kHeadDim, kKvHeads, kHeadDim);\n"
                        "mi::model::decode_attention_batch<K, KvRow<N>>(pool_, cache_, seqs, T, slot, {kHeads, kKvHeads, kHeadDim}, q_, attn_, scores_);\n",
                        {}};
  attention.uses_kv_cache = true;
  s.push_back(attention);
  s.push_back({"o_proj", {"attn_", "o_"},
               "const In* ain = mi::model::matmul_input<K, N>(pool_, attn_, std::size_t(T) * kHeads * kHeadDim, rounded<N>());\n"
               "mi::model::linear<K>(pool_, w.self_attn_o_proj, kHidden, kHeads * kHeadDim, ain, T, o_);\n",
               "", {"kHeads * kHeadDim"}});
  // ---- output-gated attention (q_proj rows per head: query then gate) ----------------------------------------------
  s.push_back({"qg_proj", {"h_", "qg_"},
               std::string(kHiddenIn) +
                   "mi::model::linear<K>(pool_, w.self_attn_q_proj, 2 * kHeads * kHeadDim, kHidden, hin, T, qg_);\n",
               "", {"kHidden"}});
  s.push_back({"split_query_gate", {"qg_", "q_raw_", "attn_gate_"},
               "mi::model::split_query_gate(qg_, T, kHeads, kHeadDim, q_raw_, attn_gate_);\n", "", {}});
  s.push_back({"kv_proj", {"h_", "k_raw_", "v_"},
               std::string(kHiddenIn) +
                   "mi::model::linear_parts<K>(pool_, kHidden, hin, T, mi::model::part(w.self_attn_k_proj, kKvHeads * kHeadDim, k_raw_),\n"
                   "                           mi::model::part(w.self_attn_v_proj, kKvHeads * kHeadDim, v_));\n",
               "", {"kHidden"}});
  s.push_back({"output_gate", {"attn_", "attn_gate_"},
               "mi::model::apply_output_gate(pool_, attn_, std::size_t(kHeads) * kHeadDim, attn_gate_, std::size_t(kHeads) * kHeadDim, T,\n"
               "                             kHeads, kHeadDim);\n",
               "", {}});
  // ---- Gated DeltaNet ----------------------------------------------------------------------------------------------
  // The Gated DeltaNet projections take f32 activations in both numerics (experience HYBRID-004): bf16-rounded
  // inputs here perturb q/k/v, beta and the decays that the recurrent state then carries through every later token
  // (qwen3_5-tiny, fast: teacher-forced logits 1.0 off the oracle after 10 tokens, 2.1 after 150; f32 here: in bound).
  ForwardStep in_proj{"gdn_in_proj", {"h_", "mixed_", "z_", "b_", "a_"},
                      "mi::model::linear_parts<K>(pool_, kHidden, h_, T, mi::model::part(w.linear_attn_in_proj_qkv, kConvDim, mixed_),\n"
                      "                           mi::model::part(w.linear_attn_in_proj_z, kValueWidth, z_),\n"
                      "                           mi::model::part(w.linear_attn_in_proj_b, kLinearValueHeads, b_),\n"
                      "                           mi::model::part(w.linear_attn_in_proj_a, kLinearValueHeads, a_));\n",
                      "", {}};
  in_proj.dims = "gdn";
  s.push_back(in_proj);
  ForwardStep grouped{"gdn_in_proj_grouped", {"h_", "qkvz_", "ba_", "mixed_", "z_", "b_", "a_"},
                      "mi::model::linear_parts<K>(pool_, kHidden, h_, T, mi::model::part(w.linear_attn_in_proj_qkvz, kConvDim + kValueWidth, qkvz_),\n"
                      "                           mi::model::part(w.linear_attn_in_proj_ba, 2 * kLinearValueHeads, ba_));\n"
                      "mi::model::regroup_grouped_gdn_projections(kDelta, qkvz_, ba_, T, mixed_, z_, b_, a_);\n",
                      "", {}};
  grouped.dims = "gdn";
  s.push_back(grouped);
  ForwardStep conv{"causal_conv1d", {"mixed_", "conv_", "state_ptrs_"},
                   "mi::model::causal_conv1d_silu<K>(pool_, kConv, mixed_, kConvDim, T, w.linear_attn_conv1d.data(), state_.conv(seq, slot),\n"
                   "                                 conv_, kConvDim);\n",
                   "for (int b = 0; b < T; ++b) state_ptrs_[b] = state_.conv(seqs[b], slot);\n"
                   "mi::model::causal_conv1d_silu_decode_batch<K>(pool_, kConv, mixed_, kConvDim, T, w.linear_attn_conv1d.data(),\n"
                   "                                              state_ptrs_, conv_, kConvDim);\n",
                   {}};
  conv.uses_recurrent_state = true;
  conv.dims = "gdn";
  s.push_back(conv);
  ForwardStep gates{"gdn_gates", {"b_", "a_", "beta_", "g_"},
                    "mi::model::gated_delta_gates(b_, kLinearValueHeads, a_, kLinearValueHeads, w.linear_attn_A_log.data(),\n"
                    "                             w.linear_attn_dt_bias.data(), T, kLinearValueHeads, beta_, g_);\n",
                    "", {}};
  gates.dims = "gdn";
  s.push_back(gates);
  ForwardStep l2{"l2norm_qk", {"conv_"},
                 "// q and k of every key head: x / sqrt(sum x^2 + eps) (a SUM, BUG-005-1); q also scaled by 1/sqrt(dk), once.\n"
                 "mi::model::l2_normalize_heads(pool_, conv_, T, kConvDim, kLinearKeyHeads, kLinearKeyDim, kL2NormEps, kQueryScale);\n"
                 "mi::model::l2_normalize_heads(pool_, conv_ + kKeyWidth, T, kConvDim, kLinearKeyHeads, kLinearKeyDim, kL2NormEps, 1.0f);\n",
                 "", {}};
  l2.dims = "gdn";
  s.push_back(l2);
  ForwardStep rule{"gated_delta_rule", {"conv_", "beta_", "g_", "core_", "delta_scratch_", "state_ptrs_"},
                   "const mi::model::GatedDeltaInputs in{conv_, kConvDim, conv_ + kKeyWidth, kConvDim, conv_ + 2 * kKeyWidth, kConvDim, beta_, g_};\n"
                   "if (T == 1)  // decode: one pass over the state\n"
                   "  mi::model::gated_delta_rule_recurrent<K>(pool_, kDelta, in, T, state_.delta(seq, slot), core_, kValueWidth);\n"
                   "else  // prefill: the chunkwise-parallel form\n"
                   "  mi::model::gated_delta_rule_chunked<K>(pool_, kDelta, in, T, kDeltaChunk, state_.delta(seq, slot), core_, kValueWidth,\n"
                   "                                         delta_scratch_);\n",
                   "const mi::model::GatedDeltaInputs in{conv_, kConvDim, conv_ + kKeyWidth, kConvDim, conv_ + 2 * kKeyWidth, kConvDim, beta_, g_};\n"
                   "for (int b = 0; b < T; ++b) state_ptrs_[b] = state_.delta(seqs[b], slot);\n"
                   "mi::model::gated_delta_rule_decode_batch<K>(pool_, kDelta, in, T, state_ptrs_, core_, kValueWidth);\n",
                   {}};
  rule.uses_recurrent_state = true;
  rule.dims = "gdn";
  s.push_back(rule);
  ForwardStep gated_norm{"rms_norm_gated", {"core_", "z_"},
                         "mi::model::rms_norm_gated<K>(pool_, core_, kValueWidth, z_, kValueWidth, w.linear_attn_norm.data(), core_, kValueWidth, T,\n"
                         "                             kLinearValueHeads, kLinearValueDim, kEps);\n",
                         "", {}};
  gated_norm.dims = "gdn";
  s.push_back(gated_norm);
  ForwardStep out_proj{"gdn_out_proj", {"core_", "o_"},
                       "mi::model::linear<K>(pool_, w.linear_attn_out_proj, kHidden, kValueWidth, core_, T, o_);  // f32 input: HYBRID-004\n",
                       "", {}};
  out_proj.dims = "gdn";
  s.push_back(out_proj);
  // ---- sparse mixture of experts (one component call: router, top-k, experts grouped by expert, shared expert) ----
  ForwardStep moe{"moe_mlp", {"h_", "o_"}, "mi::model::moe_mlp<K, N>(pool_, kMoe, w.moe, h_, T, o_, moe_scratch<N>());\n", "", {}};
  moe.dims = "moe";
  moe.bind = "w.moe = {w.mlp_gate, w.mlp_experts_gate_proj.data(), w.mlp_experts_up_proj.data(), w.mlp_experts_down_proj.data(),\n"
             "         w.mlp_shared_expert_gate_proj, w.mlp_shared_expert_up_proj, w.mlp_shared_expert_down_proj, w.mlp_shared_expert_gate};\n";
  s.push_back(moe);
  // ---- final steps (after the layers; `first_row` and `rows` select the rows whose logits are wanted) -------------
  s.push_back({"final_norm", {"x_", "h_"},
               "mi::model::rms_norm_rows<K>(pool_, x_ + std::size_t(first_row) * kHidden, norm_.data(), h_, rows, kHidden, kEps);\n",
               "", {}});
  s.push_back({"lm_head", {"h_"},
               "const In* hin = mi::model::matmul_input<K, N>(pool_, h_, std::size_t(rows) * kHidden, rounded<N>());\n"
               "mi::model::lm_head<K>(pool_, lm_head_, kVocab, kHidden, hin, rows, logits);\n",
               "", {"kHidden"}});
  return s;
}

}  // namespace

const std::vector<ForwardStep>& forward_steps() {
  static const std::vector<ForwardStep> steps = make_steps();
  return steps;
}

const ForwardStep* find_forward_step(const std::string& id) {
  for (const auto& s : forward_steps())
    if (s.id == id) return &s;
  return nullptr;
}

const ScratchBuffer& scratch_buffer(const std::string& name) {
  static const std::vector<ScratchBuffer> buffers = make_buffers();
  for (const auto& b : buffers)
    if (b.name == name) return b;
  fail("generator: no scratch buffer '", name, "' (toolkit/generator/forward_steps.cpp)");
}

}  // namespace mi::generator
