#include "analysis/singular_values.h"

#include <dlfcn.h>
#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/backbone.h"

namespace attnscope {

namespace {

// LAPACK's Fortran entry points (gfortran's ABI: a hidden length after the arguments for each
// character argument). They are looked up at run time in what LibTorch already loaded, so the
// build needs no LAPACK of its own.
using LabrdFn = void (*)(const int* m, const int* n, const int* nb, float* a, const int* lda, float* d, float* e,
                         float* tauq, float* taup, float* x, const int* ldx, float* y, const int* ldy);
using Gebd2Fn = void (*)(const int* m, const int* n, float* a, const int* lda, float* d, float* e, float* tauq,
                         float* taup, float* work, int* info);
using BdsqrFn = void (*)(const char* uplo, const int* n, const int* ncvt, const int* nru, const int* ncc, float* d,
                         float* e, float* vt, const int* ldvt, float* u, const int* ldu, float* c, const int* ldc,
                         float* work, int* info, size_t uplo_length);
using GemmFn = void (*)(const char* transa, const char* transb, const int* m, const int* n, const int* k,
                        const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
                        const float* beta, float* c, const int* ldc, size_t transa_length, size_t transb_length);

struct Lapack {
  LabrdFn labrd = nullptr;
  Gebd2Fn gebd2 = nullptr;
  BdsqrFn bdsqr = nullptr;
  GemmFn gemm = nullptr;
  bool complete() const { return labrd && gebd2 && bdsqr && gemm; }
};

const Lapack& lapack() {
  static const Lapack found = [] {
    Lapack l;
    l.labrd = reinterpret_cast<LabrdFn>(dlsym(RTLD_DEFAULT, "slabrd_"));
    l.gebd2 = reinterpret_cast<Gebd2Fn>(dlsym(RTLD_DEFAULT, "sgebd2_"));
    l.bdsqr = reinterpret_cast<BdsqrFn>(dlsym(RTLD_DEFAULT, "sbdsqr_"));
    l.gemm = reinterpret_cast<GemmFn>(dlsym(RTLD_DEFAULT, "sgemm_"));
    return l;
  }();
  return found;
}

// LAPACK's own block size and crossover for sgebrd (ilaenv's defaults).
constexpr int kPanel = 32;
constexpr int kUnblockedBelow = 128;

}  // namespace

bool singular_values_can_stop() { return lapack().complete(); }

torch::Tensor exact_singular_values(torch::Tensor matrix, const SvdProgress& progress) {
  torch::NoGradGuard no_grad;
  if (matrix.dim() != 2) throw std::invalid_argument("exact_singular_values: the matrix must be 2-D");
  const Lapack& l = lapack();
  if (!l.complete() || matrix.numel() == 0)
    return torch::linalg_svdvals(matrix.detach().to(torch::kCPU, torch::kFloat), c10::nullopt);
  // A row-major [R, C] block read column-major is its transpose, which has the same singular values.
  // LAPACK wants m >= n: columns (the row-major rows) no more than rows.
  torch::Tensor a = matrix.detach().to(torch::kCPU, torch::kFloat);
  matrix = torch::Tensor();
  if (a.size(0) > a.size(1)) a = a.transpose(0, 1);
  // Overwritten below: the caller's storage only where nobody else can see it (handed over).
  const bool owned = a.is_contiguous() && a.use_count() == 1 && a.storage().use_count() == 1;
  if (!owned) a = a.clone(at::MemoryFormat::Contiguous);
  if (a.size(0) == a.size(1)) {
    // numpy and LibTorch hand LAPACK the matrix itself, column-major, not its transpose: the same
    // here (a transpose in place, in tiles), so that the rounding is theirs (with the same threads
    // the values are sgesdd's bit for bit).
    float* p = a.data_ptr<float>();
    const int64_t side = a.size(0), tile = 64;
    for (int64_t row_tile = 0; row_tile < side; row_tile += tile)
      for (int64_t col_tile = row_tile; col_tile < side; col_tile += tile)
        for (int64_t i = row_tile; i < std::min(side, row_tile + tile); ++i)
          for (int64_t j = std::max(col_tile, i + 1); j < std::min(side, col_tile + tile); ++j)
            std::swap(p[i * side + j], p[j * side + i]);
  }
  const int m = int(a.size(1)), n = int(a.size(0)), lda = m;
  float* data = a.data_ptr<float>();
  auto at = [&](int row, int col) { return data + size_t(row) + size_t(col) * size_t(lda); };
  const size_t count = static_cast<size_t>(n);
  std::vector<float> d(count), e(count), tauq(count), taup(count);
  std::vector<float> x(static_cast<size_t>(m) * kPanel), y(count * kPanel),
      work(std::max<size_t>(size_t(m), 4 * count));

  // Work left in a trailing (m - i) x (n - i) block is about (m - i)(n - i)^2, as in sgebrd's count.
  auto remaining = [&](int i) { return double(m - i) * double(n - i) * double(n - i); };
  const double total = remaining(0);
  auto checkpoint = [&](int i) {
    if (progress.report) progress.report(1.0 - remaining(i) / total);
    if (progress.cancelled && progress.cancelled()) throw Cancelled();
  };

  // sgebrd's loop: reduce a panel of kPanel columns and rows (slabrd), then update the trailing
  // matrix with two products, A22 -= V Y^T + X U^T.
  int i = 0;
  const int panel = kPanel, ldx = m, ldy = n;
  const float minus_one = -1.0f, one = 1.0f;
  if (n > kUnblockedBelow) {
    for (; i < n - kUnblockedBelow; i += kPanel) {
      const int rows = m - i, cols = n - i, rest_rows = rows - kPanel, rest_cols = cols - kPanel;
      l.labrd(&rows, &cols, &panel, at(i, i), &lda, &d[size_t(i)], &e[size_t(i)], &tauq[size_t(i)], &taup[size_t(i)],
              x.data(), &ldx, y.data(), &ldy);
      l.gemm("N", "T", &rest_rows, &rest_cols, &panel, &minus_one, at(i + kPanel, i), &lda, &y[kPanel], &ldy, &one,
             at(i + kPanel, i + kPanel), &lda, 1, 1);
      l.gemm("N", "N", &rest_rows, &rest_cols, &panel, &minus_one, &x[kPanel], &ldx, at(i, i + kPanel), &lda, &one,
             at(i + kPanel, i + kPanel), &lda, 1, 1);
      for (int j = i; j < i + kPanel; ++j) {
        *at(j, j) = d[size_t(j)];
        *at(j, j + 1) = e[size_t(j)];
      }
      checkpoint(i + kPanel);
    }
  }
  int info = 0;
  const int rows = m - i, cols = n - i;
  l.gebd2(&rows, &cols, at(i, i), &lda, &d[size_t(i)], &e[size_t(i)], &tauq[size_t(i)], &taup[size_t(i)], work.data(),
          &info);
  if (info != 0) throw std::runtime_error("sgebd2 failed (info " + std::to_string(info) + ")");
  // The upper bidiagonal's values only (no vectors): dqds, to high relative accuracy, descending.
  const int none = 0, unit = 1;
  float unused = 0.0f;
  l.bdsqr("U", &n, &none, &none, &none, d.data(), e.data(), &unused, &unit, &unused, &unit, &unused, &unit, work.data(),
          &info, 1);
  if (info != 0)
    throw std::runtime_error("the bidiagonal SVD did not converge (sbdsqr info " + std::to_string(info) + ")");
  if (progress.report) progress.report(1.0);
  return torch::from_blob(d.data(), {n}, torch::kFloat).clone();
}

}  // namespace attnscope
