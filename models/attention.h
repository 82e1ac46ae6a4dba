// One attention module whose registered names equal its authors' checkpoint keys (timm qkv/proj,
// FLatten dwc/scale/positional_encoding, L2ViT temperature, AnchorFormer x_to_emb/dist_anchor_B/
// to_out), able to run any variant from its own q, k, v and to record what the views need.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <utility>
#include <vector>

#include "models/attention_kernels.h"
#include "models/attention_kernels_successors.h"
#include "models/attention_settings.h"
#include "models/rotary.h"
#include "models/token_layout.h"

namespace attnscope {

// The kernel a module was trained with, read from which parameters its checkpoint carries
// (plain ReLU linear attention has none of its own: files say so in their metadata). It is a row
// of the kernel table like any other, so a kernel that models are trained with needs no second list.
using NativeAttention = Kernel;

// How a block keeps its query, key and value projections: timm's one `qkv` (its bias, if any, in
// the Linear), EVA's `qkv` without bias beside `q_bias` and `v_bias` (the key has none), or three
// Linears `q_proj`, `k_proj`, `v_proj` (EVA-02 B/L, qkv_fused=False).
enum class QkvLayout { Fused, FusedQvBias, Separate };

struct AttentionArch {
  int dim = 0;
  int heads = 0;
  bool qkv_bias = true;  // Fused: qkv.bias; Separate: q_proj.bias and v_proj.bias
  QkvLayout qkv_layout = QkvLayout::Fused;
  bool k_bias = false;      // Separate: k_proj.bias (timm's AttentionRope has one, EVA's attention not)
  bool qk_norm = false;     // q_norm / k_norm: a LayerNorm over each head's queries and keys
  bool inner_norm = false;  // norm: a LayerNorm over the heads' merged output before proj (EVA's scale_attn_inner)
  double norm_eps = 1e-6;   // of q_norm, k_norm and norm
  RotaryArch rope;          // rotates queries and keys of the patch tokens after q_norm / k_norm
  // BEiT's relative position bias: a table [(2h-1)(2w-1)+3, heads] for the h x w grid it was trained
  // on (the 3: class to token, token to class, class to class); 0: none.
  int relative_bias_grid_h = 0, relative_bias_grid_w = 0;
  // CaiT's talking heads: proj_l mixes the heads' scores before the softmax, proj_w the heads'
  // probabilities after it (both Linear(heads, heads) with bias). Softmax over all tokens only.
  bool talking_heads = false;
  NativeAttention native = NativeAttention::Softmax;
  int dwc_kernel = 0;                  // focused: depthwise conv size, 0 when absent
  bool has_scale = false;              // focused: softplus scale [1, 1, C]
  int positional_encoding_tokens = 0;  // focused: tokens of the K positional encoding, 0 when absent
  int anchors = 0;                     // anchor: learned anchors m
  // agent (agent_deit): the agent count and the grid side its position biases were trained for
  // (an_bias ... ca_bias beside a depthwise 3 x 3 conv `dwc` over all channels).
  int agents = 0, agent_grid = 0;
  // inline (inline_deit): `residual` predicts a 3 x 3 kernel per channel from the tokens' mean.
  bool inline_residual = false;
};

// A named range [begin, end) of a block's input channels (CARE's decoupled split).
struct ChannelPart {
  std::string name;
  int begin = 0, end = 0;
  bool attention = false;  // the part the layer's attention maps are of
};

// CaiT's talking heads as a capture keeps them: the mixes of heads before and after the softmax
// ([h, h] weights and [h] biases of proj_l and proj_w).
struct TalkingHeads {
  torch::Tensor pre_weight, pre_bias, post_weight, post_bias;
  bool defined() const { return pre_weight.defined(); }
  // The matrices [B, h, Q, T] that multiply the values, from queries [B, h, Q, d] and keys
  // [B, h, T, d]: proj_w(softmax(proj_l(q k^T / sqrt(d)))), the heads mixed on the last axis as
  // timm's TalkingHeadAttn permutes them. Rows need not sum to one, nor be positive.
  torch::Tensor probabilities(const torch::Tensor& q, const torch::Tensor& k) const;
};

// Where a layer sits in its model and how its queries reach keys (summary.json, info, the views).
struct LayerPlacement {
  std::string name = "blocks.0";   // module name: "blocks.3", "layers.1.blocks.0", "stages.2.blocks.1"
  int stage = 0, block = 0;        // the block within its stage
  std::string access = "global";   // global, window, shifted-window, spatial-reduction
  int window_h = 0, window_w = 0;  // 0: no window
  int shift_h = 0, shift_w = 0;
  // The parts of the block's channels (CARE: memory, attention, dwconv3, dwconv7); empty when the
  // attention mixes every channel. The attention views cover the "attention" part only.
  std::vector<ChannelPart> channels;
};

// Everything one attention layer computed that the views read: no view re-runs the model.
struct AttentionCapture {
  ResolvedAttention attention;
  LayerPlacement placement;
  TokenLayout layout;      // the queries' tokens
  TokenLayout key_layout;  // the keys' tokens: PVT's reduced grid, otherwise the same as `layout`
  int heads = 0;
  int head_dim = 0;
  torch::Tensor q, k, v;    // [B, h, T, d] projections (focused: k with its positional encoding)
  KernelFeatures features;  // what the scores are built from
  // The module's own parameters the kernel read (detached), so that the kernel can be evaluated
  // again on other queries (the kernel diagnostics' scaled queries).
  KernelParameters parameters;
  torch::Tensor dwc_weight;    // [d, 1, k, k] when the DWC term ran
  torch::Tensor normed_input;  // norm1 output [B, T, C]; part of the graph when gradients are on
  // [B, h, T, T]: probabilities a model reported itself (TorchScript files); q, k, v and the
  // features are then empty, and rows are read from here.
  torch::Tensor probabilities;
  // CaiT's talking heads: rows mix every head's scores of the query (q, k are kept); undefined elsewhere.
  TalkingHeads talking_heads;
  // Softmax over all keys (no window, mask or bias): each query's log-sum-exp of its scaled scores
  // [B, h, T], from the forward (KernelFeatures::row_log_normalizer); undefined elsewhere.
  torch::Tensor row_log_normalizer;

