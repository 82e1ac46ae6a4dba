#include "models/token_linear.h"

namespace attnscope {

namespace {

class FrozenOnednnLinear : public torch::autograd::Function<FrozenOnednnLinear> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& rows,
                               const torch::Tensor& weight, const torch::Tensor& bias) {
    context->saved_data["weight"] = weight;
    const auto out = at::mkldnn_linear(rows.contiguous().to_mkldnn(), weight.contiguous(),
                                       bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt);
    return out.to_dense();
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list gradients) {
    const torch::Tensor weight = context->saved_data["weight"].toTensor();
    ScopedThreads all_cores(configured_threads());
    // dX = dY W: a linear layer whose weight is W^T.
    const auto input_gradient =
        at::mkldnn_linear(gradients[0].contiguous().to_mkldnn(), weight.t().contiguous(), c10::nullopt).to_dense();
    return {input_gradient, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor frozen_onednn_linear(const torch::Tensor& rows, const torch::Tensor& weight, const torch::Tensor& bias) {
  // autograd::Function records every tensor argument and cannot record an undefined one (a layer
  // without bias, such as Swin's patch merging): zeros add nothing.
  if (!bias.defined()) return FrozenOnednnLinear::apply(rows, weight, torch::zeros({weight.size(0)}, weight.options()));
  return FrozenOnednnLinear::apply(rows, weight, bias);
}

}  // namespace attnscope
