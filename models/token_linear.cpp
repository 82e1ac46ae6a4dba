#include "models/token_linear.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <iomanip>
#include <sstream>
#include <utility>
#include <vector>

#include <ATen/Parallel.h>
#include <dlfcn.h>

namespace attnscope {

namespace {

// oneDNN's row-major sgemm (C = alpha op(A) op(B) + beta C, dnnl.h), looked up at run time in the
// oneDNN that LibTorch loaded. Debian's LibTorch links the shared libdnnl, which exports it; a
// LibTorch with oneDNN linked in (pip's) hides it, and the layers then go through
// at::mkldnn_linear.
using DnnlSgemm = int (*)(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

DnnlSgemm onednn_sgemm() {
  static const auto function = reinterpret_cast<DnnlSgemm>(dlsym(RTLD_DEFAULT, "dnnl_sgemm"));
  return function;
}

// How a float32 CPU matrix [rows, cols] sits in memory for a row-major GEMM: 'N' with rows of unit
// stride, 'T' for the transpose of such a matrix; its leading dimension. None (0) otherwise.
struct GemmOperand {
  char transposed = 0;
  int64_t leading = 0;
};
GemmOperand gemm_operand(const torch::Tensor& matrix) {
  const int64_t rows = matrix.size(0), cols = matrix.size(1);
  // A dimension of size 1 has no meaningful stride.
  if (cols <= 1 || matrix.stride(1) == 1) {
    const int64_t leading = rows <= 1 ? std::max<int64_t>(cols, 1) : matrix.stride(0);
    if (leading >= std::max<int64_t>(cols, 1)) return {'N', leading};
  }
  if (rows <= 1 || matrix.stride(0) == 1) {
    const int64_t leading = cols <= 1 ? std::max<int64_t>(rows, 1) : matrix.stride(1);
    if (leading >= std::max<int64_t>(rows, 1)) return {'T', leading};
  }
  return {};
}

// out [N, C_out] = rows [N, C_in] @ weight^T + bias, written by oneDNN's sgemm straight into out's
// memory (a block of a wider output's columns included): none of at::mkldnn_linear's copies of the
// input into oneDNN's layout and of the result out of it. DeiT-S's four layers, half the columns
// on one core: 22-27 % less time (docs/speed.md). False where it did not compute out: no sgemm,
// an operand no BLAS layout describes, out sharing memory with an operand, or an error from oneDNN.
bool onednn_sgemm_into(torch::Tensor& out, const torch::Tensor& rows, const torch::Tensor& weight,
                       const torch::Tensor& bias) {
  const DnnlSgemm sgemm = onednn_sgemm();
  const auto is_cpu_float = [](const torch::Tensor& t) { return t.is_cpu() && t.scalar_type() == torch::kFloat; };
  if (!sgemm || out.dim() != 2 || rows.dim() != 2 || weight.dim() != 2 || !is_cpu_float(out) || !is_cpu_float(rows) ||
      !is_cpu_float(weight) || (bias.defined() && !is_cpu_float(bias)))
    return false;
  // The bias is written into out before the operands are read.
  if (out.is_alias_of(rows) || out.is_alias_of(weight)) return false;
  const torch::Tensor products = weight.t();  // [C_in, C_out]
  const GemmOperand a = gemm_operand(rows), b = gemm_operand(products), c = gemm_operand(out);
  if (!a.transposed || !b.transposed || c.transposed != 'N') return false;
  const int64_t m = rows.size(0), n = weight.size(0), k = rows.size(1);
  if (m == 0 || n == 0) return true;
  // The bias goes in first and the product is added to it (beta 1), as addmm does.
  if (bias.defined())
    out.copy_(bias.expand({m, n}));
  else
    out.zero_();
  if (k == 0) return true;
  return sgemm(a.transposed, b.transposed, m, n, k, 1.0f, rows.data_ptr<float>(), a.leading, products.data_ptr<float>(),
               b.leading, 1.0f, out.data_ptr<float>(), c.leading) == 0;
}

// rows [N, C_in] @ weight^T + bias through oneDNN.
torch::Tensor onednn_rows(const torch::Tensor& rows, const torch::Tensor& weight, const torch::Tensor& bias) {
  auto out = torch::empty({rows.size(0), weight.size(0)}, rows.options());
  if (onednn_sgemm_into(out, rows, weight, bias)) return out;
  return at::mkldnn_linear(rows.contiguous().to_mkldnn(), weight.contiguous(),
                           bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt)
      .to_dense();
}

// Whether rows_linear takes oneDNN: inference on the CPU in float32, where it was measured faster.
bool takes_onednn(const torch::Tensor& rows, const torch::Tensor& weight) {
  return cpu_inference(rows) && rows.scalar_type() == torch::kFloat && weight.scalar_type() == torch::kFloat &&
         linear_backend().onednn;
}

// rows [N, C_in] @ weight^T + bias through the chosen GEMM (oneDNN or addmm with the bias fused).
torch::Tensor chosen_gemm(const torch::Tensor& rows, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (takes_onednn(rows, weight)) return onednn_rows(rows, weight, bias);
  return bias.defined() ? torch::addmm(bias, rows, weight.t()) : torch::mm(rows, weight.t());
}

// The same into out [N, C_out], which may be a block of a wider tensor's columns.
void chosen_gemm_into(torch::Tensor& out, const torch::Tensor& rows, const torch::Tensor& weight,
                      const torch::Tensor& bias) {
  if (takes_onednn(rows, weight)) {
    if (!onednn_sgemm_into(out, rows, weight, bias)) out.copy_(onednn_rows(rows, weight, bias));
  } else if (bias.defined()) {
    torch::addmm_out(out, bias, rows, weight.t());
  } else {
    torch::mm_out(out, rows, weight.t());
  }
}

class FrozenOnednnLinear : public torch::autograd::Function<FrozenOnednnLinear> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& rows,
                               const torch::Tensor& weight, const torch::Tensor& bias) {
    context->saved_data["weight"] = weight;
    return onednn_rows(rows, weight, bias);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list gradients) {
    const torch::Tensor weight = context->saved_data["weight"].toTensor();
    ScopedThreads all_cores(configured_threads());
    // dX = dY W: a linear layer whose weight is W^T.
    return {onednn_rows(gradients[0], weight.t(), torch::Tensor()), torch::Tensor(), torch::Tensor()};
  }
};

// The fastest of 7 runs of each, the two run in alternation: load that comes and goes (a
// workbench's first frames, compiled shaders, another process) slows some runs of both alike,
// and the fastest run is what each costs on an idle core.
std::pair<double, double> fastest_alternating_ms(const std::function<void()>& first,
                                                 const std::function<void()>& second) {
  first();  // warm-up: oneDNN builds its kernel on first use
  second();
  const auto time = [](const std::function<void()>& run) {
    const auto start = std::chrono::steady_clock::now();
    run();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  double fastest_first = 1e300, fastest_second = 1e300;
  for (int i = 0; i < 7; ++i) {
    fastest_first = std::min(fastest_first, time(first));
    fastest_second = std::min(fastest_second, time(second));
  }
  return {fastest_first, fastest_second};
}

constexpr double kOnednnMargin = 0.9;

LinearBackendChoice choose_linear_backend() {
  LinearBackendChoice choice;
  if (!at::hasMKLDNN()) {
    choice.reason = "this LibTorch has no oneDNN";
    return choice;
  }
  if (const char* forced = std::getenv("ATTNSCOPE_LINEAR")) {
    const std::string value = forced;
    if (value == "onednn" || value == "blas") {
      choice.onednn = value == "onednn";
      choice.reason = "ATTNSCOPE_LINEAR";
      return choice;
    }
  }
  torch::InferenceMode inference;
  ScopedThreads one_core(1);  // as the row chunks run
  // A DeiT-Small MLP tile (wide) and a Swin-T stage-0 qkv tile (narrow input). Constant values:
  // GEMM time does not depend on them, and drawing random ones would move the caller's RNG.
  const std::vector<std::array<int64_t, 3>> shapes{{256, 384, 1536}, {256, 96, 288}};
  for (const auto& [rows, in, out] : shapes) {
    const auto x = torch::full({rows, in}, 0.5f), weight = torch::full({out, in}, 0.01f);
    const auto bias = torch::full({out}, 0.1f);
    const auto [onednn_ms, blas_ms] =
        fastest_alternating_ms([&] { onednn_rows(x, weight, bias); }, [&] { torch::addmm(bias, x, weight.t()); });
    choice.onednn_ms += onednn_ms;
    choice.blas_ms += blas_ms;
  }
  // oneDNN only where it wins by more than the measurement's spread: on a busy machine the two
  // come within a few percent and flip between runs, and a flip to oneDNN cost Agent-Swin-T's
  // linear layers 116 against 74 ms per forward (its to/from conversions on stage-wide rows).
  choice.onednn = choice.onednn_ms < kOnednnMargin * choice.blas_ms;
  choice.measured = true;
  choice.reason = "measured";
  return choice;
}

}  // namespace

const LinearBackendChoice& linear_backend() {
  static const LinearBackendChoice choice = choose_linear_backend();
  return choice;
}

std::string linear_backend_line() {
  const LinearBackendChoice& choice = linear_backend();
  std::ostringstream line;
  line << "linear layers: " << (choice.onednn ? (onednn_sgemm() ? "oneDNN's sgemm" : "oneDNN's inner product") : "BLAS")
       << " (" << choice.reason;
  if (choice.measured)
    line << std::fixed << std::setprecision(2) << ": oneDNN " << choice.onednn_ms << " ms, BLAS " << choice.blas_ms
         << " ms on one core";
  line << ")\n";
  return line.str();
}

torch::Tensor rows_linear(const torch::nn::Linear& layer, const torch::Tensor& rows) {
  return chosen_gemm(rows, layer->weight, layer->bias);
}

void rows_linear_into(torch::Tensor& out, const torch::nn::Linear& layer, const torch::Tensor& rows) {
  chosen_gemm_into(out, rows, layer->weight, layer->bias);
}

bool splits_by_columns(int64_t rows, const torch::Tensor& input, const torch::Tensor& weight) {
  // Below about a million multiply-adds (a classifier head's one row) waking the other core costs
  // more than it saves.
  constexpr int64_t kMinimumWork = int64_t(1) << 20;
  const int64_t inputs = weight.size(1), outputs = weight.size(0);
  return cpu_inference(input) && input.scalar_type() == torch::kFloat && weight.scalar_type() == torch::kFloat &&
         configured_threads() > 1 && !at::in_parallel_region() && rows <= kColumnSplitMaxRows &&
         outputs >= kMinColumnsPerCore * configured_threads() && rows * inputs * outputs >= kMinimumWork;
}

namespace {

// rows [N, C_in] @ weight^T + bias, each core computing all rows for its block of output columns
// (whose weight rows are contiguous) and applying `epilogue` to it.
torch::Tensor linear_by_column_chunks(const torch::Tensor& weight, const torch::Tensor& bias, const torch::Tensor& rows,
                                      const ColumnEpilogue& epilogue) {
  auto out = torch::empty({rows.size(0), weight.size(0)}, rows.options());
  const auto dense_rows = rows.contiguous();
  for_each_row_chunk(weight.size(0), [&](int64_t begin, int64_t end) {
    const auto block_weight = weight.narrow(0, begin, end - begin);
    const auto block_bias = bias.defined() ? bias.narrow(0, begin, end - begin) : bias;
    auto columns = out.narrow(1, begin, end - begin);
    if (epilogue) {
      // The epilogue on the dense block: an elementwise op over strided columns ran at about half
      // the speed (GELU on DeiT-S's fc1 blocks).
      columns.copy_(epilogue(chosen_gemm(dense_rows, block_weight, block_bias)));
    } else {
      chosen_gemm_into(columns, dense_rows, block_weight, block_bias);
    }
  });
  return out;
}

}  // namespace

torch::Tensor token_linear(const torch::Tensor& weight, const torch::Tensor& bias, const torch::Tensor& x,
                           const ColumnEpilogue& epilogue) {
  std::vector<int64_t> out_shape(x.sizes().begin(), x.sizes().end());
  out_shape.back() = weight.size(0);
  auto rows = x.reshape({-1, x.size(-1)});
  if (splits_by_columns(rows.size(0), rows, weight))
    return linear_by_column_chunks(weight, bias, rows, epilogue).view(out_shape);
  ScopedThreads all_cores(configured_threads());
  torch::Tensor out;
  // With autograd, oneDNN when only the input wants a gradient (attributions freeze the parameters).
  if (x.device().is_cpu() && x.scalar_type() == torch::kFloat && weight.scalar_type() == torch::kFloat &&
      at::hasMKLDNN() && c10::GradMode::is_enabled() && x.requires_grad() && !weight.requires_grad() &&
      !(bias.defined() && bias.requires_grad()))
    out = frozen_onednn_linear(rows, weight, bias);
  else
    out = chosen_gemm(rows, weight, bias);
  return (epilogue ? epilogue(out) : out).view(out_shape);
}

torch::Tensor token_linear(torch::nn::Linear& layer, const torch::Tensor& x, const ColumnEpilogue& epilogue) {
  if (x.dim() < 2) return epilogue ? epilogue(layer->forward(x)) : layer->forward(x);
  return token_linear(layer->weight, layer->bias, x, epilogue);
}

torch::Tensor frozen_onednn_linear(const torch::Tensor& rows, const torch::Tensor& weight, const torch::Tensor& bias) {
  // autograd::Function records every tensor argument and cannot record an undefined one (a layer
  // without bias, such as Swin's patch merging): zeros add nothing.
  if (!bias.defined()) return FrozenOnednnLinear::apply(rows, weight, torch::zeros({weight.size(0)}, weight.options()));
  return FrozenOnednnLinear::apply(rows, weight, bias);
}

}  // namespace attnscope