  // Local attention (Swin's windows): q, k, v and the features are then per group, [B*G, h, S, d],
  // and these say which token each slot of a group holds (-1: padding added at the border, a key
  // that takes part in the attention but has no place in the image).
  torch::Tensor query_slots;  // [G, Sq] int64; undefined: one group of all tokens in order
  torch::Tensor key_slots;    // [G, Sk] int64
  torch::Tensor additive;     // added to softmax scores: [1 or G, 1 or h, Sq, Sk] (relative bias, shift mask)
  torch::Tensor forbidden;    // [1 or G, Sq, Sk] bool: pairs the layer never connects (linear kernels give 0)
  // FLatten-PVT with reduced keys runs its DWC on V resampled to every query token: [Tq, Tk]
  // linear-interpolation weights that carry the DWC band over to the keys.
  torch::Tensor value_resampling;

  // Heads computed in separate branches (CSwin's vertical and horizontal stripes), each with its
  // own capture; heads are numbered branch 0's first. Everything per head reads its branch.
  std::vector<AttentionCapture> branches;
  std::vector<int> branch_first_head;  // the layer head each branch's head 0 is
  // The capture that holds `head` (this one, or a branch), with `head` made local to it.
  const AttentionCapture& for_head(int64_t& head) const;

  // L2ViT's LCM after a global layer, linearised (models/l2vit.h): per channel c the depthwise
  // kernels conv2_c, conv1_c [C, 1, k, k] and the gain between them [C]; undefined elsewhere.
  torch::Tensor lcm_conv1, lcm_conv2, lcm_gain;
  bool has_lcm() const { return lcm_conv1.defined(); }
  // Rows of C_conv [Q, Tq] = (1/C) sum_c conv2_c gain_c conv1_c over the query grid (zero padding):
  // how the LCM spreads each token over its neighbours, averaged over all channels (proj mixes every
  // head into every channel).
  torch::Tensor lcm_mixing_rows(const std::vector<int64_t>& queries) const;
  // Rows of C_conv A [Q, Tk]: the map of the layer after the LCM's spatial mixing.
  torch::Tensor rows_after_lcm(int64_t batch, int64_t head, const std::vector<int64_t>& queries) const;

  int64_t groups() const { return query_slots.defined() ? query_slots.size(0) : 1; }
  // Rows of the attention matrix for some queries: [Q, Tk] over the key tokens (zero outside a
  // query's group). For linear kernels, the normalised weights their computation implies.
  torch::Tensor rows(int64_t batch, int64_t head, const std::vector<int64_t>& queries) const;
  // Rows of the kernel's second matrix (KernelSpec::second_matrix: PolaFormer's opposite-sign
  // part) for some queries: [Q, Tk]; throws std::invalid_argument when the kernel has none.
  torch::Tensor second_rows(int64_t batch, int64_t head, const std::vector<int64_t>& queries) const;
  torch::Tensor row(int64_t batch, int64_t head, int64_t query) const;
  torch::Tensor matrix(int64_t batch, int64_t head) const;  // [Tq, Tk]
  // FLatten's equivalent matrix M = A + M_DWC when the DWC ran (the matrix whose rank the DWC
  // restores), else the attention matrix.
  torch::Tensor equivalent_matrix(int64_t batch, int64_t head) const;
  // FLatten's DWC term of some rows (when it ran): the channel mean of its kernel at each key's
  // offset from the query, within the query's group, carried over resampled values: [Q, Tk].
  torch::Tensor dwc_band(const std::vector<int64_t>& queries) const;
  // The grid part of a row [Tk] as [key grid_h, key grid_w], in image order.
  torch::Tensor key_grid(const torch::Tensor& row) const;
};

// Where the layer sits and what it attends over, as summary.json and `info` list it: name, stage,
// block, query_grid, key_grid, window, shift, access, attention, heads.
nlohmann::json describe_layer(const AttentionCapture& capture);

// What a forward does with each head's value-weighted sum z [B, h, T, d]: ViT-Prisma's attn.hook_z
// on a model loaded with fold_value_biases, i.e. the attention-weighted sum of the values WITHOUT
// any value bias (for FLatten, with its DWC on those bias-free values, the conv's own bias left
// out). What the biases contribute stays with the layer: a replaced head keeps its share of it.
struct HeadStreams {
  // [C]: the value projection's bias plus what folding norm1's bias through W_V adds; v minus it
  // is the bias-free value.
  torch::Tensor value_bias;
  // Heads whose z is replaced before the output projection: undefined (zero), [T, d] (every batch
  // item) or [B, T, d].
  std::vector<std::pair<int, torch::Tensor>> replacements;
  bool record = false;  // keep z (after the replacements, as the layer used it)
  torch::Tensor z;      // out: [B, h, T, d] when recorded
};

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const AttentionArch& arch);

  // x: [B, T, C] -> [B, T, C]. Fills `capture` when given. `probabilities_hook`, when given,
  // receives the explicit [B, h, T, T] matrix the output is then computed from (see AttentionHook).
  torch::Tensor forward(const torch::Tensor& x, const TokenLayout& layout, const AttentionSettings& settings,
                        AttentionCapture* capture = nullptr,
                        const std::function<void(torch::Tensor&)>& probabilities_hook = {});

  // forward = project_output(mix(project_input(x))). The projections act on each token alone; only
  // mix looks across tokens.
  torch::Tensor project_input(const torch::Tensor& x);  // [..., C] -> [..., 3C] (anchor: [..., 2C])
  int64_t projected_dim() const { return (arch_.native == NativeAttention::Anchor ? 2 : 3) * int64_t(arch_.dim); }
  // `input`: the module's input [B, T, C], which mixes_with_input() modules need.
  torch::Tensor mix(const torch::Tensor& projected, const TokenLayout& layout, const AttentionSettings& settings,
                    AttentionCapture* capture = nullptr,
                    const std::function<void(torch::Tensor&)>& probabilities_hook = {},
                    const torch::Tensor& input = {});         // [B, T, 3C] -> [B, T, C]
  torch::Tensor project_output(const torch::Tensor& merged);  // [..., C] -> [..., C]

  // forward with each head's z computed without the value bias (HeadStreams), recorded and/or
  // replaced. Without replacements its output is the forward's, bit for bit.
  torch::Tensor forward_with_heads(const torch::Tensor& x, const TokenLayout& layout, const AttentionSettings& settings,
                                   AttentionCapture* capture, HeadStreams& streams,
                                   const std::function<void(torch::Tensor&)>& probabilities_hook = {});
  // The value projection's weight [C, C] and bias [C] (undefined when it has none), and the output
  // projection's weight [C, C] whose input channels are the heads side by side. output_weight
  // throws std::invalid_argument when a norm over all heads (`norm`) sits before it: the output is
  // then not a sum of one term per head.
  torch::Tensor value_weight() const;
  torch::Tensor value_projection_bias() const;
  torch::Tensor output_weight() const;

  ResolvedAttention resolve(const AttentionSettings& settings, const TokenLayout& layout) const;
  const AttentionArch& arch() const { return arch_; }

  // Registered with the names of the checkpoints that carry them; unused ones stay null.
  torch::nn::Linear qkv{nullptr}, proj{nullptr};
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr};
  torch::Tensor q_bias, v_bias;
  torch::nn::LayerNorm q_norm{nullptr}, k_norm{nullptr}, norm{nullptr};
  torch::nn::Linear x_to_emb{nullptr}, dist_anchor_B{nullptr};
  torch::nn::Sequential to_out{nullptr};     // AnchorFormer's to_out.0
  torch::nn::Linear to_out_linear{nullptr};  // the same layer, held directly
  torch::nn::Conv2d dwc{nullptr};
  torch::Tensor scale, positional_encoding, temperature;
  successor_kernels::AgentPositionBiases agent_biases;  // Agent's position biases (agent_deit's ac/ca too)
  torch::nn::Sequential residual{nullptr};              // InLine's predictor of its local 3 x 3 kernels
  // Whether mix needs the module's input itself (InLine's residual reads its mean over the tokens).
  bool mixes_with_input() const { return !residual.is_empty(); }
  torch::Tensor relative_position_bias_table;          // BEiT
  torch::nn::Linear proj_l{nullptr}, proj_w{nullptr};  // CaiT's talking heads

 private:
  // What mix computes before it attends: per-head q, k, v, the resolved kernel and its features.
  struct MixInputs {
    torch::Tensor q, k, v;
    ResolvedAttention resolved;
    KernelFeatures features;
    KernelParameters parameters;  // what the kernel read of the module's own
    torch::Tensor allowed;        // the window mask; undefined when global or attended window by window
    torch::Tensor additive;       // BEiT's relative position bias [1, h, T, T] for kernels that take it
    bool by_windows = false;      // attend_in_windows, without the mask (no autograd, no explicit matrix)
    torch::Tensor local_kernels;  // InLine: its predicted 3 x 3 kernels [B * C, 1, 3, 3]
    int64_t batch = 0, tokens = 0, dim = 0, head_dim = 0;
  };
  // explicit_matrix: a probabilities hook will ask for the layer's explicit matrix (and its mask).
  MixInputs prepare_mix(const torch::Tensor& projected, const TokenLayout& layout, const AttentionSettings& settings,
                        bool capture, bool explicit_matrix, const torch::Tensor& input) const;
  // The per-head output [B, h, T, d] from values `v` (the kernel's attend, or the explicit matrix
  // when `probabilities` is defined), plus the DWC term with `dwc_bias` where it runs.
  torch::Tensor attend_values(const MixInputs& inputs, const KernelFeatures& features, const torch::Tensor& v,
                              const torch::Tensor& probabilities, const torch::Tensor& dwc_bias,
                              const TokenLayout& layout) const;
  torch::Tensor explicit_probabilities(const MixInputs& inputs) const;
  void fill_capture(const MixInputs& inputs, const TokenLayout& layout, AttentionCapture& capture) const;
  KernelParameters kernel_parameters() const;
  TalkingHeads talking_heads() const;  // undefined without them
  // BEiT's bias [1, h, T, T] for `layout`, from the table; throws std::invalid_argument for another
  // grid or prefix than the table's (timm's BEiT runs at its trained size only).
  torch::Tensor relative_position_bias(const TokenLayout& layout) const;
  AttentionArch arch_;
};
TORCH_MODULE(Attention);

}  // namespace attnscope
